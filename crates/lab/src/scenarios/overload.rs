//! `overload` (seed 004, "Lowering H12 errors on Heroku"): hundreds of clients at once, then open
//! loops at 1.5, 2 and 3 times the capacity, and the same burst into a server started just for
//! it. A server must either queue (latency grows for as long as the overload lasts, until clients
//! time out, as Heroku's router does at 30 s) or turn the excess away. Turning it away is not
//! enough: a queue that only has a deadline stays full to it, so every request it serves waits
//! the whole deadline. The table therefore keeps the served requests' latency apart from the
//! refusals', next to the goodput (served per second as a share of capacity), with the memory
//! it took.

use std::time::Duration;

use headway_load::Arrival;

use super::plan::{sleep_path, Case, Group, LoadSpec, Scenario, Size, Work};
use crate::chart::Chart;
use crate::ideal::{closed_loop, open_loop, Capacity, Service};
use crate::measure::{distinct, rows_where, CaseParams, Row};
use crate::rounds::Headline;
use crate::servers::ServerConfig;
use crate::table::{fixed, megabytes, millis, Table};

pub const SCENARIO: Scenario = Scenario {
    name: "overload",
    seed: "004",
    about: "a burst far above capacity, open loops at 1.5, 2 and 3 x capacity, and the burst into a fresh server: \
            served latency and goodput, 503s, timeouts, memory",
    sizes: "2 workers x 4 slots; GET /sleep/100 (capacity 80/s); a burst of 400 clients with one request each; \
            then 120, 160 and 240 requests/s for 10 s each over up to 400 connections; then a server started \
            for it alone (no warm-up) gets the burst; 10 s client timeout; headway with --queue-timeout 2 \
            (--quick: 40 clients, then 160/s for 3 s over up to 240 connections, 5 s timeout)",
    plan,
    tables,
    charts,
    headline: Headline::TailLatency,
};

const DELAY_MS: u32 = 100;
/// headway's queue deadline here: a request that cannot start within 2 s gets 503 at once.
const QUEUE_TIMEOUT_SECS: f64 = 2.0;
/// The open loops' rates, as multiples of the capacity (--quick: the middle one).
const OVERLOADS: [f64; 3] = [1.5, 2.0, 3.0];
/// How the case on a server started for it alone ends its label.
const FRESH: &str = "into a fresh server";

fn plan(size: Size, cores: usize) -> Vec<Group> {
    let config = ServerConfig { queue_timeout: Some(QUEUE_TIMEOUT_SECS), ..ServerConfig::new(2, 4) };
    let mut group = Group::new(config.clone());
    let service = Service::waiting_ms(DELAY_MS as f64);
    let capacity = group.capacity(cores);
    // The open loop's connections bound what can wait in a server's queue (connections - slots),
    // so even the quick run keeps enough of them for waits past the queue deadline, and 503s.
    let (burst, open_connections, open_secs, timeout, overloads) = if size.quick {
        (40, 240, 3.0, 5, &OVERLOADS[1..2])
    } else {
        let clients = size.requests(400.0, 10) as usize;
        (clients, clients, 10.0, 10, &OVERLOADS[..])
    };
    let timeout = Duration::from_secs(timeout);

    group.cases.push(burst_case(capacity, service, burst, timeout, format!("burst of {burst} clients")));
    for &times in overloads {
        let rate = times * capacity.max_throughput(service);
        let params = CaseParams {
            label: format!("{rate:.0}/s for {open_secs:.0} s ({times} x capacity)"),
            connections: open_connections,
            keep_alive: true,
            delay_ms: Some(DELAY_MS as f64),
            rate: Some(rate),
            ..CaseParams::default()
        };
        let targets = vec![(sleep_path(DELAY_MS), 1)];
        let duration = Duration::from_secs_f64(open_secs);
        let spec = LoadSpec::open(targets, open_connections, rate, duration, Arrival::Constant, timeout);
        group.cases.push(Case { params, service, ideal: open_loop(capacity, service, rate), work: Work::Load(spec) });
    }
    if size.quick {
        return vec![group];
    }
    // The same burst before the server has served anything: headway has measured no service time.
    let mut fresh = Group::new(config);
    fresh.label = format!("{}, fresh", fresh.label);
    fresh.fresh = true;
    fresh.cases.push(burst_case(capacity, service, burst, timeout, format!("burst of {burst} {FRESH}")));
    vec![group, fresh]
}

