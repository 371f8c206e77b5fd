//! `throughput`: how many requests a server answers per second when the app is cheap, and where its
//! CPU goes. Hello world, TechEmpower's "json" (a small object serialized per request) and
//! "fortunes" (a sqlite query, sorted, rendered through an HTML-escaping template), with 1 and 2
//! workers, 64 keep-alive clients in a closed loop. The WSGI servers (headway, gunicorn, granian)
//! run the Flask app where the lab's Python has Flask, else the demo app; headway's Rack worker,
//! Puma, uvicorn and Node run the demo's twins. Granian WSGI is the peer to beat on these, so each
//! row shows its requests/s as a ratio to granian's.
//!
//! Each row also shows the CPU time the server used per request, summed over every process of
//! its tree, and split between headway's front and its workers (from headway's stats) or a
//! peer's master and its workers ([`crate::cpu`]).
//!
//! What "ideal" means here. The other scenarios' ideal, min(C, B)/S, needs the service time S,
//! and here S is what is measured: the app's CPU plus the server's own, which is the point. A
//! server with no cost of its own would be bound by the app's CPU alone (cores / the app's CPU
//! per request), which the lab does not measure apart from a server; so the rows carry no ideal
//! (null in the JSON) and no "% of ideal". The table shows instead the measured CPU-bound
//! ceiling: cores / the server's CPU per request, the requests/s it would reach with every core
//! to itself at the cost it measured. A server stays below it when it shares the cores (the load
//! generator runs on the same machine) or waits on something other than the CPU (one event loop,
//! a GIL, a lock): the "cores used" column tells which. The machine's idle and stolen shares tell
//! the rest: with a closed loop, cores left idle mean one stage (a single-threaded one, say) held
//! up the others, and steal means the hypervisor ran another guest, so the case measured a
//! smaller machine.

use std::time::Duration;

use headway_load::Arrival;

use super::plan::{Case, Group, LoadSpec, Scenario, Size, Work};
use crate::chart::Chart;
use crate::cpu::{CpuUse, HostCpu};
use crate::ideal::{Ideal, Service};
use crate::measure::{distinct, rows_where, CaseParams, Row};
use crate::rounds::Headline;
use crate::servers::ServerConfig;
use crate::table::{errors, fixed, megabytes, millis, plural, Table};
use crate::twins::FLASK_APP;

pub const SCENARIO: Scenario = Scenario {
    name: "throughput",
    seed: "",
    about: "hello world, JSON and fortunes (sqlite + template), Flask where installed: requests/s, \
            vs granian WSGI, and CPU per request of every process",
    sizes: "1 and 2 workers x 5 slots; GET /hello, /json, /fortunes; 64 clients, keep-alive; \
            2 s warm-up then 5 s per case (--quick: 0.2 s then 0.5 s)",
    plan,
    tables,
    charts,
    headline: Headline::Throughput,
};

const CLIENTS: usize = 64;
const THREADS: usize = 5;
/// The workloads: path and name.
const PATHS: [(&str, &str); 3] = [("/hello", "hello world"), ("/json", "JSON"), ("/fortunes", "fortunes")];
/// The peer each row is compared with: granian, which the lab runs with its WSGI interface.
const REFERENCE: &str = "granian";
/// No service time or ideal is known before the run (see the module's comment).
const UNKNOWN: Service = Service { mean_secs: f64::NAN, cpu_secs: f64::NAN };
const NO_IDEAL: Ideal = Ideal { rps: f64::NAN, latency_secs: f64::NAN };

fn plan(size: Size, _cores: usize) -> Vec<Group> {
    let (warm_up, measured) = if size.quick { (0.2, 0.5) } else { (2.0, 5.0 * size.scale) };
    [1, 2]
        .into_iter()
        .map(|workers| {
            let mut group =
                Group::new(ServerConfig { app: Some(FLASK_APP.into()), ..ServerConfig::new(workers, THREADS) });
            for (path, name) in PATHS {
                let params = CaseParams {
                    label: format!("{name} ({path})"),
                    connections: CLIENTS,
                    keep_alive: true,
                    workload: Some(path.into()),
                    ..CaseParams::default()
                };
                let load = LoadSpec {
                    targets: vec![(path.into(), 1)],
                    connections: CLIENTS,
                    keep_alive: true,
                    requests: None,
                    duration: Some(Duration::from_secs_f64(measured)),
                    rate: None,
                    arrival: Arrival::Constant,
                    timeout: Duration::from_secs(20),
                    http2_streams: None,
                };
                let work = Work::WarmedLoad { warm_up: Duration::from_secs_f64(warm_up), load };
                group.cases.push(Case { params, service: UNKNOWN, ideal: NO_IDEAL, work });
            }
            group
        })
        .collect()
}

const HEADER: [&str; 18] = [
    "server",
    "app",
    "path",
    "requests",
    "rps",
    "vs granian",
    "p50 ms",
    "p99 ms",
    "CPU µs/req",
    "main µs",
    "workers µs",
    "load µs",
    "cores used",
    "ceiling/s",
    "idle %",
    "steal %",
    "errors",
    "MB",
];

