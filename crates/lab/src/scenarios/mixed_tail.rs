//! `mixed-tail`: most requests fast, a few slow (90 % take 20 ms, 10 % take 500 ms), 2 workers x
//! 2 slots. With a queue per worker a fast request that lands behind a slow one waits for it
//! although the other worker may be idle: the case where per-worker queues hurt most. One FIFO
//! queue removes that, but from 8 clients on a fast request still waits for the slow ones ahead of
//! it; headway's lanes let it go first. So headway runs twice, with its lanes on (as it ships) and
//! off (one FIFO order), beside the peers; and besides the closed loops, an open loop of Poisson
//! arrivals at 80 % of capacity. The table shows the fast and slow requests' own percentiles,
//! each against its own ideal, and the charts draw them per server.

use std::time::Duration;

use headway_load::Arrival;

use super::plan::{sleep_path, time_limit, Case, Group, LoadSpec, Scenario, Size, Work};
use super::views;
use crate::chart::Chart;
use crate::ideal::{closed_loop, open_loop, Service};
use crate::measure::{distinct, rows_by_server, CaseParams, Row};
use crate::rounds::Headline;
use crate::servers::ServerConfig;
use crate::table::{fixed, normalized_with, on_off, Column, Table};

pub const SCENARIO: Scenario = Scenario {
    name: "mixed-tail",
    seed: "",
    about: "90 % of requests take 20 ms, 10 % take 500 ms, 2 workers x 2 slots: fast requests stuck behind slow ones; \
            headway with its lanes on and off",
    sizes: "2 workers x 2 slots; GET /sleep/20 (weight 9) and /sleep/500 (weight 1); 4 and 8 clients; \
            keep-alive on and off; 400 requests per case, the first after 3 s of the same load unmeasured; \
            then an open loop of Poisson arrivals at 80 % of capacity (47/s) over up to 64 connections for 30 s; \
            every server, and headway again with --no-lanes \
            (--quick: 8 clients, keep-alive on, 40 requests after 1 s; the open loop for 3 s)",
    plan,
    tables,
    charts,
    headline: Headline::TailLatency,
};

pub(super) const FAST_MS: u32 = 20;
pub(super) const SLOW_MS: u32 = 500;

/// The mix: 9 fast requests to 1 slow one.
pub(super) fn service() -> Service {
    Service::mix(&[(Service::waiting_ms(FAST_MS as f64), 9.0), (Service::waiting_ms(SLOW_MS as f64), 1.0)])
}

/// The paths of the mix, with their weights.
pub(super) fn targets() -> Vec<(String, u32)> {
    vec![(sleep_path(FAST_MS), 9), (sleep_path(SLOW_MS), 1)]
}

/// Each kind's percentiles against its own ideal, as table columns.
pub(super) const KINDS: [Column; 4] = [
    ("fast 50%", |row| fixed(kind_ratio(row, FAST_MS, 50.0), 2)),
    ("fast 99%", |row| fixed(kind_ratio(row, FAST_MS, 99.0), 2)),
    ("slow 50%", |row| fixed(kind_ratio(row, SLOW_MS, 50.0), 2)),
    ("slow 99%", |row| fixed(kind_ratio(row, SLOW_MS, 99.0), 2)),
];

/// What the kinds' columns mean, for a table's notes.
pub(super) const KINDS_NOTE: &str = "fast / slow = the /sleep/20 and /sleep/500 requests alone, percentile / \
     their own ideal: in one FIFO queue both kinds share the mean wait for a slot (ideal ms less the mean \
     service time), so a kind's ideal is its service time plus that wait";

/// The open loop's rate, as a share of what the slots can serve.
const OPEN_LOAD: f64 = 0.8;
const OPEN_CONNECTIONS: usize = 64;

