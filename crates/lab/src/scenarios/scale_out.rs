//! `scale-out`: one queue for a fleet. Three headway instances (1 worker x 2 slots each) behind
//! Debian's HAProxy, whose agent check (`--agent-check`) sets each instance's `maxconn` to its
//! slot count: a request waits in HAProxy's backend queue until some instance has a free slot,
//! the one FIFO queue of a single headway stretched over machines. Against it: the same
//! instances behind plain round-robin (no `maxconn`: each instance queues what it is sent,
//! whoever else is idle), and three gunicorn instances behind the same round-robin. The
//! workload is mixed-tail's (90 % 20 ms, 10 % 500 ms), where a queue per instance hurts most.
//! Then the queued fleet's instances are restarted one at a time under load, each drained
//! through the agent check and `--shutdown-delay` first, and the failed requests counted.
//!
//! A fleet behind a balancer is not one server, so this scenario runs itself ([`run`]) instead
//! of a plan of groups; everything still listens on 127.0.0.1.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use headway_common::executable::{is_executable, which};
use headway_load::{LoadConfig, Target};

use super::plan::{sleep_path, Group, Scenario, ScenarioResult, Size};
use super::views;
use crate::ideal::{closed_loop, Capacity, Service};
use crate::measure::{rows_where, CaseParams, Row, RowContext};
use crate::progress::Progress;
use crate::rounds::Headline;
use crate::servers::{forget_live, free_port, watch_live, Environment, Peer, RunningServer, ServerConfig, ServerKind};
use crate::table::{errors, fixed, millis, normalized_with, Column, Table};

pub const SCENARIO: Scenario = Scenario {
    name: "scale-out",
    seed: "",
    about: "3 instances of 1 worker x 2 slots behind HAProxy: maxconn from headway's agent check (one queue for the \
            fleet) against round-robin (a queue per instance), then a rolling restart under load",
    sizes: "3 x (1 worker x 2 slots); GET /sleep/20 (weight 9) and /sleep/500 (weight 1); 12 clients, keep-alive; \
            600 requests per fleet; rolling restart under 12 clients for 26 s (--quick: 60 requests, 17 s)",
    plan,
    tables,
    charts,
    headline: Headline::TailLatency,
};

const INSTANCES: usize = 3;
const THREADS: usize = 2;
const CLIENTS: usize = 12;
const FAST_MS: u32 = 20;
const SLOW_MS: u32 = 500;
const ROLLING_RESTART: &str = "rolling restart";
const HAPROXY_HINT: &str = "apt-get install haproxy";
/// How often HAProxy asks the health path and the agent.
const CHECK_EVERY_MS: u64 = 500;

/// A fleet behind HAProxy.
struct Fleet {
    label: &'static str,
    server: ServerKind,
    /// `maxconn` per instance from the agent check, or round-robin with no limit.
    one_queue: bool,
}

const FLEETS: [Fleet; 3] = [
    Fleet { label: "HAProxy maxconn (agent check)", server: ServerKind::Headway, one_queue: true },
    Fleet { label: "HAProxy round-robin", server: ServerKind::Headway, one_queue: false },
    Fleet { label: "HAProxy round-robin", server: ServerKind::Gunicorn, one_queue: false },
];

/// Runs by itself: see [`run`].
fn plan(_: Size, _: usize) -> Vec<Group> {
    Vec::new()
}

fn service() -> Service {
    Service::mix(&[(Service::waiting_ms(FAST_MS as f64), 9.0), (Service::waiting_ms(SLOW_MS as f64), 1.0)])
}

