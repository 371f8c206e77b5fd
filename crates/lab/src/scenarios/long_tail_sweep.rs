//! `long-tail-sweep` (seed 003, Puma PR #3678): connections at 0.5 to 4 times the slots, three
//! endpoint delays, keep-alive on and off, 1 and 2 workers; the PR's normalized tables (rps as % of
//! the ideal, each latency percentile / the ideal FIFO latency, long tail p100/p10) and each
//! worker's share of the requests.

use super::plan::{sleep_path, time_limit, Case, Group, LoadSpec, Scenario, Size, Work};
use super::views;
use crate::chart::Chart;
use crate::ideal::{closed_loop, Service};
use crate::measure::{distinct, rows_where, CaseParams, Row};
use crate::rounds::Headline;
use crate::servers::ServerConfig;
use crate::table::{fixed, normalized, on_off, Table};

pub const SCENARIO: Scenario = Scenario {
    name: "long-tail-sweep",
    seed: "003",
    about: "connections 0.5..4 x slots, delays 3/10/200 ms, keep-alive on/off, 1 and 2 workers: the normalized tables of Puma PR #3678",
    sizes: "1 and 2 workers x 4 slots; GET /sleep/{3,10,200}; connections 0.5, 1, 1.5, 2, 3, 4 x slots; \
            keep-alive on and off; per case max(10 x connections, 1.5 s of ideal throughput) requests \
            (--quick: 1 worker, 10 ms, 1 and 2 x, keep-alive on, 10 x connections)",
    plan,
    tables,
    charts,
    headline: Headline::TailLatency,
};

const THREADS: usize = 4;
const MULTS: [f64; 6] = [0.5, 1.0, 1.5, 2.0, 3.0, 4.0];
const DELAYS_MS: [u32; 3] = [3, 10, 200];

fn plan(size: Size, cores: usize) -> Vec<Group> {
    let (workers, delays, mults, keep_alives): (&[usize], &[u32], &[f64], &[bool]) =
        if size.quick { (&[1], &[10], &[1.0, 2.0], &[true]) } else { (&[1, 2], &DELAYS_MS, &MULTS, &[true, false]) };
    let mut groups = Vec::new();
    for &w in workers {
        let mut group = Group::new(ServerConfig::new(w, THREADS));
        let slots = group.config.workers * group.config.threads;
        for &delay in delays {
            let service = Service::waiting_ms(delay as f64);
            for &keep_alive in keep_alives {
                for &mult in mults {
                    let connections = (mult * slots as f64).round() as usize;
                    let ideal = closed_loop(group.capacity(cores), service, connections);
                    let requests = size.sweep_requests(10, connections, 1.5, ideal);
                    let params = CaseParams {
                        label: format!("{delay} ms, keep-alive {}, {mult:.2} x", on_off(keep_alive)),
                        connections,
                        mult: Some(mult),
                        keep_alive,
                        delay_ms: Some(delay as f64),
                        ..CaseParams::default()
                    };
                    let spec = LoadSpec::closed(
                        &sleep_path(delay),
                        connections,
                        keep_alive,
                        requests,
                        time_limit(requests, ideal),
                    );
                    group.cases.push(Case { params, service, ideal, work: Work::Load(spec) });
                }
            }
        }
        groups.push(group);
    }
    groups
}

/// One table per (workers, delay, keep-alive), rows by server then multiple, as in the PR.
fn sections(rows: &[Row]) -> Vec<(String, Vec<&Row>)> {
    let mut sections = Vec::new();
    for group in distinct(rows, |row| row.group.clone()) {
        for delay in distinct(rows, |row| row.case.delay_ms.map(|d| d as u32)) {
            for keep_alive in [true, false] {
                let picked = rows_where(rows, |row| {
                    row.group == group
                        && row.case.delay_ms.map(|d| d as u32) == delay
                        && row.case.keep_alive == keep_alive
                });
                if picked.is_empty() {
                    continue;
                }
                let delay = delay.unwrap_or_default();
                let title = format!(
                    "long-tail-sweep: {group}, GET /sleep/{delay} ({delay} ms), keep-alive {}",
                    on_off(keep_alive)
                );
                sections.push((title, picked));
            }
        }
    }
    sections
}

fn tables(rows: &[Row]) -> Vec<Table> {
    sections(rows)
        .into_iter()
        .map(|(title, picked)| {
            normalized(title, &picked, &[("mult", |row: &Row| fixed(row.case.mult.unwrap_or(f64::NAN), 2))])
        })
        .collect()
}

fn charts(rows: &[Row]) -> Vec<Chart> {
    sections(rows)
        .into_iter()
        .filter(|(_, picked)| distinct(picked.iter().copied(), |row| row.case.connections).len() > 1)
        .map(|(title, picked)| views::latency_vs_connections(format!("{title}: p99 / ideal"), &picked, 99.0))
        .collect()
}
