//! Stats: what the server has done and what it is doing now.
//!
//! The queue is the thing to watch (its depth, its high-water mark, how long requests waited),
//! so its figures come from the queue itself; this module adds the front's counters
//! (connections, WebSockets, responses by status) and what each worker is doing, and assembles one
//! [`Snapshot`] for the control endpoint. Counters are atomics bumped on the request path;
//! everything else is computed only when stats are read.
//!
//! A connection that has become a WebSocket is counted as a WebSocket, no longer as a
//! connection: `connections` are the ones speaking HTTP, which a graceful shutdown waits for.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use headway_common::stats::{
    AbandonedSnapshot, ConnectionsSnapshot, ProcessUsage, SlotsSnapshot, Snapshot, StaticFilesSnapshot,
    WebSocketsSnapshot, WorkerSnapshot, WorkerState,
};

use crate::queue::{Queue, Reader};
use crate::tally::Tally;
use crate::workers::worker::{Phase, Worker};

/// Counters kept by the front.
pub struct Stats {
    started: Instant,
    connections_open: Tally,
    connections_idle: Tally,
    connections_accepted: AtomicU64,
    handshakes_failed: AtomicU64,
    http2_connections: AtomicU64,
    http2_streams: AtomicU64,
    http2_calmed: AtomicU64,
    /// WebSockets open or in their handshake: what `--max-websockets` bounds.
    websockets_admitted: Tally,
    websockets_open: Tally,
    websockets_opened: AtomicU64,
    websockets_refused: AtomicU64,
    /// Responses sent to clients, by status code.
    responses: StatusCounts,
    /// Responses the front sent from `--static` mounts, by status code, and their body bytes.
    static_responses: StatusCounts,
    static_bytes: AtomicU64,
    /// Files workers handed the front, and names refused (`X-Accel-Redirect`, `X-Sendfile`).
    handed_off: AtomicU64,
    handoffs_refused: AtomicU64,
}

/// Responses counted by status code.
struct StatusCounts([AtomicU64; 600]);

impl Default for StatusCounts {
    fn default() -> Self {
        StatusCounts(std::array::from_fn(|_| AtomicU64::new(0)))
    }
}