/// Every server with headway as it ships (lanes on); then headway alone with its lanes off.
fn plan(size: Size, cores: usize) -> Vec<Group> {
    Group::lanes_on_and_off(ServerConfig::new(2, 2), |group| cases(group, size, cores))
}

fn cases(mut group: Group, size: Size, cores: usize) -> Group {
    let service = service();
    let targets = targets();
    let workload = Some(format!("90% {FAST_MS} ms + 10% {SLOW_MS} ms"));
    let capacity = group.capacity(cores);
    let (clients, keep_alives, requests, warm_up, open_secs): (&[usize], &[bool], u64, f64, f64) = if size.quick {
        (&[8], &[true], 40, 1.0, 3.0)
    } else {
        (&[4, 8], &[true, false], size.requests(400.0, 20), 3.0, (30.0 * size.scale).max(3.0))
    };
    for &keep_alive in keep_alives {
        for &connections in clients {
            let ideal = closed_loop(capacity, service, connections);
            let params = CaseParams {
                label: format!("{connections} clients, keep-alive {}", on_off(keep_alive)),
                connections,
                mult: Some(connections as f64 / 4.0),
                keep_alive,
                workload: workload.clone(),
                ..CaseParams::default()
            };
            let mut load =
                LoadSpec::closed(&sleep_path(FAST_MS), connections, keep_alive, requests, time_limit(requests, ideal));
            load.targets = targets.clone();
            // The first case after the same load unmeasured: headway's lanes learn each route from
            // its first finished request, and a server serves the cases that follow warm.
            let work = match group.cases.is_empty() {
                true => Work::WarmedLoad { warm_up: Duration::from_secs_f64(warm_up), load },
                false => Work::Load(load),
            };
            group.cases.push(Case { params, service, ideal, work });
        }
    }
    let rate = OPEN_LOAD * capacity.max_throughput(service);
    let params = CaseParams {
        label: format!("open loop, {rate:.0}/s ({:.0} % of capacity)", OPEN_LOAD * 100.0),
        connections: OPEN_CONNECTIONS,
        keep_alive: true,
        workload,
        rate: Some(rate),
        ..CaseParams::default()
    };
    let duration = Duration::from_secs_f64(open_secs);
    let load = LoadSpec::open(targets, OPEN_CONNECTIONS, rate, duration, Arrival::Poisson, Duration::from_secs(20));
    group.cases.push(Case { params, service, ideal: open_loop(capacity, service, rate), work: Work::Load(load) });
    group
}

/// The latency at `percent` of the requests that sleep `ms`, as a multiple of their own ideal.
fn kind_ratio(row: &Row, ms: u32, percent: f64) -> f64 {
    let ideal = row.ideal.latency_of_kind(row.service, Service::waiting_ms(ms as f64));
    row.path_latency(&sleep_path(ms), percent).map_or(f64::NAN, |secs| secs / ideal)
}

/// The kinds' chart series: name, the kind's delay, the percentile.
const KIND_SERIES: [(&str, u32, f64); 4] = [
    ("fast 50%", FAST_MS, 50.0),
    ("fast 99%", FAST_MS, 99.0),
    ("slow 50%", SLOW_MS, 50.0),
    ("slow 99%", SLOW_MS, 99.0),
];

