//! Scenarios: each seed experiment as a plan of server configurations ([`Group`]) and the cases
//! run against each ([`Case`]), plus the tables and charts that explain its rows. One file per
//! scenario; this module holds what they share and [`run`], which carries a plan out against
//! every selected server.

mod concurrency_sweep;
mod keepalive_tail;
mod long_tail_sweep;
mod mixed_tail;
mod multiplexed;
mod overload;
mod pipelining;
mod scale_out;
mod throughput;
mod views;

use std::time::{Duration, Instant};

use headway_common::stats::Snapshot;
use headway_load::{Arrival, LoadConfig, Target};
use serde::Serialize;

use crate::chart::Chart;
use crate::cpu::{CpuSample, CpuUse, HostCpu, HostSample};
use crate::ideal::{Capacity, Ideal, Service};
use crate::measure::{CaseParams, Row, RowContext};
use crate::pipeline::{self, PipelineSpec};
use crate::process_tree::tree_of;
use crate::progress::Progress;
use crate::rounds::{self, Headline};
use crate::servers::{Environment, Peer, RunningServer, ServerConfig, ServerKind};
use crate::table::Table;

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

pub const ALL: [&Scenario; 9] = [
    &keepalive_tail::SCENARIO,
    &long_tail_sweep::SCENARIO,
    &concurrency_sweep::SCENARIO,
    &mixed_tail::SCENARIO,
    &multiplexed::SCENARIO,
    &overload::SCENARIO,
    &pipelining::SCENARIO,
    &scale_out::SCENARIO,
    &throughput::SCENARIO,
];

pub fn find(name: &str) -> Option<&'static Scenario> {
    ALL.into_iter().find(|scenario| scenario.name == name)
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
    fn peers<'a>(&self, peers: &'a [Peer]) -> Vec<&'a Peer> {
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

