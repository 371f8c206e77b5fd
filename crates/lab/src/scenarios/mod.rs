//! Scenarios: each seed experiment as a plan of server configurations and the cases run against
//! each ([`plan`]), plus the tables and charts that explain its rows. One file per scenario; this
//! module lists them ([`ALL`]) and holds [`run`], which carries a plan out against every selected
//! server.

mod concurrency_sweep;
mod daily;
mod keepalive_tail;
mod long_tail_sweep;
mod mixed_tail;
mod multiplexed;
mod overload;
mod pipelining;
mod plan;
mod scale_out;
mod throughput;
mod views;

pub use plan::{Scenario, ScenarioResult, Size};

use std::time::{Duration, Instant};

use headway_common::stats::Snapshot;
use headway_load::LoadConfig;

use crate::cpu::{CpuSample, CpuUse, HostCpu, HostSample};
use crate::measure::{Row, RowContext};
use crate::pipeline;
use crate::process_tree::tree_of;
use crate::progress::Progress;
use crate::rounds;
use crate::servers::{Environment, Peer, RunningServer};
use plan::{Case, Group, LoadSpec, Work};

pub const ALL: [&Scenario; 10] = [
    &keepalive_tail::SCENARIO,
    &long_tail_sweep::SCENARIO,
    &concurrency_sweep::SCENARIO,
    &daily::SCENARIO,
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
    let stats_before = runtime.block_on(server.stats())?;
    let cpu_before = cpu_so_far(stats_before.as_ref());
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
    row.worker_secs = stats
        .as_ref()
        .zip(stats_before.as_ref())
        .map(|(after, before)| after.scaling.worker_seconds - before.scaling.worker_seconds);
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
