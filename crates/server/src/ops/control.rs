//! The control address: stats as JSON (`/stats`) and Prometheus text (`/metrics`), liveness
//! and readiness for orchestrators (`/health/live`, `/health/ready`), one worker more or fewer
//! (`POST /workers/add`, `/workers/remove`), on an address of its own so the public never sees
//! it; and `headway stats` and `headway workers`, which use it.
//!
//! It serves from the moment the server starts, before the workers have booted, so that a
//! readiness probe can say "not yet" rather than find nothing listening (which Kubernetes and
//! balancers take for a dead process). This endpoint is internal and trusted, so it is served
//! with hyper as it comes.

use std::convert::Infallible;
use std::fmt::Write as _;
use std::process::ExitCode;
use std::sync::{Arc, OnceLock};

use anyhow::Context as _;
use bytes::Bytes;
use headway_common::client;
use headway_common::stats::{LaneKind, RecentSnapshot, RecyclesSnapshot, Snapshot, TempFilesSnapshot};
use http_body_util::Full;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tracing::debug;

use crate::byte_budget::ByteBudget;
use crate::listener::{accept_until, Accepted, Bind, Listener};
use crate::ops::access_log::AccessLog;
use crate::ops::prometheus;
use crate::ops::readiness::Readiness;
use crate::ops::stats::Stats;
use crate::queue::{Queue, Reader};
use crate::spool::DiskBudget;
use crate::workers::scaling::{Cause, Direction};
use crate::workers::supervisor::{Pool, Scaling};

/// What the control endpoint reads from.
pub struct Sources {
    pub stats: Arc<Stats>,
    pub queue: Arc<Queue>,
    /// Set once the first workers have booted; stats show none before.
    pub workers: OnceLock<Workers>,
    pub readiness: Arc<Readiness>,
    pub access_log: Option<Arc<AccessLog>>,
    /// The temporary files of request and response bodies.
    pub temp_files: Arc<DiskBudget>,
    /// What WebSockets' unfinished messages hold (`--max-websocket-held`).
    pub websocket_held: Arc<ByteBudget>,
}

/// The pool of workers, and its scaling.
pub struct Workers {
    pub pool: Arc<Pool>,
    pub scaling: Arc<Scaling>,
}

impl Sources {
    fn snapshot(&self, reader: Reader) -> Snapshot {
        let workers = self.workers.get().map_or_else(Vec::new, |workers| workers.pool.workers());
        let mut snapshot = self.stats.snapshot(&self.queue, &workers, reader);
        if let Some(workers) = self.workers.get() {
            snapshot.scaling = workers.scaling.snapshot();
        }
        let recent = self.queue.recent(reader);
        let ms = |wait: std::time::Duration| wait.as_secs_f64() * 1000.0;
        snapshot.recent = RecentSnapshot {
            started: recent.started,
            wait_p50_ms: ms(recent.wait_p50),
            wait_p99_ms: ms(recent.wait_p99),
        };
        snapshot.access_log_dropped = self.access_log.as_ref().map_or(0, |log| log.dropped());
        let disk = &self.temp_files;
        snapshot.temp_files =
            TempFilesSnapshot { bytes: disk.used(), limit: disk.limit(), held_back: disk.held_back() };
        let held = &self.websocket_held;
        (snapshot.websockets.held_bytes, snapshot.websockets.held_limit, snapshot.websockets.held_refused) =
            (held.used(), held.limit(), held.refusals());
        snapshot
    }
}

/// Serves the control endpoint until the task is dropped.
pub async fn serve(listener: Listener, sources: Arc<Sources>) {
    accept_until(&listener, std::future::pending(), |accepted| {
        let stream = match accepted {
            Accepted::Tcp(stream, _) => TokioIo::new(Box::new(stream) as Box<dyn Stream>),
            Accepted::Unix(stream) => TokioIo::new(Box::new(stream) as Box<dyn Stream>),
        };
        let sources = sources.clone();
        tokio::spawn(async move {
            let service = service_fn(move |request| {
                let sources = sources.clone();
                async move { Ok::<_, Infallible>(respond(&request, &sources).await) }
            });
            if let Err(err) = hyper::server::conn::http1::Builder::new().serve_connection(stream, service).await {
                debug!("control connection: {err}");
            }
        });
    })
    .await;
}

