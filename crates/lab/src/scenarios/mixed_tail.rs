//! `mixed-tail`: most requests fast, a few slow (90 % take 20 ms, 10 % take 500 ms), 2 workers x
//! 2 slots. With a queue per worker a fast request that lands behind a slow one waits for it
//! although the other worker may be idle: the case where per-worker queues hurt most.

use crate::chart::Chart;
use crate::ideal::{closed_loop, Service};
use crate::measure::{CaseParams, Row};
use crate::scenarios::{
    on_off, rows_where, sleep_path, time_limit, views, Case, Group, LoadSpec, Scenario, Size, Work,
};
use crate::servers::ServerConfig;
use crate::table::{normalized, Table};

pub const SCENARIO: Scenario = Scenario {
    name: "mixed-tail",
    seed: "",
    about: "90 % of requests take 20 ms, 10 % take 500 ms, 2 workers x 2 slots: fast requests stuck behind slow ones",
    sizes: "2 workers x 2 slots; GET /sleep/20 (weight 9) and /sleep/500 (weight 1); 4 and 8 clients; \
            keep-alive on and off; 400 requests per case (--quick: 8 clients, keep-alive on, 40 requests)",
    plan,
    tables,
    charts,
};

const FAST_MS: u32 = 20;
const SLOW_MS: u32 = 500;

fn plan(size: Size, cores: usize) -> Vec<Group> {
    let mut group = Group::new(ServerConfig::new(2, 2));
    let service =
        Service::mix(&[(Service::waiting_ms(FAST_MS as f64), 9.0), (Service::waiting_ms(SLOW_MS as f64), 1.0)]);
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
            spec.targets = vec![(sleep_path(FAST_MS), 9), (sleep_path(SLOW_MS), 1)];
            group.cases.push(Case { params, service, ideal, work: Work::Load(spec) });
        }
    }
    vec![group]
}

fn tables(rows: &[Row]) -> Vec<Table> {
    let all = rows_where(rows, |_| true);
    let title = "mixed-tail: 2 workers x 2 slots, 90% GET /sleep/20 + 10% GET /sleep/500 (mean service 68 ms)";
    let table = normalized(title.into(), &all, &[("keep-alive", |row: &Row| on_off(row.case.keep_alive).to_owned())]);
    vec![table.note("ideal uses the mean service time (68 ms): with a mix the percentiles spread around it even for a perfect FIFO queue")]
}

fn charts(rows: &[Row]) -> Vec<Chart> {
    views::per_case("mixed-tail", rows)
}
