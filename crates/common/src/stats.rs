//! The JSON of the control endpoint's `/stats`, as types: the server builds a [`Snapshot`] and
//! serves it; `headway stats` and the lab read it back into the same types, so a field renamed
//! on one side is a compile error on the other, not a silent zero.
//!
//! Only the shape lives here; what the numbers mean is said where they are counted (the queue's
//! in the server's `queue`, the rest in its `stats`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub use crate::procfs::ProcessUsage;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Snapshot {
    pub uptime_secs: f64,
    pub queue: QueueSnapshot,
    pub slots: SlotsSnapshot,
    pub connections: ConnectionsSnapshot,
    /// Responses sent to clients, by status code.
    pub responses: BTreeMap<String, u64>,
    pub abandoned: AbandonedSnapshot,
    /// Access log lines dropped because the writer fell behind.
    #[serde(default)]
    pub access_log_dropped: u64,
    #[serde(default)]
    pub websockets: WebSocketsSnapshot,
    #[serde(default)]
    pub temp_files: TempFilesSnapshot,
    /// Files the front sent itself, apart from the app's responses.
    #[serde(default)]
    pub static_files: StaticFilesSnapshot,
    /// How many workers there are, may be, and what changed their number.
    #[serde(default)]
    pub scaling: ScalingSnapshot,
    /// The queue's waits since this reader's previous read: what an autoscaler scales by.
    #[serde(default)]
    pub recent: RecentSnapshot,
    pub front: ProcessUsage,
    pub workers: Vec<WorkerSnapshot>,
}

/// Files the front sent without a slot: from `--static` mounts (`responses` by status, counted
/// only here, not among `responses` of the app), and those workers handed it with
/// `X-Accel-Redirect` or `X-Sendfile` (`handed_off`; refused: a name outside what the operator
/// allowed, answered 502).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct StaticFilesSnapshot {
    pub responses: BTreeMap<String, u64>,
    /// Body bytes of the mounts' responses.
    pub bytes: u64,
    pub handed_off: u64,
    pub handoffs_refused: u64,
}

/// W and its bounds (`-w MIN:MAX`), and every change of it by cause.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ScalingSnapshot {
    /// Workers serving or starting (not those draining away).
    pub workers: usize,
    pub min: usize,
    pub max: usize,
    /// Whether W moves by itself (a range was given), not only by hand.
    pub automatic: bool,
    pub events: ScalingEvents,
    /// Workers alive (draining ones too) x time, since the server started: what the pool cost.
    pub worker_seconds: f64,
}

/// Changes of W by cause, and adds the memory budget refused (`memory_cap`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ScalingEvents {
    pub queue_wait: u64,
    pub idle: u64,
    pub memory_cap: u64,
    pub signal: u64,
    pub control: u64,
}

/// The queue since the reader's previous read.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct RecentSnapshot {
    /// Requests a slot started.
    pub started: u64,
    /// Their waits for a slot, in milliseconds.
    pub wait_p50_ms: f64,
    pub wait_p99_ms: f64,
}

/// The temporary files of request and response bodies (`--max-temp-disk`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct TempFilesSnapshot {
    /// Bytes they hold now.
    pub bytes: u64,
    /// The most they may hold together.
    pub limit: u64,
    /// Times a body waited for room: a response held back from its worker because its client
    /// was too far behind or the budget was spent.
    pub held_back: u64,
}

/// What the queue reports in stats.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct QueueSnapshot {
    pub depth: usize,
    pub high_water: usize,
    pub max_len: usize,
    pub timeout_secs: f64,
    pub dispatched: u64,
    pub wait_ms: WaitPercentiles,
    pub shed_queue_full: u64,
    pub shed_queue_timeout: u64,
    /// Refused on arrival: by the service time, they would not have started in time.
    pub shed_at_arrival: u64,
    /// Refused on arrival while a sustained overload was held to the target wait.
    pub shed_standing_queue: u64,
    pub withdrawn: u64,
    /// Moving mean of recent requests' service time (0 until enough have finished).
    pub mean_service_ms: f64,
    /// Controlled delay: the target wait now (0 when switched off) and the interval over which
    /// a queue above it is judged standing.
    pub target_ms: f64,
    pub interval_ms: f64,
    /// Whether a sustained overload is being held to the target now.
    pub overloaded: bool,
    /// How many times a sustained overload was found.
    pub overloads: u64,
    /// The lanes: `fast`, `slow` and one per `--lane` pattern; none with `--no-lanes`.
    #[serde(default)]
    pub lanes: Vec<LaneSnapshot>,
    /// The lanes' rule as it stands: how long a slow request may be passed over by fast ones, and
    /// the most slots slow requests may hold while a fast one waits (0 with `--no-lanes`).
    #[serde(default)]
    pub lane_passed_over_ms: f64,
    #[serde(default)]
    pub lane_slow_slots: usize,
}

