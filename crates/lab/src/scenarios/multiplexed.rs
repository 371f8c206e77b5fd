//! `multiplexed`: the mixed-tail workload of many clients (90 % of requests take 20 ms, 10 % take
//! 500 ms) carried on one HTTP/2 connection, as a router or a sidecar sends them, 2 workers x 2
//! slots, against the servers that serve HTTP/2 with prior knowledge: headway (with its Python
//! or its Rack worker), granian and hypercorn. With one FIFO queue the streams of one connection
//! wait no differently from the requests of many, so the fast requests' p99 stays near their
//! ideal; a server that gives a connection's streams to the worker that holds the connection
//! shows the slow requests' shadow on the fast ones.

use std::time::Duration;

use super::plan::{sleep_path, time_limit, Case, Group, LoadSpec, Scenario, Size, Work};
use super::views;
use crate::chart::Chart;
use crate::ideal::closed_loop;
use crate::measure::{rows_where, CaseParams, Row};
use crate::rounds::Headline;
use crate::scenarios::mixed_tail::{kind_ideals, service, targets, FAST_MS, KINDS, KINDS_NOTE, SLOW_MS};
use crate::servers::ServerConfig;
use crate::table::{normalized_with, Column, Table};

pub const SCENARIO: Scenario = Scenario {
    name: "multiplexed",
    seed: "002",
    about: "mixed-tail's clients (90 % of requests 20 ms, 10 % 500 ms) multiplexed on one HTTP/2 connection, \
            2 workers x 2 slots: do a connection's streams wait as requests of many connections would?",
    sizes: "2 workers x 2 slots; one HTTP/2 connection (h2c) with 8 and 16 streams; GET /sleep/20 (weight 9) and \
            /sleep/500 (weight 1); 400 requests per case, the first after 3 s of the same load unmeasured (--quick: 8 \
            streams, 40 requests after 1 s); headway, headway-rack, granian and hypercorn (the others serve no \
            HTTP/2 with prior knowledge)",
    plan,
    tables,
    charts,
    headline: Headline::TailLatency,
};

fn plan(size: Size, cores: usize) -> Vec<Group> {
    let mut group = Group::new(ServerConfig { http2: true, ..ServerConfig::new(2, 2) });
    group.label = format!("{}, one HTTP/2 connection", group.label);
    let service = service();
    let (streams, requests, warm_up): (&[usize], u64, f64) =
        if size.quick { (&[8], 40, 1.0) } else { (&[8, 16], size.requests(400.0, 20), 3.0) };
    for &streams in streams {
        // Each stream is a client of the closed loop: the ideal is that of as many clients.
        let ideal = closed_loop(group.capacity(cores), service, streams);
        let params = CaseParams {
            label: format!("{streams} streams on 1 connection"),
            connections: streams,
            mult: Some(streams as f64 / 4.0),
            keep_alive: true,
            workload: Some(format!("90% {FAST_MS} ms + 10% {SLOW_MS} ms, HTTP/2")),
            ..CaseParams::default()
        };
        let mut spec = LoadSpec::closed(&sleep_path(FAST_MS), 1, true, requests, time_limit(requests, ideal));
        spec.targets = targets();
        spec.http2_streams = Some(streams);
        // As in mixed-tail: the first case after the same load unmeasured, in which headway's
        // lanes learn each route from its first finished request.
        let work = match group.cases.is_empty() {
            true => Work::WarmedLoad { warm_up: Duration::from_secs_f64(warm_up), load: spec },
            false => Work::Load(spec),
        };
        group.cases.push(Case { params, service, ideal, work });
    }
    vec![group]
}

fn tables(rows: &[Row]) -> Vec<Table> {
    let all = rows_where(rows, |_| true);
    let title = "multiplexed: 2 workers x 2 slots, one HTTP/2 connection, 90% GET /sleep/20 + 10% GET /sleep/500";
    let key: [Column; 1] = [("streams", |row| row.case.connections.to_string())];
    let table = normalized_with(title.into(), &all, &key, &KINDS)
        .note(
            "each stream is a client of the closed loop: the ideal is that of as many clients on their own connections",
        )
        .note(KINDS_NOTE);
    let table = kind_ideals(rows).into_iter().fold(table, Table::note).note(
        "a fast 99% near the stuck ratio: the connection's fast streams waited out slow ones in the worker that \
         holds the connection while slots elsewhere were free; with one queue they wait only their turn",
    );
    vec![table]
}

fn charts(rows: &[Row]) -> Vec<Chart> {
    views::per_case("multiplexed", rows)
}