/// Runs every fleet whose server is among `peers`; skipped, with the install hint, without
/// HAProxy.
pub fn run(
    size: Size,
    peers: &[Peer],
    env: &Environment,
    runtime: &tokio::runtime::Runtime,
    progress: &Progress,
) -> ScenarioResult {
    let started = Instant::now();
    let mut rows = Vec::new();
    let mut failures = Vec::new();
    match find_haproxy(env) {
        None => eprintln!("skipping {}: haproxy is not installed ({HAPROXY_HINT})", SCENARIO.name),
        Some(haproxy) => {
            for (index, fleet) in FLEETS.iter().enumerate() {
                let Some(peer) = peers.iter().find(|peer| peer.kind == fleet.server) else { continue };
                let name = fleet.server.name();
                progress.show(&format!("{} [{index}/{}] {name}, {}", SCENARIO.name, FLEETS.len(), fleet.label));
                match runtime.block_on(run_fleet(fleet, peer, &haproxy, size, env, progress)) {
                    Ok(fleet_rows) => rows.extend(fleet_rows),
                    Err(err) => {
                        progress.clear();
                        let line = format!("{}: {name} ({}): {err:#}", SCENARIO.name, fleet.label);
                        eprintln!("{line}");
                        failures.push(line);
                    }
                }
            }
        }
    }
    progress.clear();
    ScenarioResult {
        name: SCENARIO.name.into(),
        seed: SCENARIO.seed.into(),
        about: SCENARIO.about.into(),
        tables: tables(&rows),
        rows,
        all_rounds: Vec::new(),
        failures,
        elapsed_secs: started.elapsed().as_secs_f64(),
    }
}

/// HAProxy on PATH, or where Debian puts it (/usr/sbin is not on every user's PATH).
fn find_haproxy(env: &Environment) -> Option<PathBuf> {
    which("haproxy", &env.path).or_else(|| Some(PathBuf::from("/usr/sbin/haproxy")).filter(|path| is_executable(path)))
}

/// One instance of a fleet and what it takes to start it again where HAProxy expects it.
struct Instance {
    server: RunningServer,
    config: ServerConfig,
    agent_port: Option<u16>,
}

async fn run_fleet(
    fleet: &Fleet,
    peer: &Peer,
    haproxy: &std::path::Path,
    size: Size,
    env: &Environment,
    progress: &Progress,
) -> anyhow::Result<Vec<Row>> {
    let shutdown_delay = if size.quick { 1 } else { 2 };
    let mut instances = Vec::with_capacity(INSTANCES);
    for _ in 0..INSTANCES {
        let mut config = ServerConfig::new(1, THREADS);
        let agent_port = (fleet.server == ServerKind::Headway).then(free_port).transpose()?;
        if let Some(agent_port) = agent_port {
            config.headway_flags = [
                "--agent-check".to_owned(),
                format!("127.0.0.1:{agent_port}"),
                "--health-path".to_owned(),
                "/healthz".to_owned(),
                "--shutdown-delay".to_owned(),
                shutdown_delay.to_string(),
            ]
            .into();
        }
        let server = peer.start(env, &config).await?;
        instances.push(Instance { server, config, agent_port });
    }
    let balancer = Balancer::start(haproxy, fleet, &instances, env).await?;
    warm_up(balancer.port).await?;

    let capacity = Capacity { workers: INSTANCES, threads: THREADS, cores: env.cores };
    let ideal = closed_loop(capacity, service(), CLIENTS);
    let requests = if size.quick { 60 } else { size.requests(600.0, 60) };
    let peak_rss = |instances: &[Instance]| instances.iter().map(|i| i.server.memory.take_peak()).sum::<u64>();
    peak_rss(&instances);
    let mut load = load_config(balancer.port);
    load.requests = Some(requests);
    load.duration = Some(Duration::from_secs_f64(3.0 * requests as f64 / ideal.rps + 10.0));
    let case = CaseParams {
        label: format!("{CLIENTS} clients, keep-alive on"),
        connections: CLIENTS,
        mult: Some(CLIENTS as f64 / (INSTANCES * THREADS) as f64),
        keep_alive: true,
        workload: Some(format!("90% {FAST_MS} ms + 10% {SLOW_MS} ms")),
        ..CaseParams::default()
    };
    let report = headway_load::run_load(load).await?;
    let app = instances[0].server.app.clone();
    let context = |case, peak_rss_bytes| RowContext {
        scenario: SCENARIO.name,
        server: fleet.server.name(),
        group: fleet.label,
        workers: INSTANCES,
        threads: THREADS,
        app: &app,
        case,
        service: service(),
        ideal,
        peak_rss_bytes,
    };
    let mut rows = vec![Row::from_report(context(&case, peak_rss(&instances)), &report)];

    if fleet.one_queue {
        progress.show(&format!("{}: {}, {}: rolling restart", SCENARIO.name, fleet.server.name(), fleet.label));
        // Per instance: the delay, a drain, a boot of about a second, HAProxy's checks seeing it back.
        let per_instance = shutdown_delay as f64 + 1.0 + 4.0 * CHECK_EVERY_MS as f64 / 1000.0 + 1.0;
        let mut load = load_config(balancer.port);
        load.duration = Some(Duration::from_secs_f64(INSTANCES as f64 * per_instance + 2.0));
        let (report, restarted) =
            tokio::join!(headway_load::run_load(load), restart_one_by_one(&mut instances, peer, env));
        restarted?;
        let restart = CaseParams { label: ROLLING_RESTART.to_owned(), ..case.clone() };
        rows.push(Row::from_report(context(&restart, peak_rss(&instances)), &report?));
    }
    drop(balancer);
    for instance in instances {
        instance.server.stop();
    }
    Ok(rows)
}