/// One lane of the queue.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LaneSnapshot {
    /// `fast`, `slow`, or the `--lane` pattern.
    pub name: String,
    pub kind: LaneKind,
    /// The routes whose latest request took it, the most used first (at most 20).
    pub routes: Vec<RouteSnapshot>,
    /// Moving mean service time of its requests.
    pub mean_service_ms: f64,
    /// Its requests waiting now, and running now (the slots it holds).
    pub waiting: usize,
    pub running: usize,
    /// Its requests handed to a slot, and how long they had waited.
    pub started: u64,
    pub wait_ms: WaitPercentiles,
}

/// Whether a lane is learned from service times or declared with `--lane`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LaneKind {
    Learned,
    Declared,
}

/// A route: its method and path with identifiers folded (`GET /orders/{id}`), and the moving
/// mean of its service time.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RouteSnapshot {
    pub route: String,
    pub mean_service_ms: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WaitPercentiles {
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
    pub mean: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SlotsSnapshot {
    pub busy: usize,
    pub total: usize,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ConnectionsSnapshot {
    pub open: u64,
    pub idle: u64,
    pub accepted: u64,
    /// Closed before a request could be read: a PROXY header missing or wrong, or a TLS
    /// handshake that failed (a certificate the client refused, not TLS at all) or was not done
    /// within `--header-timeout`.
    #[serde(default)]
    pub handshakes_failed: u64,
    /// Of those accepted, the ones that spoke HTTP/2.
    #[serde(default)]
    pub http2: u64,
    /// Requests that came as HTTP/2 streams.
    #[serde(default)]
    pub http2_streams: u64,
    /// HTTP/2 connections closed with GOAWAY `ENHANCE_YOUR_CALM`: their client flooded (resets,
    /// PING, SETTINGS, CONTINUATION or small DATA frames).
    #[serde(default)]
    pub http2_calmed: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AbandonedSnapshot {
    pub queued: u64,
    pub running: u64,
}

/// WebSockets: open now (relayed, each on a worker connection of its own), opened since the
/// start, and handshakes refused with 503 over `--max-websockets`; the bytes their unfinished
/// fragmented messages hold (`--max-websocket-held`), and sockets closed with 1013 for want of it.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct WebSocketsSnapshot {
    pub open: u64,
    pub opened: u64,
    pub refused: u64,
    #[serde(default)]
    pub held_bytes: u64,
    #[serde(default)]
    pub held_limit: u64,
    #[serde(default)]
    pub held_refused: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WorkerSnapshot {
    pub index: usize,
    pub pid: u32,
    pub state: WorkerState,
    /// Its slots: the most requests it runs at once.
    #[serde(default)]
    pub slots: usize,
    pub busy: usize,
    pub requests: u64,
    /// Seconds its slots spent running requests (summed over slots).
    pub busy_secs: f64,
    /// Replacements after a crash or a timeout (also counted by cause in `recycles`).
    pub restarts: u64,
    /// Connections to it closed because it sent bytes no request asked for (a `--cmd` worker's
    /// late or extra response).
    #[serde(default)]
    pub unrequested: u64,
    /// Replacements of this worker's process, by cause.
    #[serde(default)]
    pub recycles: RecyclesSnapshot,
    /// WebSockets open to this worker.
    #[serde(default)]
    pub websockets: usize,
    #[serde(flatten)]
    pub usage: ProcessUsage,
}

/// Why a worker's processes were replaced, counted by cause.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecyclesSnapshot {
    /// It served `--max-requests` (plus jitter).
    pub max_requests: u64,
    /// Its memory stayed above `--max-worker-memory`.
    pub memory: u64,
    /// A request outlived `--timeout` (or it broke the hop's rules).
    pub timeout: u64,
    /// It exited on its own.
    pub crash: u64,
    /// A reload: SIGHUP, or `--reload` seeing a change.
    pub reload: u64,
}

/// Where a worker is in its life, as `/stats` spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WorkerState {
    Starting,
    Ready,
    Draining,
    Stopped,
}

impl std::fmt::Display for WorkerState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // `pad`, so that `headway stats` can align it in a column.
        f.pad(match self {
            WorkerState::Starting => "starting",
            WorkerState::Ready => "ready",
            WorkerState::Draining => "draining",
            WorkerState::Stopped => "stopped",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn worker_states_are_shown_as_spelled_in_json() {
        for state in [WorkerState::Starting, WorkerState::Ready, WorkerState::Draining, WorkerState::Stopped] {
            let json = serde_json::to_string(&state).expect("serializes");
            assert_eq!(json, format!("\"{state}\""));
        }
    }
}
