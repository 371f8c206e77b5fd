//! The control address: stats as JSON (`/stats`) and Prometheus text (`/metrics`), liveness
//! and readiness for orchestrators (`/health/live`, `/health/ready`), on an address of its own
//! so the public never sees it; and `headway stats`, which reads it.
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
use headway_common::stats::{LaneKind, RecyclesSnapshot, Snapshot, TempFilesSnapshot};
use http_body_util::Full;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tracing::debug;

use crate::listener::{accept_until, Accepted, Bind, Listener};
use crate::ops::access_log::AccessLog;
use crate::ops::prometheus;
use crate::ops::readiness::Readiness;
use crate::ops::stats::Stats;
use crate::queue::{Queue, Reader};
use crate::spool::DiskBudget;
use crate::workers::worker::Worker;

/// What the control endpoint reads from.
pub struct Sources {
    pub stats: Arc<Stats>,
    pub queue: Arc<Queue>,
    /// Set once the workers have booted; stats show none before.
    pub workers: OnceLock<Vec<Arc<Worker>>>,
    pub readiness: Arc<Readiness>,
    pub access_log: Option<Arc<AccessLog>>,
    /// The temporary files of request and response bodies.
    pub temp_files: Arc<DiskBudget>,
}

impl Sources {
    fn snapshot(&self, reader: Reader) -> Snapshot {
        let workers = self.workers.get().map_or(&[][..], Vec::as_slice);
        let mut snapshot = self.stats.snapshot(&self.queue, workers, reader);
        snapshot.access_log_dropped = self.access_log.as_ref().map_or(0, |log| log.dropped());
        let disk = &self.temp_files;
        snapshot.temp_files =
            TempFilesSnapshot { bytes: disk.used(), limit: disk.limit(), held_back: disk.held_back() };
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
                async move { Ok::<_, Infallible>(respond(&request, &sources)) }
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

fn respond<B>(request: &http::Request<B>, sources: &Sources) -> http::Response<Full<Bytes>> {
    let (status, content_type, body) = match (request.method(), request.uri().path()) {
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
            "try /stats, /metrics, /health/live or /health/ready\n".to_owned(),
        ),
    };
    let mut response = http::Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response.headers_mut().insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static(content_type));
    response
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
        "websockets   {} open, {} opened, {} refused (503 over --max-websockets)",
        ws.open, ws.opened, ws.refused
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
