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
use headway_common::stats::{
    LaneKind, LaneSnapshot, RecyclesSnapshot, Snapshot, TempFilesSnapshot, WaitPercentiles, WorkerSnapshot,
};
use http_body_util::Full;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tracing::debug;

use crate::listener::{accept_until, Accepted, Bind, Listener};
use crate::ops::access_log::AccessLog;
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
        (&http::Method::GET, "/metrics") => {
            (http::StatusCode::OK, "text/plain; version=0.0.4", prometheus(&sources.snapshot(Reader::Prometheus)))
        }
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

/// The snapshot in Prometheus text exposition format.
fn prometheus(s: &Snapshot) -> String {
    let mut out = String::new();
    let mut metric = |name: &str, kind: &str, help: &str, samples: &[(String, f64)]| {
        let _ = writeln!(out, "# HELP headway_{name} {help}\n# TYPE headway_{name} {kind}");
        for (labels, value) in samples {
            let _ = writeln!(out, "headway_{name}{labels} {value}");
        }
    };
    let one = |value: f64| vec![(String::new(), value)];
    let q = &s.queue;
    metric("queue_depth", "gauge", "Requests waiting in the queue.", &one(q.depth as f64));
    metric("queue_depth_max", "gauge", "Highest queue depth since the previous scrape.", &one(q.high_water as f64));
    metric(
        "queue_wait_seconds",
        "summary",
        "Time from a request being complete to a slot starting it.",
        &quantiles("", &q.wait_ms),
    );
    metric(
        "service_seconds_mean",
        "gauge",
        "Moving mean of recent requests' service time.",
        &one(q.mean_service_ms / 1000.0),
    );
    metric("queue_dispatched_total", "counter", "Requests handed to a slot.", &one(q.dispatched as f64));
    let shed = vec![
        ("{reason=\"queue_full\"}".to_owned(), q.shed_queue_full as f64),
        ("{reason=\"queue_timeout\"}".to_owned(), q.shed_queue_timeout as f64),
        ("{reason=\"would_time_out\"}".to_owned(), q.shed_at_arrival as f64),
        ("{reason=\"standing_queue\"}".to_owned(), q.shed_standing_queue as f64),
    ];
    metric("shed_total", "counter", "Requests refused with 503.", &shed);
    metric(
        "queue_target_seconds",
        "gauge",
        "Controlled delay's target wait (0 when switched off).",
        &one(q.target_ms / 1000.0),
    );
    metric(
        "queue_overloaded",
        "gauge",
        "1 while a sustained overload is held to the target wait.",
        &one(f64::from(u8::from(q.overloaded))),
    );
    metric("queue_overloads_total", "counter", "Sustained overloads found.", &one(q.overloads as f64));
    if !q.lanes.is_empty() {
        let per_lane = |value: fn(&LaneSnapshot) -> f64| {
            labelled(&q.lanes, |lane| format!("{{lane=\"{}\"}}", label_value(&lane.name)), value)
        };
        metric("lane_waiting", "gauge", "Requests waiting in each lane.", &per_lane(|lane| lane.waiting as f64));
        metric("lane_running", "gauge", "Slots running each lane's requests.", &per_lane(|lane| lane.running as f64));
        metric(
            "lane_started_total",
            "counter",
            "Requests of each lane handed to a slot.",
            &per_lane(|lane| lane.started as f64),
        );
        metric(
            "lane_service_seconds_mean",
            "gauge",
            "Moving mean service time of each lane's requests.",
            &per_lane(|lane| lane.mean_service_ms / 1000.0),
        );
        let waits: Vec<(String, f64)> = q
            .lanes
            .iter()
            .flat_map(|lane| quantiles(&format!("lane=\"{}\",", label_value(&lane.name)), &lane.wait_ms))
            .collect();
        metric("lane_wait_seconds", "summary", "Time each lane's requests waited for a slot.", &waits);
        let routes: Vec<(String, f64)> = q
            .lanes
            .iter()
            .flat_map(|lane| {
                lane.routes.iter().map(|route| {
                    let labels =
                        format!("{{lane=\"{}\",route=\"{}\"}}", label_value(&lane.name), label_value(&route.route));
                    (labels, route.mean_service_ms / 1000.0)
                })
            })
            .collect();
        metric(
            "route_service_seconds_mean",
            "gauge",
            "Moving mean service time of each route, in the lane its latest request took (the most used 20 a lane).",
            &routes,
        );
        metric(
            "lane_passed_over_seconds",
            "gauge",
            "Longest a slow request is passed over by fast ones.",
            &one(q.lane_passed_over_ms / 1000.0),
        );
        metric(
            "lane_slow_slots",
            "gauge",
            "Most slots slow requests may hold while a fast request waits.",
            &one(q.lane_slow_slots as f64),
        );
    }
    let abandoned = vec![
        ("{while=\"queued\"}".to_owned(), s.abandoned.queued as f64),
        ("{while=\"running\"}".to_owned(), s.abandoned.running as f64),
    ];
    metric("abandoned_total", "counter", "Requests whose client went away.", &abandoned);
    metric("slots_busy", "gauge", "Slots running a request.", &one(s.slots.busy as f64));
    metric("slots", "gauge", "Slots in all workers.", &one(s.slots.total as f64));
    metric(
        "connections_open",
        "gauge",
        "Open client connections speaking HTTP (WebSockets are counted apart).",
        &one(s.connections.open as f64),
    );
    metric(
        "connections_idle",
        "gauge",
        "Client connections waiting for their next request.",
        &one(s.connections.idle as f64),
    );
    metric(
        "connections_accepted_total",
        "counter",
        "Client connections accepted.",
        &one(s.connections.accepted as f64),
    );
    metric(
        "handshakes_failed_total",
        "counter",
        "Connections closed before a request: a PROXY header or TLS handshake failed or was late.",
        &one(s.connections.handshakes_failed as f64),
    );
    metric(
        "http2_connections_total",
        "counter",
        "Client connections that spoke HTTP/2.",
        &one(s.connections.http2 as f64),
    );
    metric(
        "http2_streams_total",
        "counter",
        "Requests that came as HTTP/2 streams.",
        &one(s.connections.http2_streams as f64),
    );
    metric(
        "http2_calmed_total",
        "counter",
        "HTTP/2 connections closed with GOAWAY ENHANCE_YOUR_CALM for flooding.",
        &one(s.connections.http2_calmed as f64),
    );
    let ws = &s.websockets;
    metric("websockets_open", "gauge", "Open WebSockets.", &one(ws.open as f64));
    metric("websockets_opened_total", "counter", "WebSockets opened.", &one(ws.opened as f64));
    metric(
        "websockets_refused_total",
        "counter",
        "WebSocket handshakes refused with 503 over --max-websockets.",
        &one(ws.refused as f64),
    );
    let statuses: Vec<(String, f64)> =
        s.responses.iter().map(|(code, n)| (format!("{{code=\"{code}\"}}"), *n as f64)).collect();
    metric("responses_total", "counter", "Responses sent to clients, by status.", &statuses);
    let per_worker =
        |value: fn(&WorkerSnapshot) -> f64| labelled(&s.workers, |w| format!("{{worker=\"{}\"}}", w.index), value);
    metric("worker_requests_total", "counter", "Requests served by each worker.", &per_worker(|w| w.requests as f64));
    metric("worker_busy_slots", "gauge", "Busy slots of each worker.", &per_worker(|w| w.busy as f64));
    metric(
        "worker_busy_seconds_total",
        "counter",
        "Time each worker's slots spent running requests.",
        &per_worker(|w| w.busy_secs),
    );
    metric("worker_restarts_total", "counter", "Restarts of each worker.", &per_worker(|w| w.restarts as f64));
    metric(
        "worker_unrequested_total",
        "counter",
        "Connections to each worker closed because it sent bytes no request asked for.",
        &per_worker(|w| w.unrequested as f64),
    );
    let recycles: Vec<(String, f64)> = s
        .workers
        .iter()
        .flat_map(|w| {
            let r = &w.recycles;
            [
                ("max_requests", r.max_requests),
                ("memory", r.memory),
                ("timeout", r.timeout),
                ("crash", r.crash),
                ("reload", r.reload),
            ]
            .map(|(cause, n)| (format!("{{worker=\"{}\",cause=\"{cause}\"}}", w.index), n as f64))
        })
        .collect();
    metric(
        "worker_recycles_total",
        "counter",
        "Replacements of each worker's process, by cause (max_requests, memory, timeout, crash, reload).",
        &recycles,
    );
    metric("worker_websockets", "gauge", "WebSockets open to each worker.", &per_worker(|w| w.websockets as f64));
    metric(
        "worker_rss_bytes",
        "gauge",
        "Resident memory of each worker's processes.",
        &per_worker(|w| w.usage.rss_bytes as f64),
    );
    metric(
        "worker_cpu_seconds_total",
        "counter",
        "CPU time of each worker's processes.",
        &per_worker(|w| w.usage.cpu_secs),
    );
    metric(
        "access_log_dropped_total",
        "counter",
        "Access log lines dropped because the writer fell behind.",
        &one(s.access_log_dropped as f64),
    );
    metric(
        "temp_file_bytes",
        "gauge",
        "Bytes in the temporary files of request and response bodies.",
        &one(s.temp_files.bytes as f64),
    );
    metric(
        "temp_file_held_back_total",
        "counter",
        "Times a body waited for room in its temporary file (a response held back from its worker).",
        &one(s.temp_files.held_back as f64),
    );
    metric("front_rss_bytes", "gauge", "Resident memory of the front.", &one(s.front.rss_bytes as f64));
    out
}

/// One sample per item: its labels and its value.
fn labelled<T>(items: &[T], labels: impl Fn(&T) -> String, value: fn(&T) -> f64) -> Vec<(String, f64)> {
    items.iter().map(|item| (labels(item), value(item))).collect()
}

/// A summary's quantiles in seconds, each labelled with `labels` (ending in a comma, or empty)
/// and its quantile.
fn quantiles(labels: &str, wait_ms: &WaitPercentiles) -> Vec<(String, f64)> {
    [("0.5", wait_ms.p50), ("0.9", wait_ms.p90), ("0.99", wait_ms.p99), ("0.999", wait_ms.p999)]
        .iter()
        .map(|(quantile, ms)| (format!("{{{labels}quantile=\"{quantile}\"}}"), ms / 1000.0))
        .collect()
}

/// A Prometheus label value: backslash, double quote and line feed escaped.
fn label_value(text: &str) -> String {
    text.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
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
    let responses: Vec<String> = s.responses.iter().map(|(code, n)| format!("{code}: {n}")).collect();
    let _ =
        writeln!(out, "responses    {}", if responses.is_empty() { "none".to_owned() } else { responses.join("  ") });
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

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1 << 20) as f64)
}