/// Restarts each instance in turn, as a deploy would: SIGTERM (the agent check says `drain` at
/// once, and the instance serves on for its shutdown delay while HAProxy stops sending), the
/// same command on the same ports once it is gone, and a pause for HAProxy's checks to see it
/// back.
async fn restart_one_by_one(instances: &mut Vec<Instance>, peer: &Peer, env: &Environment) -> anyhow::Result<()> {
    let pause = Duration::from_millis(4 * CHECK_EVERY_MS);
    tokio::time::sleep(pause).await;
    for index in 0..instances.len() {
        let Instance { server, config, agent_port } = instances.remove(index);
        let port = server.port;
        server.stop_gracefully(Duration::from_secs(30)).await;
        let server = peer.start_on(env, &config, port).await?;
        instances.insert(index, Instance { server, config, agent_port });
        tokio::time::sleep(pause).await;
    }
    Ok(())
}

/// The closed loop of mixed-tail through the balancer.
fn load_config(port: u16) -> LoadConfig {
    let url = |ms| format!("http://127.0.0.1:{port}{}", sleep_path(ms));
    let mut config = LoadConfig::new(url(FAST_MS));
    config.targets = vec![Target { url: url(FAST_MS), weight: 9 }, Target { url: url(SLOW_MS), weight: 1 }];
    config.connections = CLIENTS;
    config.keep_alive = true;
    config.timeout = Duration::from_secs(30);
    config.tally_header = Some("X-Worker-Pid".into());
    config
}

/// Sends requests through the balancer until every instance has answered some (HAProxy's
/// health and agent checks have passed by then).
async fn warm_up(port: u16) -> anyhow::Result<()> {
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..20 {
        tokio::time::sleep(Duration::from_millis(2 * CHECK_EVERY_MS)).await;
        let mut config = LoadConfig::new(format!("http://127.0.0.1:{port}/hello"));
        config.connections = 2 * INSTANCES * THREADS;
        config.requests = Some(60);
        config.timeout = Duration::from_secs(10);
        config.tally_header = Some("X-Worker-Pid".into());
        let report = headway_load::run_load(config).await?;
        seen.extend(report.tally.into_keys().filter(|pid| !pid.is_empty()));
        if seen.len() >= INSTANCES {
            return Ok(());
        }
    }
    bail!("only {} of {INSTANCES} instances answered through HAProxy", seen.len())
}

/// HAProxy in front of a fleet, stopped when dropped.
struct Balancer {
    child: Child,
    port: u16,
}

impl Balancer {
    async fn start(
        haproxy: &std::path::Path,
        fleet: &Fleet,
        instances: &[Instance],
        env: &Environment,
    ) -> anyhow::Result<Balancer> {
        let port = free_port()?;
        let config = env.twins.log_path(&format!("haproxy-{port}.cfg"));
        std::fs::write(&config, haproxy_config(port, fleet, instances))
            .with_context(|| format!("cannot write {}", config.display()))?;
        let log = std::fs::File::create(env.twins.log_path(&format!("haproxy-{port}")))?;
        let child = Command::new(haproxy)
            .arg("-db")
            .arg("-f")
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .with_context(|| format!("cannot start {}", haproxy.display()))?;
        watch_live(child.id());
        let mut balancer = Balancer { child, port };
        let deadline = Instant::now() + Duration::from_secs(10);
        while tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_err() {
            if let Some(status) = balancer.child.try_wait()? {
                bail!("haproxy exited ({status}); its configuration is {}", config.display());
            }
            if Instant::now() > deadline {
                bail!("haproxy did not listen on 127.0.0.1:{port} within 10 s");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(balancer)
    }
}

impl Drop for Balancer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        forget_live(self.child.id());
    }
}