impl StatusCounts {
    fn count(&self, status: http::StatusCode) {
        if let Some(counter) = self.0.get(status.as_u16() as usize) {
            counter.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The statuses counted at least once, with their counts.
    fn snapshot(&self) -> BTreeMap<String, u64> {
        self.0
            .iter()
            .enumerate()
            .filter_map(|(status, count)| {
                let count = count.load(Ordering::Relaxed);
                (count > 0).then(|| (status.to_string(), count))
            })
            .collect()
    }
}

impl Default for Stats {
    fn default() -> Self {
        Stats {
            started: Instant::now(),
            connections_open: Tally::default(),
            connections_idle: Tally::default(),
            connections_accepted: AtomicU64::new(0),
            handshakes_failed: AtomicU64::new(0),
            http2_connections: AtomicU64::new(0),
            http2_streams: AtomicU64::new(0),
            http2_calmed: AtomicU64::new(0),
            websockets_admitted: Tally::default(),
            websockets_open: Tally::default(),
            websockets_opened: AtomicU64::new(0),
            websockets_refused: AtomicU64::new(0),
            responses: StatusCounts::default(),
            static_responses: StatusCounts::default(),
            static_bytes: AtomicU64::new(0),
            handed_off: AtomicU64::new(0),
            handoffs_refused: AtomicU64::new(0),
        }
    }
}

impl Stats {
    /// Counts a client connection as open until the guard is dropped.
    pub fn connection_opened(self: &Arc<Self>) -> Gauge {
        self.connections_accepted.fetch_add(1, Ordering::Relaxed);
        Gauge::raise(self.clone(), |stats| &stats.connections_open)
    }

    /// Counts a connection closed before its first request: its PROXY header or TLS handshake
    /// failed.
    pub fn handshake_failed(&self) {
        self.handshakes_failed.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a connection that speaks HTTP/2.
    pub fn http2_connection(&self) {
        self.http2_connections.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a request that came as an HTTP/2 stream.
    pub fn http2_stream(&self) {
        self.http2_streams.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts an HTTP/2 connection closed with GOAWAY `ENHANCE_YOUR_CALM`.
    pub fn http2_calmed(&self) {
        self.http2_calmed.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a connection as idle (waiting for its next request) until the guard is dropped.
    pub fn connection_idle(self: &Arc<Self>) -> Gauge {
        Gauge::raise(self.clone(), |stats| &stats.connections_idle)
    }

    /// Admits a WebSocket handshake if fewer than `max` WebSockets are open or in their
    /// handshake; the guard holds its place until the socket closes. `None`: refused, and counted.
    pub fn admit_websocket(self: &Arc<Self>, max: usize) -> Option<Gauge> {
        if self.websockets_admitted.try_up(max) {
            return Some(Gauge::holding(self.clone(), |stats| &stats.websockets_admitted));
        }
        self.websockets_refused.fetch_add(1, Ordering::Relaxed);
        None
    }

    /// Counts a WebSocket as open until the guard is dropped.
    pub fn websocket_opened(self: &Arc<Self>) -> Gauge {
        self.websockets_opened.fetch_add(1, Ordering::Relaxed);
        Gauge::raise(self.clone(), |stats| &stats.websockets_open)
    }

    pub fn open_websockets(&self) -> u64 {
        self.websockets_open.get() as u64
    }

    pub fn open_connections(&self) -> u64 {
        self.connections_open.get() as u64
    }

    /// Resolves once no client connection is open.
    pub async fn all_connections_closed(&self) {
        self.connections_open.zero().await
    }

    pub fn response_sent(&self, status: http::StatusCode) {
        self.responses.count(status);
    }

    /// Counts a response the front sent from a `--static` mount, apart from the app's.
    pub fn static_sent(&self, status: http::StatusCode, body_bytes: u64) {
        self.static_responses.count(status);
        self.static_bytes.fetch_add(body_bytes, Ordering::Relaxed);
    }

    /// Counts a file a worker handed the front (`accepted`), or a name it refused.
    pub fn handed_off(&self, accepted: bool) {
        let counter = if accepted { &self.handed_off } else { &self.handoffs_refused };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// Everything, now. Reading resets the queue's high-water mark for `reader`.
    pub fn snapshot(&self, queue: &Queue, workers: &[Arc<Worker>], reader: Reader) -> Snapshot {
        let workers: Vec<WorkerSnapshot> = workers.iter().map(|worker| worker_snapshot(worker)).collect();
        let busy = workers.iter().map(|w| w.busy).sum();
        let responses = self.responses.snapshot();
        let load = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        let queue_snapshot = queue.snapshot(reader);
        Snapshot {
            uptime_secs: self.started.elapsed().as_secs_f64(),
            abandoned: AbandonedSnapshot { queued: queue_snapshot.withdrawn, running: queue.abandoned_running() },
            queue: queue_snapshot,
            slots: SlotsSnapshot { busy, total: workers.iter().map(|worker| worker.slots).sum() },
            connections: ConnectionsSnapshot {
                open: self.connections_open.get() as u64,
                idle: self.connections_idle.get() as u64,
                accepted: load(&self.connections_accepted),
                handshakes_failed: load(&self.handshakes_failed),
                http2: load(&self.http2_connections),
                http2_streams: load(&self.http2_streams),
                http2_calmed: load(&self.http2_calmed),
            },
            responses,
            access_log_dropped: 0, // the access log's own count; the control endpoint adds it
            websockets: WebSocketsSnapshot {
                open: self.websockets_open.get() as u64,
                opened: load(&self.websockets_opened),
                refused: load(&self.websockets_refused),
                ..Default::default() // what unfinished messages hold: the control endpoint adds it
            },
            temp_files: Default::default(), // the spools' own count; the control endpoint adds it
            static_files: StaticFilesSnapshot {
                responses: self.static_responses.snapshot(),
                bytes: load(&self.static_bytes),
                handed_off: load(&self.handed_off),
                handoffs_refused: load(&self.handoffs_refused),
            },
            scaling: Default::default(), // the supervisor's; the control endpoint adds it
            recent: Default::default(),  // the control endpoint reads it for its reader
            front: ProcessUsage::of_process(std::process::id()),
            workers,
        }
    }
}

/// Holds one unit of a gauge while alive.
pub struct Gauge {
    stats: Arc<Stats>,
    tally: fn(&Stats) -> &Tally,
}

impl Gauge {
    fn raise(stats: Arc<Stats>, tally: fn(&Stats) -> &Tally) -> Self {
        tally(&stats).up();
        Gauge::holding(stats, tally)
    }

    /// A guard for a unit already counted.
    fn holding(stats: Arc<Stats>, tally: fn(&Stats) -> &Tally) -> Self {
        Gauge { stats, tally }
    }
}

impl Drop for Gauge {
    fn drop(&mut self) {
        (self.tally)(&self.stats).down();
    }
}

fn worker_snapshot(worker: &Worker) -> WorkerSnapshot {
    let pid = worker.pid();
    let state = match worker.phase() {
        Phase::Starting => WorkerState::Starting,
        Phase::Ready { .. } => WorkerState::Ready,
        Phase::Draining => WorkerState::Draining,
        Phase::Stopped => WorkerState::Stopped,
    };
    WorkerSnapshot {
        index: worker.index,
        pid,
        state,
        slots: worker.slots(),
        busy: worker.busy.get(),
        requests: worker.served.load(Ordering::Relaxed),
        busy_secs: worker.busy_micros.load(Ordering::Relaxed) as f64 / 1e6,
        restarts: worker.restarts.load(Ordering::Relaxed),
        unrequested: worker.unrequested.load(Ordering::Relaxed),
        recycles: worker.recycles.snapshot(),
        websockets: worker.websockets.get(),
        usage: if pid == 0 { ProcessUsage::default() } else { ProcessUsage::of_group(pid) },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gauges_go_back_down() {
        let stats = Arc::new(Stats::default());
        let open = stats.connection_opened();
        let idle = stats.connection_idle();
        assert_eq!(stats.open_connections(), 1);
        drop(idle);
        drop(open);
        assert_eq!(stats.open_connections(), 0);
        assert_eq!(stats.connections_accepted.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn websockets_beyond_the_limit_are_refused_and_counted() {
        let stats = Arc::new(Stats::default());
        let first = stats.admit_websocket(1).expect("admitted");
        assert!(stats.admit_websocket(1).is_none());
        let open = stats.websocket_opened();
        assert_eq!(stats.open_websockets(), 1);
        drop(open);
        drop(first);
        let again = stats.admit_websocket(1);
        assert!(again.is_some(), "a closed socket frees its place");
        assert_eq!(stats.open_websockets(), 0);
        assert_eq!(stats.websockets_refused.load(Ordering::Relaxed), 1);
        assert_eq!(stats.websockets_opened.load(Ordering::Relaxed), 1);
    }
}