/// `clients` clients with one request each, all at once.
fn burst_case(capacity: Capacity, service: Service, clients: usize, timeout: Duration, label: String) -> Case {
    let params = CaseParams {
        label,
        connections: clients,
        mult: Some(clients as f64 / capacity.slots() as f64),
        delay_ms: Some(DELAY_MS as f64),
        ..CaseParams::default()
    };
    let mut spec = LoadSpec::closed(&sleep_path(DELAY_MS), clients, false, clients as u64, Duration::from_secs(60));
    spec.timeout = timeout;
    Case { params, service, ideal: closed_loop(capacity, service, clients), work: Work::Load(spec) }
}

/// What the slots can serve per second: the demo's sleeps cost no CPU, so the slots are the limit.
fn capacity_rps(row: &Row) -> f64 {
    (row.workers * row.threads) as f64 / row.service.mean_secs
}

fn tables(rows: &[Row]) -> Vec<Table> {
    let header = [
        "server",
        "case",
        "sent",
        "2xx",
        "503",
        "timeouts",
        "other",
        "2xx/s",
        "goodput %",
        "2xx p50 ms",
        "2xx p99 ms",
        "2xx max ms",
        "5xx p50 ms",
        "5xx p99 ms",
        "MB",
        "queue max",
    ];
    let mut table = Table::new("overload: 2 workers x 4 slots, GET /sleep/100 (capacity 80 requests/s)", &header, 2);
    for row in rows {
        let ok: u64 = row.status_codes.iter().filter(|(code, _)| (200..300).contains(*code)).map(|(_, n)| n).sum();
        let timeouts = row.timeouts();
        let other = row.errors.saturating_sub(timeouts) + row.non_2xx().saturating_sub(row.status(503));
        let served_per_sec = ok as f64 / row.elapsed_secs;
        table.push(vec![
            row.server.clone(),
            row.case.label.clone(),
            (row.requests + row.errors).to_string(),
            ok.to_string(),
            row.status(503).to_string(),
            timeouts.to_string(),
            other.to_string(),
            fixed(served_per_sec, 1),
            fixed(served_per_sec / capacity_rps(row) * 100.0, 0),
            millis(row.class_latency("2xx", 50.0).unwrap_or(f64::NAN)),
            millis(row.class_latency("2xx", 99.0).unwrap_or(f64::NAN)),
            millis(row.class_latency("2xx", 100.0).unwrap_or(f64::NAN)),
            millis(row.class_latency("5xx", 50.0).unwrap_or(f64::NAN)),
            millis(row.class_latency("5xx", 99.0).unwrap_or(f64::NAN)),
            megabytes(row.peak_rss_bytes),
            row.queue_high_water.map_or("-".into(), |n| n.to_string()),
        ]);
    }
    // Share of each open loop that no server can serve: what the ideal turns away.
    let turned_away: Vec<String> =
        distinct(rows.iter().filter(|row| row.case.rate.is_some()), |row| row.case.label.clone())
            .into_iter()
            .filter_map(|label| {
                let row = rows.iter().find(|row| row.case.label == label)?;
                let rate = row.case.rate?;
                Some(format!("{:.0} % of {rate:.0}/s", (1.0 - row.ideal.rps / rate) * 100.0))
            })
            .collect();
    let mut table = table
        .note("2xx = latency of the served requests alone; 5xx = of the 5xx answers alone (headway's 503s); - = none came")
        .note("goodput = 2xx per second as % of the capacity; timeouts = no answer within the client's timeout")
        .note(format!(
            "headway runs with --queue-timeout {QUEUE_TIMEOUT_SECS} and its default controlled delay: a request whose \
             turn would come after 2 s gets 503 on arrival; once the queue has stood above its target wait (here \
             50 ms) for 100 ms and kept growing, it keeps only what starts within the target and refuses the rest at \
             once, so the served wait about the target instead of the deadline"
        ))
        .note("the burst's ideal: every request served, the last after (clients / slots) x 100 ms");
    if rows.iter().any(|row| row.case.label.ends_with(FRESH)) {
        table = table.note(
            "fresh server: started for the burst alone, with no warm-up; headway knows no service time until its first \
             round of requests has finished, and then refuses what cannot start within 2 s",
        );
    }
    if !turned_away.is_empty() {
        table = table.note(format!(
            "the open loops' ideal: 80 served per second (goodput 100 %), the rest turned away at once: {}",
            turned_away.join(", ")
        ));
    }
    vec![table]
}

