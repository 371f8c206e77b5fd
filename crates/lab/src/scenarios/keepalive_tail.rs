//! `keepalive-tail` (seed 000, Heroku's "Pumas, Routers & Keepalives"): 5 request slots, a
//! 200 ms endpoint, 10 clients, 200 requests, keep-alive on and off (`hey -n 200 -c 10` and
//! `hey -disable-keepalive`). With keep-alive, Puma serves up to 10 requests of one connection
//! in a row while other connections wait: p95/p99 of 2+ s where the ideal is 0.4 s.
//!
//! Every request is alike here, so headway's lanes have nothing to sort: headway runs again with
//! its lanes off to show that they change nothing.

use super::plan::{time_limit, Case, Group, LoadSpec, Scenario, Size, Work};
use super::views;
use crate::chart::Chart;
use crate::ideal::{closed_loop, Service};
use crate::measure::{rows_by_server, CaseParams, Row};
use crate::rounds::Headline;
use crate::servers::ServerConfig;
use crate::table::{normalized, on_off, Column, Table};

pub const SCENARIO: Scenario = Scenario {
    name: "keepalive-tail",
    seed: "000",
    about: "5 slots, 200 ms endpoint, 10 clients, keep-alive on and off: does keep-alive let requests jump the queue?",
    sizes: "1 worker x 5 slots; GET /fixed (200 ms); 10 clients; 200 requests per case (--quick: 30)",
    plan,
    tables,
    charts,
    headline: Headline::TailLatency,
};

const CLIENTS: usize = 10;

/// Every server with headway as it ships (lanes on); then headway alone with its lanes off.
fn plan(size: Size, cores: usize) -> Vec<Group> {
    Group::lanes_on_and_off(ServerConfig::new(1, 5), |group| cases(group, size, cores))
}

fn cases(mut group: Group, size: Size, cores: usize) -> Group {
    let service = Service::waiting_ms(200.0);
    let ideal = closed_loop(group.capacity(cores), service, CLIENTS);
    let requests = if size.quick { 30 } else { size.requests(200.0, 20) };
    for keep_alive in [true, false] {
        let params = CaseParams {
            label: format!("keep-alive {}", on_off(keep_alive)),
            connections: CLIENTS,
            mult: Some(CLIENTS as f64 / 5.0),
            keep_alive,
            delay_ms: Some(200.0),
            ..CaseParams::default()
        };
        let spec = LoadSpec::closed("/fixed", CLIENTS, keep_alive, requests, time_limit(requests, ideal));
        group.cases.push(Case { params, service, ideal, work: Work::Load(spec) });
    }
    group
}

fn tables(rows: &[Row]) -> Vec<Table> {
    let all = rows_by_server(rows);
    let title = "keepalive-tail: 1 worker x 5 slots, GET /fixed (200 ms), 10 clients (latency / ideal 400 ms)";
    let key: [Column; 2] = [
        ("keep-alive", |row| on_off(row.case.keep_alive).to_owned()),
        ("lanes", |row| row.lanes.map_or("-", on_off).to_owned()),
    ];
    let table = normalized(title.into(), &all, &key).note(
        "lanes: headway as it ships (on) and with --no-lanes (off); the peers have none (-). Every request \
         here is alike, so the lanes have nothing to reorder",
    );
    vec![table]
}

fn charts(rows: &[Row]) -> Vec<Chart> {
    views::per_case("keepalive-tail", rows)
}