trait Stream: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send> Stream for T {}

async fn respond<B>(request: &http::Request<B>, sources: &Sources) -> http::Response<Full<Bytes>> {
    let (status, content_type, body) = match (request.method(), request.uri().path()) {
        (&http::Method::POST, "/workers/add") => ask(sources, Direction::Up).await,
        (&http::Method::POST, "/workers/remove") => ask(sources, Direction::Down).await,
        (&http::Method::GET, "/stats") => {
            let json = serde_json::to_string_pretty(&sources.snapshot(Reader::Json)).unwrap_or_default();
            (http::StatusCode::OK, "application/json", json)
        }
        (&http::Method::GET, "/metrics") => (
            http::StatusCode::OK,
            "text/plain; version=0.0.4",
            prometheus::render(&sources.snapshot(Reader::Prometheus)),
        ),
        // Alive as long as this process answers at all: a restart would not help a server that
        // is booting or draining.
        (&http::Method::GET, "/health/live") => (http::StatusCode::OK, "text/plain", "alive\n".to_owned()),
        (&http::Method::GET, "/health/ready") => match sources.readiness.check() {
            Ok(()) => (http::StatusCode::OK, "text/plain", "ready\n".to_owned()),
            Err(reason) => (http::StatusCode::SERVICE_UNAVAILABLE, "text/plain", format!("{reason}\n")),
        },
        _ => (
            http::StatusCode::NOT_FOUND,
            "text/plain",
            "try /stats, /metrics, /health/live, /health/ready or POST /workers/add|remove\n".to_owned(),
        ),
    };
    let mut response = http::Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response.headers_mut().insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static(content_type));
    response
}

/// One worker more or fewer, asked on the control address: 200 with what was done, 409 with why
/// not (at MIN or MAX, or the memory budget), 503 before the workers have started.
async fn ask(sources: &Sources, direction: Direction) -> (http::StatusCode, &'static str, String) {
    let Some(workers) = sources.workers.get() else {
        return (http::StatusCode::SERVICE_UNAVAILABLE, "text/plain", "the workers are starting\n".to_owned());
    };
    match workers.scaling.ask(direction, Cause::Control).await {
        Ok(done) => (http::StatusCode::OK, "text/plain", format!("{done}\n")),
        Err(refused) => (http::StatusCode::CONFLICT, "text/plain", format!("{refused}\n")),
    }
}

/// `headway workers` flags.
#[derive(clap::Args, Debug)]
pub struct WorkersArgs {
    /// add: one worker more; remove: one fewer (it finishes its requests first). Within
    /// -w MIN:MAX when a range was given, and within --max-memory
    #[arg(value_enum)]
    pub change: WorkersChange,
    /// The --control address of the running server (HOST:PORT or unix:PATH)
    #[arg(long, env = "HEADWAY_CONTROL", value_name = "ADDR")]
    pub control: String,
}

/// What `headway workers` asks for.
#[derive(clap::ValueEnum, Debug, Clone, Copy)]
pub enum WorkersChange {
    Add,
    Remove,
}

/// Asks a running server for one worker more or fewer, and prints its answer.
pub fn workers(args: WorkersArgs) -> anyhow::Result<ExitCode> {
    let bind = Bind::parse_all(&args.control).map_err(|err| anyhow::anyhow!("--control {err}"))?.remove(0);
    let path = match args.change {
        WorkersChange::Add => "/workers/add",
        WorkersChange::Remove => "/workers/remove",
    };
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let (status, body) =
        runtime.block_on(client::post(&bind, path)).with_context(|| format!("cannot reach the server at {bind}"))?;
    let answer = String::from_utf8_lossy(&body);
    if status.is_success() {
        print!("{answer}");
        return Ok(ExitCode::SUCCESS);
    }
    anyhow::bail!("{}", answer.trim_end())
}

