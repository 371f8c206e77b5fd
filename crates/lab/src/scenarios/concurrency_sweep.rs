//! `concurrency-sweep` (seed 001, Rochkind's "Comparing MRI Rails App Server Performance"): an
//! app that burns CPU then waits on I/O (`/fake_work`, 50 ms + 250 ms and a 20 KB body, and the
//! 50+50 and 100+1 variants), swept over 1..20 concurrent clients, for processes-only,
//! threads-only and hybrid configurations with the same number of slots.

use super::plan::{time_limit, Case, Group, LoadSpec, Scenario, Size, Work};
use crate::chart::{Chart, Series};
use crate::ideal::{closed_loop, Service};
use crate::measure::{distinct, rows_where, CaseParams, Row};
use crate::rounds::Headline;
use crate::servers::ServerConfig;
use crate::table::{errors, fixed, megabytes, millis, Table};

pub const SCENARIO: Scenario = Scenario {
    name: "concurrency-sweep",
    seed: "001",
    about: "CPU + I/O wait per request, 1..20 clients: processes-only vs threads-only vs hybrid",
    sizes:
        "8 workers x 1 slot, 1 x 8, 2 x 4; GET /fake_work with cpu_ms+iowait_ms 50+250, 50+50, 100+1 and 20000 bytes; \
            1, 2, 4, 6, 8, 10, 12, 16, 20 clients; per point max(4 x clients, 2 s of ideal throughput) requests \
            (--quick: 2 x 2, 5+25 ms, 2000 bytes, 1 and 4 clients)",
    plan,
    tables,
    charts,
    headline: Headline::TailLatency,
};

/// What a sweep covers.
struct Sweep {
    /// (name, workers, threads).
    configs: &'static [(&'static str, usize, usize)],
    /// (cpu ms, iowait ms).
    workloads: &'static [(u32, u32)],
    clients: &'static [usize],
    bytes: u32,
}

/// The same 8 slots arranged three ways, the seed's three workloads, 1..20 clients.
const FULL: Sweep = Sweep {
    configs: &[("processes", 8, 1), ("threads", 1, 8), ("hybrid", 2, 4)],
    workloads: &[(50, 250), (50, 50), (100, 1)],
    clients: &[1, 2, 4, 6, 8, 10, 12, 16, 20],
    bytes: 20000,
};
const QUICK: Sweep = Sweep { configs: &[("hybrid", 2, 2)], workloads: &[(5, 25)], clients: &[1, 4], bytes: 2000 };

fn plan(size: Size, cores: usize) -> Vec<Group> {
    let Sweep { configs, workloads, clients, bytes } = if size.quick { QUICK } else { FULL };
    let mut groups = Vec::new();
    for &(name, workers, threads) in configs {
        let mut group = Group::new(ServerConfig::new(workers, threads));
        group.label = format!("{name}: {}", group.label);
        for &(cpu_ms, io_ms) in workloads {
            let service = Service { mean_secs: (cpu_ms + io_ms) as f64 / 1e3, cpu_secs: cpu_ms as f64 / 1e3 };
            let path = format!("/fake_work?cpu_ms={cpu_ms}&iowait_ms={io_ms}&bytes={bytes}");
            for &connections in clients {
                let ideal = closed_loop(group.capacity(cores), service, connections);
                let requests = size.sweep_requests(4, connections, 2.0, ideal);
                let params = CaseParams {
                    label: format!("{cpu_ms}+{io_ms} ms, {connections} clients"),
                    connections,
                    keep_alive: true,
                    workload: Some(format!("{cpu_ms}+{io_ms}")),
                    ..CaseParams::default()
                };
                let spec = LoadSpec::closed(&path, connections, true, requests, time_limit(requests, ideal));
                group.cases.push(Case { params, service, ideal, work: Work::Load(spec) });
            }
        }
        groups.push(group);
    }
    groups
}

fn workloads(rows: &[Row]) -> Vec<String> {
    distinct(rows, |row| row.case.workload.clone().unwrap_or_default())
}

fn tables(rows: &[Row]) -> Vec<Table> {
    let header = [
        "server",
        "config",
        "clients",
        "requests",
        "rps",
        "ideal rps",
        "rps %",
        "p50 ms",
        "p99 ms",
        "ideal ms",
        "errors",
        "MB",
    ];
    workloads(rows)
        .into_iter()
        .map(|workload| {
            let title = format!("concurrency-sweep: GET /fake_work, {workload} ms of CPU + I/O wait per request");
            let mut table = Table::new(title, &header, 2);
            for row in rows_where(rows, |row| row.case.workload.as_deref() == Some(workload.as_str())) {
                table.push(vec![
                    row.server.clone(),
                    row.group.clone(),
                    row.case.connections.to_string(),
                    row.requests.to_string(),
                    fixed(row.rps, 1),
                    fixed(row.ideal.rps, 1),
                    fixed(row.rps_pct, 1),
                    millis(row.latency(50.0).unwrap_or(f64::NAN)),
                    millis(row.latency(99.0).unwrap_or(f64::NAN)),
                    millis(row.ideal.latency_secs),
                    errors(row),
                    megabytes(row.peak_rss_bytes),
                ]);
            }
            table
                .note("ideal = min(C/S, B/S, min(W, cores)/CPU): a process runs its CPU work on one core at a time (GIL, event loop)")
                .note("uvicorn and node have no slots: their ideal uses the same W x T as the others")
        })
        .collect()
}

fn charts(rows: &[Row]) -> Vec<Chart> {
    let mut charts = Vec::new();
    for workload in workloads(rows) {
        for group in distinct(rows, |row| row.group.clone()) {
            let picked =
                rows_where(rows, |row| row.group == group && row.case.workload.as_deref() == Some(workload.as_str()));
            let mut series: Vec<Series> = distinct(picked.iter().copied(), |row| row.server.clone())
                .into_iter()
                .map(|server| Series {
                    points: picked
                        .iter()
                        .filter(|row| row.server == server)
                        .map(|row| (row.case.connections as f64, row.rps))
                        .collect(),
                    name: server,
                    dashed: false,
                })
                .collect();
            let ideal = distinct(picked.iter().copied(), |row| (row.case.connections, row.ideal.rps.to_bits()));
            series.push(Series {
                name: "ideal".into(),
                points: ideal.into_iter().map(|(c, rps)| (c as f64, f64::from_bits(rps))).collect(),
                dashed: true,
            });
            charts.push(Chart::Lines {
                title: format!("concurrency-sweep {workload} ms, {group}: throughput"),
                x_label: "concurrent clients".into(),
                y_label: "requests / s".into(),
                log_y: false,
                series,
            });
        }
    }
    charts
}