/// One table per worker count, rows by path, then by server in the order they ran.
fn tables(rows: &[Row]) -> Vec<Table> {
    // The tables are made on the machine that ran the cases, right after them.
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    distinct(rows, |row| row.workers)
        .into_iter()
        .map(|workers| table(&rows_where(rows, |row| row.workers == workers), cores))
        .collect()
}

fn table(rows: &[&Row], cores: usize) -> Table {
    let group = rows.first().map_or(String::new(), |row| row.group.clone());
    let title = format!("throughput: {group}, {CLIENTS} clients, keep-alive (closed loop)");
    let mut table = Table::new(title, &HEADER, 3);
    for path in distinct(rows.iter().copied(), |row| row.case.workload.clone()) {
        let reference = rows.iter().find(|row| row.server == REFERENCE && row.case.workload == path);
        for row in rows.iter().filter(|row| row.case.workload == path) {
            let cpu = |us: fn(&CpuUse) -> f64| fixed(row.cpu.as_ref().map_or(f64::NAN, us), 1);
            let server_secs = row.cpu.as_ref().map_or(f64::NAN, |cpu| cpu.server_secs);
            let server_us = row.cpu.as_ref().map_or(f64::NAN, |cpu| cpu.server_us_per_request);
            let host = |share: fn(&HostCpu) -> f64| fixed(row.host.as_ref().map_or(f64::NAN, share) * 100.0, 0);
            table.push(vec![
                row.server.clone(),
                row.app.clone(),
                path.clone().unwrap_or_default(),
                row.requests.to_string(),
                fixed(row.rps, 0),
                fixed(reference.map_or(f64::NAN, |reference| row.rps / reference.rps), 2),
                millis(row.latency(50.0).unwrap_or(f64::NAN)),
                millis(row.latency(99.0).unwrap_or(f64::NAN)),
                cpu(|cpu| cpu.server_us_per_request),
                cpu(|cpu| cpu.main_us_per_request),
                cpu(|cpu| cpu.workers_us_per_request),
                fixed(row.load_us_per_request.unwrap_or(f64::NAN), 1),
                fixed(server_secs / row.elapsed_secs, 2),
                fixed(cores as f64 * 1e6 / server_us, 0),
                host(|host| host.idle_share),
                host(|host| host.steal_share),
                errors(row),
                megabytes(row.peak_rss_bytes),
            ]);
        }
    }
    table
        .note(format!(
            "app: {} where the lab's Python has Flask (jsonify, a Jinja template), else the demo app; \
             headway's Rack worker, Puma (alone or behind headway), uvicorn and Node run the demo's Rack, \
             ASGI and Node twins; every app answers the same bytes",
            FLASK_APP.split(':').next().unwrap_or(FLASK_APP)
        ))
        .note(format!("vs granian = requests/s / {REFERENCE} (WSGI)'s on the same path and workers, in this run"))
        .note(
            "CPU µs/req = user + system time of every process of the server (/proc, 10 ms ticks) during the case, \
             per request answered; the load generator runs in the lab's own process and is not counted",
        )
        .note(
            "load µs = the load generator's own CPU per request (its thread's user + system time): it shares the \
             cores with the server, so a server whose answers cost it more (waking it once per answer rather than \
             once per batch, say) leaves less of the machine to itself",
        )
        .note(
            "main / workers = headway's front process / its workers' process groups (from its stats); for a peer, \
             the process the lab started (its master, or the whole server when it runs as one process) / the others",
        )
        .note(format!(
            "cores used = the server's CPU time / the case's wall time, of {} on this machine, which the load \
             generator (one thread) shares",
            plural(cores, "core")
        ))
        .note(
            "ceiling/s = cores / CPU per request: the requests/s this server would reach with every core to itself \
             at the cost it measured; no ideal is known beforehand (it would need the app's CPU apart from any server)",
        )
        .note(
            "idle % / steal % = the machine's core time (/proc/stat) that sat idle / that the hypervisor gave to \
             another guest during the case; with 64 clients in a closed loop, idle cores mean a stage of the server \
             or the load generator waited on another, and steal makes the case's machine smaller than it looks",
        )
}