/// `headway stats` flags.
#[derive(clap::Args, Debug)]
pub struct StatsArgs {
    /// The --control address of the running server (HOST:PORT or unix:PATH)
    #[arg(long, env = "HEADWAY_CONTROL", value_name = "ADDR")]
    pub control: String,
    /// Print the JSON as served
    #[arg(long)]
    pub json: bool,
}

/// Reads and prints a running server's stats.
pub fn stats(args: StatsArgs) -> anyhow::Result<ExitCode> {
    let bind = Bind::parse_all(&args.control).map_err(|err| anyhow::anyhow!("--control {err}"))?.remove(0);
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let body = runtime.block_on(client::get_stats(&bind)).with_context(|| format!("cannot read stats from {bind}"))?;
    if args.json {
        println!("{}", String::from_utf8_lossy(&body));
        return Ok(ExitCode::SUCCESS);
    }
    let snapshot: Snapshot =
        serde_json::from_slice(&body).context("the control address did not answer with headway stats")?;
    print!("{}", render(&snapshot));
    Ok(ExitCode::SUCCESS)
}

/// A human-readable page of stats.
fn render(s: &Snapshot) -> String {
    let q = &s.queue;
    let w = &q.wait_ms;
    let mut out = String::new();
    let _ = writeln!(out, "uptime       {:.0} s", s.uptime_secs);
    let _ = writeln!(
        out,
        "queue        depth {} (high-water {} since last read; limit {}, timeout {} s)",
        q.depth, q.high_water, q.max_len, q.timeout_secs
    );
    let _ = writeln!(
        out,
        "queue wait   p50 {:.1} ms  p90 {:.1} ms  p99 {:.1} ms  p99.9 {:.1} ms  max {:.1} ms  ({} started)",
        w.p50, w.p90, w.p99, w.p999, w.max, q.dispatched
    );
    let _ = writeln!(out, "service      mean {:.1} ms (recent requests)", q.mean_service_ms);
    let _ = writeln!(
        out,
        "shed (503)   {} queue full, {} queue timeout, {} at arrival (would not start in time), {} standing queue \
         (overload held to the target); {} withdrawn (client left while queued)",
        q.shed_queue_full, q.shed_queue_timeout, q.shed_at_arrival, q.shed_standing_queue, q.withdrawn
    );
    let overload = if q.target_ms > 0.0 {
        format!(
            "controlled delay: target {:.1} ms, interval {:.0} ms; {} now, {} found so far",
            q.target_ms,
            q.interval_ms,
            if q.overloaded { "holding one" } else { "none" },
            q.overloads
        )
    } else {
        "controlled delay off: requests may wait up to the queue timeout".to_owned()
    };
    let _ = writeln!(out, "overload     {overload}");
    render_lanes(&mut out, s);
    let _ = writeln!(out, "slots        {} busy of {}", s.slots.busy, s.slots.total);
    let sc = &s.scaling;
    let _ = writeln!(
        out,
        "workers      {} ({}, {} to {}); changes: {} queue wait, {} idle, {} signal, {} control; {} adds refused \
         by --max-memory",
        sc.workers,
        if sc.automatic { "adaptive" } else { "fixed, moved by hand" },
        sc.min,
        sc.max,
        sc.events.queue_wait,
        sc.events.idle,
        sc.events.signal,
        sc.events.control,
        sc.events.memory_cap
    );
    let _ = writeln!(
        out,
        "connections  {} open, {} idle, {} accepted, {} failed their PROXY header or TLS handshake",
        s.connections.open, s.connections.idle, s.connections.accepted, s.connections.handshakes_failed
    );
    let _ = writeln!(
        out,
        "http/2       {} connections, {} streams, {} closed for flooding",
        s.connections.http2, s.connections.http2_streams, s.connections.http2_calmed
    );
    let _ = writeln!(out, "responses    {}", by_status(&s.responses));
    let files = &s.static_files;
    if !files.responses.is_empty() || files.handed_off + files.handoffs_refused > 0 {
        let _ = writeln!(
            out,
            "static       {} ({} sent); {} handed off by workers, {} refused (502)",
            by_status(&files.responses),
            mib(files.bytes),
            files.handed_off,
            files.handoffs_refused
        );
    }
    let ws = &s.websockets;
    let _ = writeln!(
        out,
        "websockets   {} open, {} opened, {} refused (503 over --max-websockets); unfinished messages hold {} of {} bytes, {} closed for want of room (1013)",
        ws.open, ws.opened, ws.refused, ws.held_bytes, ws.held_limit, ws.held_refused
    );
    let _ = writeln!(out, "abandoned    {} while queued, {} while running", s.abandoned.queued, s.abandoned.running);
    if s.access_log_dropped > 0 {
        let _ = writeln!(out, "access log   {} lines dropped (the writer fell behind)", s.access_log_dropped);
    }
    let recycled = |cause: fn(&RecyclesSnapshot) -> u64| s.workers.iter().map(|w| cause(&w.recycles)).sum::<u64>();
    let _ = writeln!(
        out,
        "recycles     {} max requests, {} memory, {} timeout, {} crash, {} reload (workers replaced, by cause)",
        recycled(|r| r.max_requests),
        recycled(|r| r.memory),
        recycled(|r| r.timeout),
        recycled(|r| r.crash),
        recycled(|r| r.reload)
    );
    let _ = writeln!(out, "front        rss {}  cpu {:.1} s", mib(s.front.rss_bytes), s.front.cpu_secs);
    let _ = writeln!(out, "\nworker  pid       state     busy  requests  restarts  websockets  rss         cpu");
    for worker in &s.workers {
        let _ = writeln!(
            out,
            "{:<7} {:<9} {:<9} {:<5} {:<9} {:<9} {:<11} {:<11} {:.1} s",
            worker.index,
            worker.pid,
            worker.state,
            worker.busy,
            worker.requests,
            worker.restarts,
            worker.websockets,
            mib(worker.usage.rss_bytes),
            worker.usage.cpu_secs
        );
    }
    out
}

