//! `pipelining` (seed 002, YLD's "How Node handles HTTP connections"): one connection carrying
//! many requests written back to back. Are the answers in order, how long do they take against a
//! server that would run them on all its slots, and what does a flood (one slow request, then
//! thousands of fast ones: the seed's DoS vector) cost in memory?

use std::time::Duration;

use super::plan::{sleep_path, Case, Group, Scenario, Size, Work};
use crate::chart::Chart;
use crate::ideal::{pipelined, Service};
use crate::measure::{distinct, rows_where, CaseParams, Row};
use crate::pipeline::PipelineSpec;
use crate::rounds::Headline;
use crate::servers::ServerConfig;
use crate::table::{fixed, megabytes, millis, Table};

pub const SCENARIO: Scenario = Scenario {
    name: "pipelining",
    seed: "002",
    about: "one connection, deep pipelining: order of the answers, time against the ideal, peak memory",
    sizes: "1 worker x 5 slots; one connection; 20 requests of /sleep/200 down to /sleep/10 (order); \
            100 x /sleep/50 (depth); /sleep/1000 then 2000 x /hello (flood); 60 s limit per case \
            (--quick: depth 10, flood of 50)",
    plan,
    tables,
    charts,
    headline: Headline::TailLatency,
};

const HELLO: &str = "Hello, world!\n";

/// One pipelined request: its path, the body its answer must have, its service time.
struct Request {
    path: String,
    body: String,
    ms: f64,
}

impl Request {
    fn sleep(ms: u32) -> Request {
        Request { path: sleep_path(ms), body: format!("slept {ms} ms\n"), ms: ms as f64 }
    }
}

fn plan(size: Size, cores: usize) -> Vec<Group> {
    let mut group = Group::new(ServerConfig::new(1, 5));
    let capacity = group.capacity(cores);
    let (depth, flood) =
        if size.quick { (10, 50) } else { (size.requests(100.0, 2) as usize, size.requests(2000.0, 2) as usize) };

    let descending: Vec<Request> = (1..=20).rev().map(|i| Request::sleep(10 * i)).collect();
    let deep: Vec<Request> = (0..depth).map(|_| Request::sleep(50)).collect();
    let mut flooding = vec![Request::sleep(1000)];
    flooding.extend((0..flood).map(|_| Request { path: "/hello".into(), body: HELLO.into(), ms: 0.0 }));
    let cases = [
        ("order: /sleep/200 .. /sleep/10".to_owned(), descending),
        (format!("depth: {depth} x /sleep/50"), deep),
        (format!("flood: /sleep/1000 + {flood} x /hello"), flooding),
    ];

    for (label, requests) in cases {
        let services: Vec<Service> = requests.iter().map(|r| Service::waiting_ms(r.ms)).collect();
        let ideal = pipelined(capacity, &services);
        let params = CaseParams { label, connections: 1, keep_alive: true, ..CaseParams::default() };
        let spec = PipelineSpec {
            paths: requests.iter().map(|r| r.path.clone()).collect(),
            expected: requests.iter().map(|r| r.body.clone()).collect(),
            timeout: Duration::from_secs(60),
        };
        let service = Service::mix(&services.iter().map(|s| (*s, 1.0)).collect::<Vec<_>>());
        group.cases.push(Case { params, service, ideal, work: Work::Pipeline(spec) });
    }
    vec![group]
}

fn tables(rows: &[Row]) -> Vec<Table> {
    let header = ["server", "case", "sent", "answered", "in order", "elapsed ms", "ideal ms", "rps", "errors", "MB"];
    let mut table =
        Table::new("pipelining: 1 worker x 5 slots, one connection, every request written at once", &header, 2);
    for row in rows {
        table.push(vec![
            row.server.clone(),
            row.case.label.clone(),
            (row.requests + row.errors).to_string(),
            row.requests.to_string(),
            match row.in_order {
                Some(true) => "yes".into(),
                Some(false) => "NO".into(),
                None => "-".into(),
            },
            millis(row.elapsed_secs),
            millis(row.ideal.latency_secs),
            fixed(row.rps, 1),
            row.errors_by_kind.keys().next().cloned().unwrap_or_else(|| "0".into()),
            megabytes(row.peak_rss_bytes),
        ]);
    }
    vec![table
        .note("ideal = the requests run at once on the 5 slots in arrival order and are answered in order: done when the busiest slot finishes")
        .note("in order = every answer carried the body of its own request")]
}

fn charts(rows: &[Row]) -> Vec<Chart> {
    distinct(rows, |row| row.case.label.clone())
        .into_iter()
        .map(|case| {
            let picked = rows_where(rows, |row| row.case.label == case);
            Chart::Bars {
                title: format!("pipelining, {case}: time to the last answer (ms)"),
                y_label: "ms".into(),
                categories: picked.iter().map(|row| row.server.clone()).collect(),
                series: vec!["measured".into(), "ideal".into()],
                values: vec![
                    picked.iter().map(|row| row.elapsed_secs * 1e3).collect(),
                    picked.iter().map(|row| row.ideal.latency_secs * 1e3).collect(),
                ],
            }
        })
        .collect()
}