fn tables(rows: &[Row]) -> Vec<Table> {
    let all = rows_by_server(rows);
    let title = "mixed-tail: 2 workers x 2 slots, 90% GET /sleep/20 + 10% GET /sleep/500 (mean service 68 ms)";
    let key: [Column; 3] = [
        ("loop", |row| row.case.rate.map_or_else(|| "closed".to_owned(), |rate| format!("open {rate:.0}/s"))),
        ("keep-alive", |row| on_off(row.case.keep_alive).to_owned()),
        ("lanes", |row| row.lanes.map_or("-", on_off).to_owned()),
    ];
    let table = normalized_with(title.into(), &all, &key, &KINDS)
        .note("ideal uses the mean service time (68 ms): with a mix the percentiles spread around it even for a perfect FIFO queue")
        .note(KINDS_NOTE);
    let table = kind_ideals(rows).into_iter().fold(table, Table::note).note(
        "a fast 99% near the stuck ratio: fast requests waited out slow ones in their worker's own queue while \
         slots elsewhere may have been free; with one queue they wait only their turn",
    );
    let table = table
        .note(
            "lanes: headway's lanes on (as it ships: fast requests first, a slow one passed over for at most half \
             the slow requests' service time) or off (--no-lanes: one FIFO order); the peers have none (-); \
             the first closed case runs after a few seconds of the same load, unmeasured, in which the lanes learn the routes",
        )
        .note(
            "open loop: Poisson arrivals at 80 % of capacity over up to 64 connections, latency from each request's \
             due time; its ideal is each kind's own service time (nothing need wait below capacity), which no order \
             reaches with 4 slots: a fast request arriving while all four run slow ones waits for one of them \
             (docs/design/lanes.md)",
        );
    vec![table]
}

/// Per client count, each kind's ideal and the latency of a fast request stuck behind a slow one
/// as a multiple of the fast ideal, e.g. "ideal with 8 clients: fast 20 + 68 = 88 ms, slow 500 + 68
/// = 568 ms; a fast request stuck behind a slow one: 520 ms = 5.9 x the fast ideal".
pub(super) fn kind_ideals(rows: &[Row]) -> Vec<String> {
    let describe = |connections: usize| {
        let row = rows.iter().find(|row| row.case.connections == connections)?;
        let wait_ms = row.ideal.wait_secs(row.service) * 1e3;
        let ideal_ms = |ms: u32| row.ideal.latency_of_kind(row.service, Service::waiting_ms(ms as f64)) * 1e3;
        let kind = |name: &str, ms: u32| {
            if wait_ms > 0.0 {
                format!("{name} {ms} + {wait_ms:.0} = {:.0} ms", ideal_ms(ms))
            } else {
                format!("{name} {ms} ms")
            }
        };
        let stuck_ms = SLOW_MS + FAST_MS;
        let stuck = fixed(stuck_ms as f64 / ideal_ms(FAST_MS), 1);
        Some(format!(
            "ideal with {connections} clients: {}, {}; a fast request stuck behind a slow one: {stuck_ms} ms = {stuck} x the fast ideal (the stuck ratio)",
            kind("fast", FAST_MS),
            kind("slow", SLOW_MS)
        ))
    };
    let closed = rows.iter().filter(|row| row.case.rate.is_none());
    distinct(closed, |row| row.case.connections).into_iter().filter_map(describe).collect()
}