pub fn plural(n: usize, word: &str) -> String {
    if n == 1 {
        format!("1 {word}")
    } else {
        format!("{n} {word}s")
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

/// Runs `scenario` against each peer: per group and round, start the server, warm it up (unless
/// the group wants it fresh), run the cases, stop it.
pub fn run(
    scenario: &Scenario,
    size: Size,
    peers: &[Peer],
    env: &Environment,
    runtime: &tokio::runtime::Runtime,
    progress: &Progress,
) -> ScenarioResult {
    if scenario.name == scale_out::SCENARIO.name {
        return scale_out::run(size, peers, env, runtime, progress); // a fleet, not one server
    }
    let started = Instant::now();
    let groups = (scenario.plan)(size, env.cores);
    let total: usize = groups.iter().map(|g| g.cases.len() * g.peers(peers).len()).sum::<usize>() * size.rounds;
    let mut done = 0;
    let mut rows = Vec::new();
    let mut failures = Vec::new();
    let mut fail = |line: String| {
        progress.clear();
        eprintln!("{line}");
        failures.push(line);
    };
    for (group, round) in groups.iter().flat_map(|group| (1..=size.rounds).map(move |round| (group, round))) {
        let label = match size.rounds {
            1 => group.label.clone(),
            count => format!("{}, round {round}/{count}", group.label),
        };
        for peer in rounds::in_turn(&group.peers(peers), round) {
            let name = peer.kind.name();
            if group.config.http2 && !peer.kind.speaks_h2c() {
                if round == 1 {
                    progress.clear();
                    eprintln!("{}: skipping {name}: it serves no HTTP/2 with prior knowledge", scenario.name);
                }
                done += group.cases.len();
                continue;
            }
            progress.show(&format!("{} [{done}/{total}] starting {name}, {label}", scenario.name));
            let server = match runtime.block_on(peer.start(env, &group.config)) {
                Ok(server) => server,
                Err(err) => {
                    fail(format!("{}: {name} ({label}) did not start: {err:#}", scenario.name));
                    done += group.cases.len();
                    continue;
                }
            };
            // A fresh server is only ready by its own account (see `RunningServer::readiness`).
            let warmed = if group.fresh { Ok(()) } else { runtime.block_on(warm_up(&server)) };
            if let Err(err) = warmed {
                fail(format!("{}: {name} ({label}): warm-up failed: {err:#}", scenario.name));
            }
            for case in &group.cases {
                done += 1;
                progress.show(&format!("{} [{done}/{total}] {name}, {label}: {}", scenario.name, case.params.label));
                match run_case(scenario, group, case, &server, runtime) {
                    Ok(row) => rows.push(Row { round, ..row }),
                    Err(err) => fail(format!("{}: {name} ({label}), {}: {err:#}", scenario.name, case.params.label)),
                }
            }
            server.stop();
        }
    }
    progress.clear();
    let (rows, all_rounds) = match size.rounds {
        1 => (rows, Vec::new()),
        _ => (rounds::medians(&rows, scenario.headline), rows),
    };
    let mut tables = (scenario.tables)(&rows);
    if size.rounds > 1 {
        for table in &mut tables {
            table.notes.push(rounds::note(size.rounds, scenario.headline));
        }
    }
    ScenarioResult {
        name: scenario.name.into(),
        seed: scenario.seed.into(),
        about: scenario.about.into(),
        rows,
        all_rounds,
        tables,
        failures,
        elapsed_secs: started.elapsed().as_secs_f64(),
    }
}

fn run_case(
    scenario: &Scenario,
    group: &Group,
    case: &Case,
    server: &RunningServer,
    runtime: &tokio::runtime::Runtime,
) -> anyhow::Result<Row> {
    if let Work::WarmedLoad { warm_up, load } = &case.work {
        let warming = LoadSpec { requests: None, duration: Some(*warm_up), ..load.clone() };
        runtime.block_on(headway_load::run_load(warming.to_config(server)))?;
    }
    // The CPU the server has used so far, with headway's own split; reading its stats also
    // resets its queue high-water mark for this case.
    let cpu_so_far = |stats: Option<&Snapshot>| CpuSample::of(server.pid(), &tree_of(server.pid()), stats);
    let cpu_before = cpu_so_far(runtime.block_on(server.stats())?.as_ref());
    let host_before = HostSample::now();
    server.memory.take_peak();
    let context = |peak_rss_bytes| RowContext {
        scenario: scenario.name,
        server: server.name(),
        group: &group.label,
        workers: group.config.workers,
        threads: group.config.threads,
        app: &server.app,
        case: &case.params,
        service: case.service,
        ideal: case.ideal,
        peak_rss_bytes,
    };
    let mut row = match &case.work {
        Work::Load(spec) | Work::WarmedLoad { load: spec, .. } => {
            let report = runtime.block_on(headway_load::run_load(spec.to_config(server)))?;
            Row::from_report(context(server.memory.take_peak()), &report)
        }
        Work::Pipeline(spec) => {
            let outcome = runtime.block_on(pipeline::run(server.port, spec));
            pipeline::row(context(server.memory.take_peak()), &outcome)
        }
    };
    row.host = HostCpu::between(host_before, HostSample::now());
    row.lanes = server.lanes();
    let stats = runtime.block_on(server.stats())?;
    row.queue_high_water = stats.as_ref().map(|stats| stats.queue.high_water as u64);
    row.cpu = CpuUse::between(&cpu_before, &cpu_so_far(stats.as_ref()), row.requests);
    Ok(row)
}

/// Sends a few requests on fresh connections until every worker has answered one (or a few
/// rounds have passed): the server is then warm and its workers all booted.
async fn warm_up(server: &RunningServer) -> anyhow::Result<()> {
    let workers = server.config.workers;
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..10 {
        let mut config = LoadConfig::new(server.url("/hello"));
        config.connections = (2 * workers).clamp(2, 16);
        config.requests = Some(10 * workers as u64);
        config.keep_alive = false;
        config.timeout = Duration::from_secs(10);
        config.tally_header = Some("X-Worker-Pid".into());
        let report = headway_load::run_load(config).await?;
        seen.extend(report.tally.into_keys().filter(|pid| !pid.is_empty()));
        if seen.len() >= workers {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    anyhow::bail!("only {} of {workers} workers answered", seen.len())
}

/// The value of a fixed-delay sleep path.
pub fn sleep_path(ms: u32) -> String {
    format!("/sleep/{ms}")
}

/// "on" / "off".
pub fn on_off(keep_alive: bool) -> &'static str {
    if keep_alive {
        "on"
    } else {
        "off"
    }
}

/// Rows by server, in the order the servers first appear, each server's in the order they ran:
/// headway with its lanes off right after headway.
pub fn rows_by_server(rows: &[Row]) -> Vec<&Row> {
    let servers = distinct(rows, |row| row.server.clone());
    let mut all = rows_where(rows, |_| true);
    all.sort_by_key(|row| servers.iter().position(|server| *server == row.server));
    all
}

/// The rows `keep` accepts, in the order they ran.
pub fn rows_where(rows: &[Row], keep: impl Fn(&Row) -> bool) -> Vec<&Row> {
    rows.iter().filter(|row| keep(row)).collect()
}

/// Distinct values of `key` over `rows`, in first-seen order.
pub fn distinct<'a, T: PartialEq>(rows: impl IntoIterator<Item = &'a Row>, key: impl Fn(&Row) -> T) -> Vec<T> {
    let mut values = Vec::new();
    for row in rows {
        let value = key(row);
        if !values.contains(&value) {
            values.push(value);
        }
    }
    values
}