fn charts(rows: &[Row]) -> Vec<Chart> {
    distinct(rows, |row| row.case.label.clone())
        .into_iter()
        .map(|case| {
            let picked = rows_where(rows, |row| row.case.label == case);
            let ok = |row: &Row| {
                row.status_codes.iter().filter(|(c, _)| (200..300).contains(*c)).map(|(_, n)| *n).sum::<u64>() as f64
            };
            Chart::Bars {
                title: format!("overload, {case}: outcome of each request"),
                y_label: "requests".into(),
                categories: picked.iter().map(|row| row.server.clone()).collect(),
                series: vec!["2xx".into(), "503".into(), "timeout".into()],
                values: vec![
                    picked.iter().map(|row| ok(row)).collect(),
                    picked.iter().map(|row| row.status(503) as f64).collect(),
                    picked.iter().map(|row| row.timeouts() as f64).collect(),
                ],
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::RowContext;

    /// headway's row for `case`: `served` 200s and `refused` 503s over `secs`.
    fn row(case: &CaseParams, served: u64, refused: u64, secs: f64) -> Row {
        let capacity = Capacity { workers: 2, threads: 4, cores: 2 };
        let service = Service::waiting_ms(100.0);
        let ideal = open_loop(capacity, service, case.rate.unwrap_or(80.0));
        let context = RowContext {
            scenario: "overload",
            server: "headway",
            group: "2 workers x 4 slots",
            workers: 2,
            threads: 4,
            app: "demo",
            case,
            service,
            ideal,
            peak_rss_bytes: 0,
        };
        let mut row = Row::empty(context);
        row.status_codes = [(200, served), (503, refused)].into_iter().collect();
        row.requests = served + refused;
        row.elapsed_secs = secs;
        row
    }

    #[test]
    fn goodput_is_the_served_rate_as_a_share_of_the_capacity() {
        let case = |label: &str, rate| CaseParams { label: label.into(), rate, ..CaseParams::default() };
        let rows = [
            row(&case("160/s for 10 s (2 x capacity)", Some(160.0)), 780, 820, 10.0),
            row(&case("240/s for 10 s (3 x capacity)", Some(240.0)), 800, 1600, 10.0),
            row(&case("burst of 400 into a fresh server", None), 160, 240, 2.0),
        ];
        let table = &tables(&rows)[0];
        let column = |name: &str| {
            let index = table.header.iter().position(|h| h == name).expect("a column");
            table.rows.iter().map(|cells| cells[index].as_str()).collect::<Vec<_>>()
        };
        assert_eq!(column("2xx/s"), ["78.0", "80.0", "80.0"]);
        assert_eq!(column("goodput %"), ["98", "100", "100"]);
        let notes = table.notes.join("\n");
        assert!(notes.contains("the rest turned away at once: 50 % of 160/s, 67 % of 240/s"), "{notes}");
        assert!(notes.contains("fresh server: started for the burst alone"), "{notes}");
    }

    #[test]
    fn the_full_run_has_three_open_loops_and_a_fresh_server_the_quick_one_neither() {
        let full = plan(Size { quick: false, scale: 1.0, rounds: 1 }, 2);
        assert_eq!(full.len(), 2);
        let (warm, fresh) = (&full[0], &full[1]);
        assert!(!warm.fresh && fresh.fresh);
        let rates: Vec<Option<f64>> = warm.cases.iter().map(|case| case.params.rate).collect();
        assert_eq!(rates, [None, Some(120.0), Some(160.0), Some(240.0)], "the burst, then 1.5, 2 and 3 x 80/s");
        assert_eq!(fresh.cases.len(), 1);
        assert_eq!(fresh.cases[0].params.label, "burst of 400 into a fresh server");
        assert_eq!(fresh.config, warm.config, "the same server, only fresh");

        let quick = plan(Size { quick: true, scale: 1.0, rounds: 1 }, 2);
        let labels: Vec<&str> = quick.iter().flat_map(|g| g.cases.iter().map(|c| c.params.label.as_str())).collect();
        assert_eq!(labels, ["burst of 40 clients", "160/s for 3 s (2 x capacity)"]);
    }
}