/// Per case: the fast and slow requests' percentiles against their own ideal, one bar group per
/// server (headway with its lanes on and off apart); then every case's percentiles and histograms.
fn charts(rows: &[Row]) -> Vec<Chart> {
    let mut charts = Vec::new();
    for case in distinct(rows, |row| row.case.label.clone()) {
        let picked: Vec<&Row> = rows.iter().filter(|row| row.case.label == case).collect();
        charts.push(Chart::Bars {
            title: format!("mixed-tail, {case}: fast and slow requests, percentile / their own ideal"),
            y_label: "latency / ideal".into(),
            categories: picked.iter().map(|row| row.server_label()).collect(),
            series: KIND_SERIES.iter().map(|(name, _, _)| name.to_string()).collect(),
            values: KIND_SERIES
                .iter()
                .map(|&(_, ms, percent)| picked.iter().map(|row| kind_ratio(row, ms, percent)).collect())
                .collect(),
        });
    }
    charts.extend(views::per_case("mixed-tail", rows));
    charts
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::{PathLatency, RowContext, TABLE_PERCENTILES};

    #[test]
    fn headway_runs_again_with_its_lanes_off_and_each_group_ends_in_an_open_loop() {
        let size = Size { quick: false, scale: 1.0, rounds: 1 };
        let groups = plan(size, 2);
        assert_eq!(groups.len(), 2);
        let (on, off) = (&groups[0], &groups[1]);
        assert!(
            (on.config.lanes, on.headway_only) == (true, false)
                && (off.config.lanes, off.headway_only) == (false, true)
        );
        assert_eq!(off.label, "2 workers x 2 slots, lanes off");
        for group in &groups {
            let labels: Vec<&str> = group.cases.iter().map(|case| case.params.label.as_str()).collect();
            assert_eq!(labels[4], "open loop, 47/s (80 % of capacity)");
            assert!(matches!(group.cases[0].work, Work::WarmedLoad { .. }), "the first case learns the routes first");
            assert!(group.cases[1..].iter().all(|case| !matches!(case.work, Work::WarmedLoad { .. })));
            let Work::Load(open) = &group.cases[4].work else { panic!("the open loop is a load") };
            assert_eq!((open.arrival, open.connections, open.requests), (Arrival::Poisson, 64, Some(1411)));
            assert!((open.rate.unwrap() - 0.8 * 4.0 / 0.068).abs() < 1e-9);
            // Below capacity nothing need wait: each kind's ideal is its own service time.
            let case = &group.cases[4];
            assert!((case.ideal.latency_of_kind(case.service, Service::waiting_ms(20.0)) - 0.020).abs() < 1e-9);
        }
    }

    /// A row of `server` whose fast and slow requests' p99 are `fast` and `slow` seconds.
    fn row(server: &str, lanes: Option<bool>, fast: f64, slow: f64) -> Row {
        let case = CaseParams { label: "8 clients, keep-alive on".into(), connections: 8, ..CaseParams::default() };
        let service =
            Service::mix(&[(Service::waiting_ms(FAST_MS as f64), 9.0), (Service::waiting_ms(SLOW_MS as f64), 1.0)]);
        let capacity = crate::ideal::Capacity { workers: 2, threads: 2, cores: 2 };
        let context = RowContext {
            scenario: "mixed-tail",
            server,
            group: "2 workers x 2 slots",
            workers: 2,
            threads: 2,
            app: "demo",
            case: &case,
            service,
            ideal: closed_loop(capacity, service, 8),
            peak_rss_bytes: 0,
        };
        let mut row = Row::empty(context);
        row.lanes = lanes;
        let path = |ms, secs| PathLatency {
            path: sleep_path(ms),
            requests: 1,
            latency_secs: vec![secs; TABLE_PERCENTILES.len()],
        };
        row.paths = vec![path(FAST_MS, fast), path(SLOW_MS, slow)];
        row
    }

    #[test]
    fn headway_with_its_lanes_off_is_shown_beside_headway() {
        let rows = [
            row("headway", Some(true), 0.088, 1.136),
            row("granian", None, 0.44, 0.568),
            row("headway", Some(false), 0.176, 0.568),
        ];
        let table = &tables(&rows)[0];
        let column = |name: &str| {
            let index = table.header.iter().position(|header| header == name).expect("a column");
            table.rows.iter().map(|cells| cells[index].clone()).collect::<Vec<_>>()
        };
        assert_eq!(column("server"), ["headway", "headway", "granian"]);
        assert_eq!(column("lanes"), ["on", "off", "-"]);
        assert_eq!(column("fast 99%"), ["1.00", "2.00", "5.00"]);
        assert_eq!(column("slow 99%"), ["2.00", "1.00", "1.00"]);
        let Chart::Bars { categories, series, values, .. } = &charts(&rows)[0] else { panic!("bars first") };
        assert_eq!(categories, &["headway", "granian", "headway, lanes off"]);
        assert_eq!(series, &["fast 50%", "fast 99%", "slow 50%", "slow 99%"]);
        assert_eq!(values[1], [1.0, 5.0, 2.0]);
    }
}