/// The lanes: the rule's figures, then each lane and its routes.
fn render_lanes(out: &mut String, s: &Snapshot) {
    let q = &s.queue;
    if q.lanes.is_empty() {
        let _ = writeln!(out, "lanes        off: every request in arrival order");
        return;
    }
    let _ = writeln!(
        out,
        "lanes        fast requests first; a slow one passed over for at most {:.1} ms; slow ones hold at most {} \
         slots while a fast one waits",
        q.lane_passed_over_ms, q.lane_slow_slots
    );
    for lane in &q.lanes {
        let kind = match lane.kind {
            LaneKind::Learned => "learned",
            LaneKind::Declared => "declared",
        };
        let _ = writeln!(
            out,
            "  {} ({kind})  {} waiting, {} running, {} started; wait p50 {:.1} ms p99 {:.1} ms; service mean {:.1} ms",
            lane.name,
            lane.waiting,
            lane.running,
            lane.started,
            lane.wait_ms.p50,
            lane.wait_ms.p99,
            lane.mean_service_ms
        );
        for route in &lane.routes {
            let _ = writeln!(out, "    {}  {:.1} ms", route.route, route.mean_service_ms);
        }
    }
}

/// Responses counted by status: `200: 12  404: 1`, or `none`.
fn by_status(counts: &std::collections::BTreeMap<String, u64>) -> String {
    if counts.is_empty() {
        return "none".to_owned();
    }
    counts.iter().map(|(code, n)| format!("{code}: {n}")).collect::<Vec<_>>().join("  ")
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1 << 20) as f64)
}