/// Per worker count: requests/s and CPU per request, a bar per path for each server.
fn charts(rows: &[Row]) -> Vec<Chart> {
    let mut charts = Vec::new();
    for group in distinct(rows, |row| row.group.clone()) {
        let picked = rows_where(rows, |row| row.group == group);
        let servers = distinct(picked.iter().copied(), |row| row.server.clone());
        let paths = distinct(picked.iter().copied(), |row| row.case.workload.clone().unwrap_or_default());
        let bars = |title: String, y_label: &str, value: fn(&Row) -> f64| Chart::Bars {
            title,
            y_label: y_label.into(),
            categories: servers.clone(),
            series: paths.clone(),
            values: paths
                .iter()
                .map(|path| {
                    servers
                        .iter()
                        .map(|server| {
                            picked
                                .iter()
                                .find(|row| &row.server == server && row.case.workload.as_deref() == Some(path))
                                .map_or(f64::NAN, |row| value(row))
                        })
                        .collect()
                })
                .collect(),
        };
        charts.push(bars(format!("throughput, {group}: requests/s"), "requests / s", |row| row.rps));
        charts.push(bars(format!("throughput, {group}: CPU per request, all processes"), "µs of CPU", |row| {
            row.cpu.as_ref().map_or(f64::NAN, |cpu| cpu.server_us_per_request)
        }));
    }
    charts
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::RowContext;

    fn row(server: &str, app: &str, path: &str, rps: f64, server_us: f64, main_us: f64) -> Row {
        let params = CaseParams { workload: Some(path.into()), connections: CLIENTS, ..CaseParams::default() };
        let mut row = Row::empty(RowContext {
            scenario: "throughput",
            server,
            group: "2 workers x 5 slots",
            workers: 2,
            threads: THREADS,
            app,
            case: &params,
            service: UNKNOWN,
            ideal: NO_IDEAL,
            peak_rss_bytes: 50 << 20,
        });
        row.elapsed_secs = 5.0;
        row.requests = (rps * row.elapsed_secs) as u64;
        row.rps = rps;
        row.status_codes.insert(200, row.requests);
        row.host = Some(HostCpu { idle_share: 0.13, steal_share: 0.02 });
        row.load_us_per_request = Some(9.3);
        let per_request = |us: f64| us * row.requests as f64 / 1e6;
        row.cpu = Some(CpuUse {
            server_secs: per_request(server_us),
            main_secs: per_request(main_us),
            workers_secs: per_request(server_us - main_us),
            server_us_per_request: server_us,
            main_us_per_request: main_us,
            workers_us_per_request: server_us - main_us,
        });
        row
    }

    /// The ceiling for `us` of CPU per request on this machine's cores, as the table prints it.
    fn ceiling(us: f64) -> String {
        let cores = std::thread::available_parallelism().map_or(1, usize::from) as f64;
        format!("{:.0}", cores * 1e6 / us)
    }

    #[test]
    fn rows_compare_with_granian_on_the_same_path_and_show_where_the_cpu_goes() {
        let rows = [
            row("headway", "Flask 3.1.3", "/hello", 10_000.0, 120.0, 40.0),
            row("headway", "Flask 3.1.3", "/json", 8_000.0, 150.0, 40.0),
            row("granian", "Flask 3.1.3", "/hello", 40_000.0, 35.0, 0.5),
            row("node", "demo.js", "/hello", 20_000.0, 60.0, 10.0),
        ];
        let tables = tables(&rows);
        assert_eq!(tables.len(), 1, "one table per worker count");
        let table = &tables[0];
        assert_eq!(table.header, HEADER);
        assert_eq!(table.title, "throughput: 2 workers x 5 slots, 64 clients, keep-alive (closed loop)");
        let cells: Vec<Vec<&str>> = table.rows.iter().map(|row| row.iter().map(String::as_str).collect()).collect();
        // By path, then servers in the order they ran; p50/p99 unknown here.
        let first = ["headway", "Flask 3.1.3", "/hello", "50000", "10000", "0.25", "-", "-", "120.0", "40.0", "80.0"];
        assert_eq!(cells[0][..11], first);
        assert_eq!(cells[0][11..], ["9.3", "1.20", &ceiling(120.0), "13", "2", "0", "50"], "6 s of CPU in 5 s; 50 MB");
        assert_eq!(cells[1][..6], ["granian", "Flask 3.1.3", "/hello", "200000", "40000", "1.00"]);
        assert_eq!(cells[2][..6], ["node", "demo.js", "/hello", "100000", "20000", "0.50"]);
        assert_eq!(
            cells[3][..6],
            ["headway", "Flask 3.1.3", "/json", "40000", "8000", "-"],
            "no granian row for /json"
        );
        assert_eq!(cells[1][13], ceiling(35.0));
        let text = table.render();
        assert!(text.lines().nth(1).is_some_and(|header| header.starts_with("server   app")), "{text}");
        assert!(text.contains("ceiling/s = cores / CPU per request"), "{text}");
    }

    #[test]
    fn a_case_without_cpu_figures_shows_dashes() {
        let mut without = row("puma", "demo.ru (Rack)", "/fortunes", 0.0, 0.0, 0.0);
        without.cpu = None;
        without.requests = 0;
        without.host = None;
        without.load_us_per_request = None;
        let cells = &tables(&[without])[0].rows[0];
        assert_eq!(cells[8..16], ["-", "-", "-", "-", "-", "-", "-", "-"]);
    }

    #[test]
    fn the_plan_asks_for_flask_with_one_and_two_workers() {
        let groups = plan(Size { quick: true, scale: 1.0, rounds: 1 }, 2);
        let workers: Vec<usize> = groups.iter().map(|group| group.config.workers).collect();
        assert_eq!(workers, [1, 2]);
        for group in &groups {
            assert_eq!(group.config.app.as_deref(), Some(FLASK_APP));
            let paths: Vec<&str> = group.cases.iter().filter_map(|case| case.params.workload.as_deref()).collect();
            assert_eq!(paths, ["/hello", "/json", "/fortunes"]);
        }
    }
}
