//! What a scenario is: its plan of server configurations ([`Group`]) and the cases run against
//! each ([`Case`], a load or a pipeline), sized by [`Size`]; and what running it produced
//! ([`ScenarioResult`]).

use std::time::Duration;

use headway_load::{Arrival, LoadConfig, Target};
use serde::Serialize;

use crate::chart::Chart;
use crate::ideal::{Capacity, Ideal, Service};
use crate::measure::{CaseParams, Row};
use crate::pipeline::PipelineSpec;
use crate::rounds::Headline;
use crate::servers::{Peer, RunningServer, ServerConfig, ServerKind};
use crate::table::{plural, Table};

/// How big a run is: `quick` shrinks every scenario to a few seconds per server (for tests);
/// `scale` multiplies the number of requests of each case; each server configuration runs
/// `rounds` times ([`crate::rounds`]).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Size {
    pub quick: bool,
    pub scale: f64,
    pub rounds: usize,
}

impl Size {
    /// `n` requests, scaled, at least `floor`.
    pub fn requests(&self, n: f64, floor: u64) -> u64 {
        ((n * self.scale).ceil() as u64).max(floor)
    }

    /// Requests for one point of a sweep: `per_connection` for each of the `connections`, and at
    /// least `seconds` of the ideal throughput (scaled); only the former when quick.
    pub fn sweep_requests(&self, per_connection: u64, connections: usize, seconds: f64, ideal: Ideal) -> u64 {
        let per_connections = per_connection * connections as u64;
        if self.quick {
            per_connections
        } else {
            self.requests(per_connections as f64, 1).max(self.requests(seconds * ideal.rps, 1))
        }
    }
}

pub struct Scenario {
    pub name: &'static str,
    /// The seed document it reproduces ("000" .. "004"), or "" for the lab's own.
    pub seed: &'static str,
    pub about: &'static str,
    /// What it runs, in words: configurations and case sizes at the default size.
    pub sizes: &'static str,
    pub plan: fn(Size, usize) -> Vec<Group>,
    pub tables: fn(&[Row]) -> Vec<Table>,
    pub charts: fn(&[Row]) -> Vec<Chart>,
    /// What ranks a row's rounds to find its median one.
    pub headline: Headline,
}

/// One server configuration and the cases run against it (the server is started once for all).
pub struct Group {
    pub label: String,
    pub config: ServerConfig,
    pub cases: Vec<Case>,
    /// Run the cases on the server as it starts, without the warm-up requests: a server that has
    /// served nothing yet (and, for headway, measured no service time).
    pub fresh: bool,
    /// Run against headway alone: a configuration only headway has (its lanes off), beside the
    /// group that runs every server.
    pub headway_only: bool,
}

impl Group {
    pub fn new(config: ServerConfig) -> Group {
        let label = format!("{} x {} slots", plural(config.workers, "worker"), config.threads);
        Group { label, config, cases: Vec::new(), fresh: false, headway_only: false }
    }

    /// The peers this group runs against.
    pub(super) fn peers<'a>(&self, peers: &'a [Peer]) -> Vec<&'a Peer> {
        peers.iter().filter(|peer| !self.headway_only || peer.kind == ServerKind::Headway).collect()
    }

    pub fn capacity(&self, cores: usize) -> Capacity {
        Capacity { workers: self.config.workers, threads: self.config.threads, cores }
    }

    /// The cases `cases` adds, run by every server with headway as it ships (lanes on), then by
    /// headway alone with its lanes off (`--no-lanes`, one first-in-first-out order).
    pub fn lanes_on_and_off(config: ServerConfig, cases: impl Fn(Group) -> Group) -> Vec<Group> {
        let lanes_on = cases(Group::new(config.clone()));
        let mut lanes_off = cases(Group::new(ServerConfig { lanes: false, ..config }));
        lanes_off.label = format!("{}, lanes off", lanes_off.label);
        lanes_off.headway_only = true;
        vec![lanes_on, lanes_off]
    }
}

