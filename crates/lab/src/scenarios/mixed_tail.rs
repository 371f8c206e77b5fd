//! `mixed-tail`: most requests fast, a few slow (90 % take 20 ms, 10 % take 500 ms), 2 workers x
//! 2 slots. With a queue per worker a fast request that lands behind a slow one waits for it
//! although the other worker may be idle: the case where per-worker queues hurt most. The table
//! shows it in the fast and slow requests' own percentiles, each against its own ideal.

use crate::chart::Chart;
use crate::ideal::{closed_loop, Service};
use crate::measure::{CaseParams, Row};
use crate::rounds::Headline;
use crate::scenarios::{
    distinct, on_off, rows_where, sleep_path, time_limit, views, Case, Group, LoadSpec, Scenario, Size, Work,
};
use crate::servers::ServerConfig;
use crate::table::{fixed, normalized_with, Column, Table};

pub const SCENARIO: Scenario = Scenario {
    name: "mixed-tail",
    seed: "",
    about: "90 % of requests take 20 ms, 10 % take 500 ms, 2 workers x 2 slots: fast requests stuck behind slow ones",
    sizes: "2 workers x 2 slots; GET /sleep/20 (weight 9) and /sleep/500 (weight 1); 4 and 8 clients; \
            keep-alive on and off; 400 requests per case (--quick: 8 clients, keep-alive on, 40 requests)",
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

/// Each kind's percentiles against its own ideal.
pub(super) const KINDS: [Column; 4] = [
    ("fast 50%", |row| kind_ratio(row, FAST_MS, 50.0)),
    ("fast 99%", |row| kind_ratio(row, FAST_MS, 99.0)),
    ("slow 50%", |row| kind_ratio(row, SLOW_MS, 50.0)),
    ("slow 99%", |row| kind_ratio(row, SLOW_MS, 99.0)),
];

/// What the kinds' columns mean, for a table's notes.
pub(super) const KINDS_NOTE: &str = "fast / slow = the /sleep/20 and /sleep/500 requests alone, percentile / \
     their own ideal: in one FIFO queue both kinds share the mean wait for a slot (ideal ms less the mean \
     service time), so a kind's ideal is its service time plus that wait";

fn plan(size: Size, cores: usize) -> Vec<Group> {
    let mut group = Group::new(ServerConfig::new(2, 2));
    let service = service();
    let (clients, keep_alives, requests): (&[usize], &[bool], u64) =
        if size.quick { (&[8], &[true], 40) } else { (&[4, 8], &[true, false], size.requests(400.0, 20)) };
    for &keep_alive in keep_alives {
        for &connections in clients {
            let ideal = closed_loop(group.capacity(cores), service, connections);
            let params = CaseParams {
                label: format!("{connections} clients, keep-alive {}", on_off(keep_alive)),
                connections,
                mult: Some(connections as f64 / 4.0),
                keep_alive,
                workload: Some(format!("90% {FAST_MS} ms + 10% {SLOW_MS} ms")),
                ..CaseParams::default()
            };
            let mut spec =
                LoadSpec::closed(&sleep_path(FAST_MS), connections, keep_alive, requests, time_limit(requests, ideal));
            spec.targets = targets();
            group.cases.push(Case { params, service, ideal, work: Work::Load(spec) });
        }
    }
    vec![group]
}

/// The latency at `percent` of the requests that sleep `ms`, as a multiple of their own ideal.
fn kind_ratio(row: &Row, ms: u32, percent: f64) -> String {
    let ideal = row.ideal.latency_of_kind(row.service, Service::waiting_ms(ms as f64));
    fixed(row.path_latency(&sleep_path(ms), percent).map_or(f64::NAN, |secs| secs / ideal), 2)
}

fn tables(rows: &[Row]) -> Vec<Table> {
    let all = rows_where(rows, |_| true);
    let title = "mixed-tail: 2 workers x 2 slots, 90% GET /sleep/20 + 10% GET /sleep/500 (mean service 68 ms)";
    let key: [Column; 1] = [("keep-alive", |row| on_off(row.case.keep_alive).to_owned())];
    let table = normalized_with(title.into(), &all, &key, &KINDS)
        .note("ideal uses the mean service time (68 ms): with a mix the percentiles spread around it even for a perfect FIFO queue")
        .note(KINDS_NOTE);
    let table = kind_ideals(rows).into_iter().fold(table, Table::note).note(
        "a fast 99% near the stuck ratio: fast requests waited out slow ones in their worker's own queue while \
         slots elsewhere may have been free; with one queue they wait only their turn",
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
    distinct(rows, |row| row.case.connections).into_iter().filter_map(describe).collect()
}

fn charts(rows: &[Row]) -> Vec<Chart> {
    views::per_case("mixed-tail", rows)
}