/// The configuration docs/deploy.md explains, on 127.0.0.1.
fn haproxy_config(port: u16, fleet: &Fleet, instances: &[Instance]) -> String {
    let mut text = format!(
        "global\n  maxconn 4096\n\ndefaults\n  mode http\n  timeout connect 2s\n  timeout client 60s\n  \
         timeout server 60s\n  timeout queue 30s\n  retries 3\n  option redispatch\n  \
         retry-on conn-failure empty-response\n\nfrontend web\n  bind 127.0.0.1:{port}\n  default_backend fleet\n\n\
         backend fleet\n  balance roundrobin\n"
    );
    if fleet.one_queue {
        let _ = writeln!(
            text,
            "  option httpchk GET /healthz\n  default-server check inter {CHECK_EVERY_MS}ms fall 1 rise 1 agent-check \
             agent-inter {CHECK_EVERY_MS}ms"
        );
    } else {
        let _ = writeln!(text, "  default-server check inter {CHECK_EVERY_MS}ms");
    }
    for (index, instance) in instances.iter().enumerate() {
        let _ = write!(text, "  server s{index} 127.0.0.1:{}", instance.server.port);
        match instance.agent_port.filter(|_| fleet.one_queue) {
            Some(agent_port) => {
                let _ = writeln!(text, " agent-port {agent_port}");
            }
            None => text.push('\n'),
        }
    }
    text
}

/// The latency at `percent` of the requests that sleep `ms`, in ms.
fn kind_ms(row: &Row, ms: u32, percent: f64) -> String {
    row.path_latency(&sleep_path(ms), percent).map_or_else(|| "-".to_owned(), millis)
}

fn tables(rows: &[Row]) -> Vec<Table> {
    let compared = rows_where(rows, |row| row.case.label != ROLLING_RESTART);
    let key: [Column; 1] = [("fleet", |row| row.group.clone())];
    let kinds: [Column; 4] = [
        ("fast 50% ms", |row| kind_ms(row, FAST_MS, 50.0)),
        ("fast 99% ms", |row| kind_ms(row, FAST_MS, 99.0)),
        ("slow 50% ms", |row| kind_ms(row, SLOW_MS, 50.0)),
        ("slow 99% ms", |row| kind_ms(row, SLOW_MS, 99.0)),
    ];
    let title =
        "scale-out: 3 instances x (1 worker x 2 slots) behind HAProxy, 90% /sleep/20 + 10% /sleep/500, 12 clients";
    let mut tables = vec![normalized_with(title.into(), &compared, &key, &kinds)
        .note("maxconn: HAProxy's backend queue holds what no instance can start: one FIFO queue for the fleet")
        .note("round-robin: each instance queues what it is sent, so a fast request can wait behind a slow one while another instance idles")];

    let mut restart = Table::new(
        "scale-out: rolling restart of the maxconn fleet under 12 clients (each instance drained by the agent check)",
        &["server", "fleet", "requests", "failed", "50% ms", "99% ms", "100% ms"],
        2,
    );
    for row in rows_where(rows, |row| row.case.label == ROLLING_RESTART) {
        restart.push(vec![
            row.server.clone(),
            row.group.clone(),
            row.requests.to_string(),
            errors(row),
            fixed(row.latency(50.0).unwrap_or(f64::NAN) * 1e3, 0),
            fixed(row.latency(99.0).unwrap_or(f64::NAN) * 1e3, 0),
            fixed(row.latency(100.0).unwrap_or(f64::NAN) * 1e3, 0),
        ]);
    }
    tables.push(restart.note("failed = requests with no answer (+ answers that were not 2xx, marked x)"));
    tables
}

fn charts(rows: &[Row]) -> Vec<crate::chart::Chart> {
    views::per_case(SCENARIO.name, rows)
}