pub struct Case {
    pub params: CaseParams,
    pub service: Service,
    pub ideal: Ideal,
    pub work: Work,
}

pub enum Work {
    Load(LoadSpec),
    Pipeline(PipelineSpec),
    /// The load, after the same load for `warm_up` that is not measured: a fresh server's first
    /// second (connections, JIT, caches, thread pools) is not its pace.
    WarmedLoad {
        warm_up: Duration,
        load: LoadSpec,
    },
}

/// A `headway load` run, without the server's address.
#[derive(Debug, Clone)]
pub struct LoadSpec {
    /// Paths with their weights.
    pub targets: Vec<(String, u32)>,
    pub connections: usize,
    pub keep_alive: bool,
    pub requests: Option<u64>,
    pub duration: Option<Duration>,
    pub rate: Option<f64>,
    /// How an open loop's sends are spaced.
    pub arrival: Arrival,
    pub timeout: Duration,
    /// HTTP/2 with prior knowledge: each connection carries this many requests at once.
    pub http2_streams: Option<usize>,
}

impl LoadSpec {
    /// A closed loop of `connections` clients sending `requests` requests of `path`, cut off after
    /// `limit` if the server is much slower than the ideal.
    pub fn closed(path: &str, connections: usize, keep_alive: bool, requests: u64, limit: Duration) -> LoadSpec {
        LoadSpec {
            targets: vec![(path.to_owned(), 1)],
            connections,
            keep_alive,
            requests: Some(requests),
            duration: Some(limit),
            rate: None,
            arrival: Arrival::Constant,
            timeout: Duration::from_secs(20),
            http2_streams: None,
        }
    }

    /// An open loop: `rate` requests per second of `targets` for `duration`, spaced by `arrival`,
    /// over up to `connections` keep-alive connections (a request that finds them all busy waits
    /// for one, but its latency counts from when it was due).
    pub fn open(
        targets: Vec<(String, u32)>,
        connections: usize,
        rate: f64,
        duration: Duration,
        arrival: Arrival,
        timeout: Duration,
    ) -> LoadSpec {
        LoadSpec {
            targets,
            connections,
            keep_alive: true,
            requests: Some((rate * duration.as_secs_f64()) as u64),
            duration: Some(duration),
            rate: Some(rate),
            arrival,
            timeout,
            http2_streams: None,
        }
    }

    pub fn to_config(&self, server: &RunningServer) -> LoadConfig {
        let mut config = LoadConfig::new(server.url(&self.targets[0].0));
        config.targets =
            self.targets.iter().map(|(path, weight)| Target { url: server.url(path), weight: *weight }).collect();
        config.connections = self.connections;
        config.keep_alive = self.keep_alive;
        config.requests = self.requests;
        config.duration = self.duration;
        config.rate = self.rate;
        config.arrival = self.arrival;
        config.timeout = self.timeout;
        config.tally_header = Some("X-Worker-Pid".into());
        if let Some(streams) = self.http2_streams {
            (config.http2, config.streams) = (true, streams);
        }
        config
    }
}

/// How long to let a closed loop of `requests` run: three times what the ideal needs, plus a
/// few seconds, so a server far from the ideal still ends in bounded time.
pub fn time_limit(requests: u64, ideal: Ideal) -> Duration {
    Duration::from_secs_f64(3.0 * requests as f64 / ideal.rps + 3.0)
}

/// What one scenario produced.
#[derive(Debug, Clone, Serialize)]
pub struct ScenarioResult {
    pub name: String,
    pub seed: String,
    pub about: String,
    /// What the tables and charts show: one row per configuration, case and server (with
    /// several rounds, its median round).
    pub rows: Vec<Row>,
    /// With several rounds, every round's rows, in the order they ran.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub all_rounds: Vec<Row>,
    pub tables: Vec<Table>,
    /// Servers that did not start, cases that could not run: one line each.
    pub failures: Vec<String>,
    pub elapsed_secs: f64,
}

/// The value of a fixed-delay sleep path.
pub fn sleep_path(ms: u32) -> String {
    format!("/sleep/{ms}")
}
