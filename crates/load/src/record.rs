//! Measurement: what each answered or failed request adds to the run's totals.
//!
//! Memory does not grow with the number of requests: latencies go into HDR histograms
//! (microseconds, 3 significant digits, fixed range of one hour, no auto-resize) — one for every
//! answer, one per status class and one per URL, each allocated at its first answer — phases into
//! sums and extremes, and the per-second series into one small histogram per second that is
//! summarized as soon as every thread has moved past that second.

use std::collections::{BTreeMap, HashMap};
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// An open-loop request taken up more than this after its intended time counts as sent late.
/// tokio's timer wakes on millisecond ticks, so up to about a millisecond of lag is the timer's.
pub const LATE_AFTER: Duration = Duration::from_millis(2);

/// Highest latency the histograms hold (one hour, in microseconds); larger values are clamped.
const HIGHEST_MICROS: u64 = 3_600_000_000;

/// The run's latency histogram: 3 significant digits (0.1 %).
pub fn latency_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, HIGHEST_MICROS, 3).expect("static histogram bounds are valid")
}

/// A per-second histogram: 2 significant digits (1 %) keep each second at a few tens of KB.
fn second_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, HIGHEST_MICROS, 2).expect("static histogram bounds are valid")
}

/// A latency histogram that takes its memory (about 190 KB) only once something is recorded, so
/// a status class that never occurs or a URL that never answers costs nothing.
#[derive(Debug, Clone, Default)]
pub struct LazyHistogram(Option<Histogram<u64>>);

impl LazyHistogram {
    fn record(&mut self, micros: u64) {
        self.0.get_or_insert_with(latency_histogram).saturating_record(micros);
    }

    fn merge(&mut self, other: &LazyHistogram) {
        if let Some(theirs) = &other.0 {
            self.0.get_or_insert_with(latency_histogram).add(theirs).expect("histograms share their bounds");
        }
    }

    /// The histogram, if anything was recorded.
    pub fn get(&self) -> Option<&Histogram<u64>> {
        self.0.as_ref()
    }
}

/// Status classes 0xx to 9xx (a status line carries three digits), indexed by `status / 100`.
pub const STATUS_CLASSES: usize = 10;

fn status_class(status: u16) -> usize {
    usize::from(status / 100).min(STATUS_CLASSES - 1)
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// Count, sum and extremes of one phase of a request (connect, write, wait, read).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PhaseAccum {
    pub count: u64,
    pub sum_us: u64,
    pub min_us: u64,
    pub max_us: u64,
}

impl PhaseAccum {
    pub fn add(&mut self, d: Duration) {
        let us = micros(d);
        self.min_us = if self.count == 0 { us } else { self.min_us.min(us) };
        self.max_us = self.max_us.max(us);
        self.sum_us = self.sum_us.saturating_add(us);
        self.count += 1;
    }

    fn merge(&mut self, other: &PhaseAccum) {
        if other.count == 0 {
            return;
        }
        self.min_us = if self.count == 0 { other.min_us } else { self.min_us.min(other.min_us) };
        self.max_us = self.max_us.max(other.max_us);
        self.sum_us = self.sum_us.saturating_add(other.sum_us);
        self.count += other.count;
    }
}

/// Why a request got no response.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// The target refused the connection (nothing listening).
    ConnectRefused,
    /// Connecting failed otherwise (unreachable, no such socket file, ...).
    Connect,
    /// The connection was reset while the request was in flight.
    Reset,
    /// The server closed the connection before the response was complete.
    ClosedEarly,
    /// No complete response within the per-request timeout.
    Timeout,
    /// The response was not valid HTTP/1.x.
    Malformed,
    /// Any other I/O failure.
    Io,
    /// Still in flight when the run's hard stop (duration + timeout) cut it off.
    Aborted,
    /// WebSocket mode: the handshake was answered with another status than 101.
    HandshakeRefused,
}

impl ErrorKind {
    /// A short human name, as the lab prints it in its tables.
    pub fn describe(self) -> &'static str {
        match self {
            ErrorKind::ConnectRefused => "connection refused",
            ErrorKind::Connect => "connect failed",
            ErrorKind::Reset => "connection reset",
            ErrorKind::ClosedEarly => "connection closed before the response ended",
            ErrorKind::Timeout => "timeout",
            ErrorKind::Malformed => "malformed response",
            ErrorKind::Io => "i/o error",
            ErrorKind::Aborted => "aborted at the hard stop",
            ErrorKind::HandshakeRefused => "WebSocket handshake refused",
        }
    }
}

/// How often an error kind happened, with the first message seen as an example.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorCount {
    pub count: u64,
    pub example: String,
}

/// Responses by status code; a handful of codes, so a vector beats a map on the hot path.
#[derive(Debug, Clone, Default)]
pub struct StatusCounts(Vec<(u16, u64)>);

impl StatusCounts {
    fn add(&mut self, status: u16, n: u64) {
        match self.0.iter_mut().find(|(code, _)| *code == status) {
            Some((_, count)) => *count += n,
            None => self.0.push((status, n)),
        }
    }

    fn merge(&mut self, other: &StatusCounts) {
        for &(code, n) in &other.0 {
            self.add(code, n);
        }
    }

    pub fn to_map(&self) -> BTreeMap<u16, u64> {
        self.0.iter().copied().collect()
    }
}

/// Per-URL counts and latencies.
#[derive(Debug, Clone, Default)]
pub struct TargetTotals {
    /// Answers: responses, or echoed WebSocket messages.
    pub answered: u64,
    pub statuses: StatusCounts,
    pub errors: u64,
    pub latency: LazyHistogram,
}

/// One answered request, as the connection loop measured it.
#[derive(Debug, Clone, Copy)]
pub struct Sample<'a> {
    pub target: usize,
    /// The response's status; `None` for an echoed WebSocket message, which has none (its
    /// socket's handshake is counted by status instead).
    pub status: Option<u16>,
    pub body_bytes: u64,
    /// Zero when the request went out on an open connection.
    pub connect: Duration,
    pub write: Duration,
    pub wait: Duration,
    pub read: Duration,
    /// From the send time (closed loop) or the intended send time (open loop) to the last byte.
    pub latency: Duration,
    /// Open loop: how long after its intended time the client took the request up (part of
    /// `latency`). Zero in the closed loop.
    pub send_lag: Duration,
    pub completed_at: Instant,
    pub tally: Option<&'a [u8]>,
}

/// Everything one thread measured; threads' totals merge into the run's.
#[derive(Debug, Clone)]
pub struct Totals {
    pub latency: Histogram<u64>,
    /// The same latencies split by status class, indexed by `status / 100`.
    pub latency_by_class: [LazyHistogram; STATUS_CLASSES],
    pub connect: PhaseAccum,
    pub write: PhaseAccum,
    pub wait: PhaseAccum,
    pub read: PhaseAccum,
    pub send_lag: PhaseAccum,
    pub statuses: StatusCounts,
    pub targets: Vec<TargetTotals>,
    pub responses: u64,
    pub bytes: u64,
    pub errors: BTreeMap<ErrorKind, ErrorCount>,
    pub tally: HashMap<Box<[u8]>, u64>,
    pub connections: u64,
    pub late_sends: u64,
    /// CPU time (user + system) the load threads used during the run, in seconds.
    pub cpu_secs: f64,
}

impl Totals {
    pub fn new(targets: usize) -> Totals {
        Totals {
            latency: latency_histogram(),
            latency_by_class: Default::default(),
            connect: PhaseAccum::default(),
            write: PhaseAccum::default(),
            wait: PhaseAccum::default(),
            read: PhaseAccum::default(),
            send_lag: PhaseAccum::default(),
            statuses: StatusCounts::default(),
            targets: vec![TargetTotals::default(); targets],
            responses: 0,
            bytes: 0,
            errors: BTreeMap::new(),
            tally: HashMap::new(),
            connections: 0,
            late_sends: 0,
            cpu_secs: 0.0,
        }
    }

    pub fn error_count(&self) -> u64 {
        self.errors.values().map(|e| e.count).sum()
    }

    pub fn merge(&mut self, other: &Totals) {
        self.latency.add(&other.latency).expect("histograms share their bounds");
        for (mine, theirs) in self.latency_by_class.iter_mut().zip(&other.latency_by_class) {
            mine.merge(theirs);
        }
        self.connect.merge(&other.connect);
        self.write.merge(&other.write);
        self.wait.merge(&other.wait);
        self.read.merge(&other.read);
        self.send_lag.merge(&other.send_lag);
        self.statuses.merge(&other.statuses);
        for (mine, theirs) in self.targets.iter_mut().zip(&other.targets) {
            mine.answered += theirs.answered;
            mine.statuses.merge(&theirs.statuses);
            mine.errors += theirs.errors;
            mine.latency.merge(&theirs.latency);
        }
        self.responses += other.responses;
        self.bytes += other.bytes;
        for (kind, count) in &other.errors {
            self.add_errors(*kind, count.count, || count.example.clone());
        }
        for (value, n) in &other.tally {
            *self.tally.entry(value.clone()).or_default() += n;
        }
        self.connections += other.connections;
        self.late_sends += other.late_sends;
        self.cpu_secs += other.cpu_secs;
    }

    fn add_errors(&mut self, kind: ErrorKind, n: u64, example: impl FnOnce() -> String) {
        match self.errors.get_mut(&kind) {
            Some(entry) => entry.count += n,
            None => {
                self.errors.insert(kind, ErrorCount { count: n, example: example() });
            }
        }
    }
}

/// One second of the time series, summarized.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SecondStats {
    /// Seconds since the start of the run (this entry covers [second, second + 1)).
    pub second: u64,
    /// Responses completed in this second.
    pub requests: u64,
    pub errors: u64,
    pub bytes: u64,
    pub mean_secs: f64,
    pub p50_secs: f64,
    pub p90_secs: f64,
    pub p99_secs: f64,
    pub p999_secs: f64,
    pub max_secs: f64,
}

/// What one thread collected during the current second.
struct SecondWindow {
    second: u64,
    latency: Histogram<u64>,
    requests: u64,
    errors: u64,
    bytes: u64,
}

impl SecondWindow {
    fn new(second: u64) -> SecondWindow {
        SecondWindow { second, latency: second_histogram(), requests: 0, errors: 0, bytes: 0 }
    }

    fn is_empty(&self) -> bool {
        self.requests == 0 && self.errors == 0
    }

    fn summarize(&self) -> SecondStats {
        let h = &self.latency;
        let secs = |us: u64| us as f64 / 1e6;
        let at = |q: f64| if h.is_empty() { 0.0 } else { secs(h.value_at_quantile(q)) };
        SecondStats {
            second: self.second,
            requests: self.requests,
            errors: self.errors,
            bytes: self.bytes,
            mean_secs: if h.is_empty() { 0.0 } else { h.mean() / 1e6 },
            p50_secs: at(0.5),
            p90_secs: at(0.9),
            p99_secs: at(0.99),
            p999_secs: at(0.999),
            max_secs: if h.is_empty() { 0.0 } else { secs(h.max()) },
        }
    }
}

/// Gathers the threads' seconds. A second is summarized (and its histogram freed) once every
/// thread has recorded something later or finished, so only the seconds still open are kept.
pub struct SeriesCollector {
    state: Mutex<SeriesState>,
}

struct SeriesState {
    /// Per thread, the first second it may still add to (`u64::MAX` once it finished).
    open_from: Vec<u64>,
    pending: BTreeMap<u64, SecondWindow>,
    next: u64,
    done: Vec<SecondStats>,
}

impl SeriesState {
    fn settle(&mut self, up_to: u64) {
        while self.next < up_to {
            let window = self.pending.remove(&self.next).unwrap_or_else(|| SecondWindow::new(self.next));
            self.done.push(window.summarize());
            self.next += 1;
        }
    }

    /// Settles every second that holds data (and the empty ones between them).
    fn settle_all(&mut self) {
        let last = self.pending.keys().next_back().map_or(self.next, |s| s + 1);
        self.settle(last);
    }
}

impl SeriesCollector {
    pub fn new(threads: usize) -> SeriesCollector {
        SeriesCollector {
            state: Mutex::new(SeriesState {
                open_from: vec![0; threads],
                pending: BTreeMap::new(),
                next: 0,
                done: Vec::new(),
            }),
        }
    }

    /// Adds `window` (a thread's finished second) and marks the thread as past `now_second`.
    fn flush(&self, thread: usize, window: &SecondWindow, now_second: u64) {
        let mut state = self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if !window.is_empty() {
            let entry = state.pending.entry(window.second).or_insert_with(|| SecondWindow::new(window.second));
            entry.latency.add(&window.latency).expect("histograms share their bounds");
            entry.requests += window.requests;
            entry.errors += window.errors;
            entry.bytes += window.bytes;
        }
        state.open_from[thread] = now_second;
        let up_to = state.open_from.iter().copied().min().unwrap_or(u64::MAX);
        if up_to == u64::MAX {
            state.settle_all();
        } else {
            state.settle(up_to);
        }
    }

    /// The whole series, once every thread has finished.
    pub fn into_series(self) -> Vec<SecondStats> {
        let mut state = self.state.into_inner().unwrap_or_else(|poisoned| poisoned.into_inner());
        state.settle_all();
        state.done
    }
}

/// Counters the progress line reads while the run goes on; one cache line per thread so
/// threads never contend.
#[derive(Debug, Default)]
#[repr(align(64))]
pub struct LiveCounters {
    pub responses: AtomicU64,
    pub errors: AtomicU64,
}

/// One thread's recorder: totals, the current second, and the live counters.
pub struct Recorder {
    pub totals: Totals,
    run_start: Instant,
    thread: usize,
    window: SecondWindow,
    series: Arc<SeriesCollector>,
    live: Arc<[LiveCounters]>,
}

impl Recorder {
    pub fn new(
        targets: usize,
        run_start: Instant,
        thread: usize,
        series: Arc<SeriesCollector>,
        live: Arc<[LiveCounters]>,
    ) -> Recorder {
        Recorder { totals: Totals::new(targets), run_start, thread, window: SecondWindow::new(0), series, live }
    }

    pub fn record(&mut self, sample: &Sample<'_>) {
        let t = &mut self.totals;
        let latency = micros(sample.latency);
        t.latency.saturating_record(latency);
        if let Some(status) = sample.status {
            t.latency_by_class[status_class(status)].record(latency);
            t.statuses.add(status, 1);
            t.targets[sample.target].statuses.add(status, 1);
        }
        t.connect.add(sample.connect);
        t.write.add(sample.write);
        t.wait.add(sample.wait);
        t.read.add(sample.read);
        t.send_lag.add(sample.send_lag);
        if sample.send_lag > LATE_AFTER {
            t.late_sends += 1;
        }
        let target = &mut t.targets[sample.target];
        target.answered += 1;
        target.latency.record(latency);
        t.responses += 1;
        t.bytes += sample.body_bytes;
        if let Some(value) = sample.tally {
            match t.tally.get_mut(value) {
                Some(n) => *n += 1,
                None => {
                    t.tally.insert(value.into(), 1);
                }
            }
        }
        self.live[self.thread].responses.store(t.responses, Ordering::Relaxed);

        let window = self.window_at(sample.completed_at);
        window.latency.saturating_record(latency);
        window.requests += 1;
        window.bytes += sample.body_bytes;
    }

    /// Counts a request that got no response; `target` is unknown only for requests the hard
    /// stop cut off (`n` of them).
    pub fn record_error(
        &mut self,
        kind: ErrorKind,
        target: Option<usize>,
        at: Instant,
        example: impl FnOnce() -> String,
    ) {
        self.record_errors(kind, target, 1, at, example);
    }

    pub fn record_errors(
        &mut self,
        kind: ErrorKind,
        target: Option<usize>,
        n: u64,
        at: Instant,
        example: impl FnOnce() -> String,
    ) {
        self.totals.add_errors(kind, n, example);
        if let Some(target) = target {
            self.totals.targets[target].errors += n;
        }
        self.live[self.thread].errors.store(self.totals.error_count(), Ordering::Relaxed);
        self.window_at(at).errors += n;
    }

    pub fn connection_opened(&mut self) {
        self.totals.connections += 1;
    }

    /// Counts the answer to a WebSocket handshake of `target` by its status.
    pub fn record_handshake(&mut self, target: usize, status: u16) {
        self.totals.statuses.add(status, 1);
        self.totals.targets[target].statuses.add(status, 1);
    }

    /// The window for the second containing `at`, handing finished seconds to the collector.
    fn window_at(&mut self, at: Instant) -> &mut SecondWindow {
        let second = at.saturating_duration_since(self.run_start).as_secs();
        if second > self.window.second {
            self.series.flush(self.thread, &self.window, second);
            self.window.latency.reset();
            self.window.second = second;
            self.window.requests = 0;
            self.window.errors = 0;
            self.window.bytes = 0;
        }
        &mut self.window
    }

    /// Hands the last second to the collector and returns the totals.
    pub fn finish(self) -> Totals {
        self.series.flush(self.thread, &self.window, u64::MAX);
        self.totals
    }
}

/// A failed connect: refused (nothing listening), or otherwise.
pub(crate) fn connect_kind(err: &io::Error) -> ErrorKind {
    match err.kind() {
        io::ErrorKind::ConnectionRefused => ErrorKind::ConnectRefused,
        _ => ErrorKind::Connect,
    }
}

pub(crate) fn io_kind(err: &io::Error) -> ErrorKind {
    match err.kind() {
        io::ErrorKind::ConnectionReset | io::ErrorKind::ConnectionAborted | io::ErrorKind::BrokenPipe => {
            ErrorKind::Reset
        }
        io::ErrorKind::TimedOut => ErrorKind::Timeout,
        _ => ErrorKind::Io,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An answer of 5 bytes that took `ms`, completed at `at`.
    fn answer(target: usize, status: u16, ms: u64, at: Instant) -> Sample<'static> {
        Sample {
            target,
            status: Some(status),
            body_bytes: 5,
            connect: Duration::ZERO,
            write: Duration::ZERO,
            wait: Duration::from_millis(ms),
            read: Duration::ZERO,
            latency: Duration::from_millis(ms),
            send_lag: Duration::ZERO,
            completed_at: at,
            tally: None,
        }
    }

    /// Two threads' recorders for `targets` URLs, sharing one series, started now.
    fn two_threads(targets: usize) -> (Recorder, Recorder, Arc<SeriesCollector>, Instant) {
        let series = Arc::new(SeriesCollector::new(2));
        let live: Arc<[LiveCounters]> = (0..2).map(|_| LiveCounters::default()).collect();
        let start = Instant::now();
        let a = Recorder::new(targets, start, 0, series.clone(), live.clone());
        let b = Recorder::new(targets, start, 1, series.clone(), live);
        (a, b, series, start)
    }

    #[test]
    fn latency_splits_by_class_and_target_and_merges_across_threads() {
        let (mut a, mut b, _, start) = two_threads(2);
        a.record(&answer(0, 200, 100, start));
        a.record(&answer(1, 503, 1, start));
        b.record(&answer(0, 204, 120, start));
        b.record(&answer(0, 503, 2, start));
        let mut totals = Totals::new(2);
        totals.merge(&a.finish());
        totals.merge(&b.finish());

        let count = |h: &LazyHistogram| h.get().map_or(0, |h| h.len());
        let counts: Vec<u64> = totals.latency_by_class.iter().map(count).collect();
        assert_eq!(counts, [0, 0, 2, 0, 0, 2, 0, 0, 0, 0]);
        let served = totals.latency_by_class[2].get().unwrap();
        // 3 significant digits: 100 ms reads back within 0.1 %.
        assert!(served.min() >= 99_900 && served.max() < 120_200, "only the 2xx answers' latencies");
        assert!(totals.latency_by_class[4].get().is_none(), "a class that never occurred takes no memory");
        assert_eq!(count(&totals.targets[0].latency), 3);
        assert_eq!(count(&totals.targets[1].latency), 1);
        assert!(totals.targets[1].latency.get().unwrap().max() < 1_100);
        assert_eq!(status_class(999), 9);
    }

    #[test]
    fn series_settles_a_second_only_when_every_thread_moved_past_it() {
        let (mut a, mut b, series, start) = two_threads(1);
        let sample = |at: Instant, ms: u64| answer(0, 200, ms, at);
        a.record(&sample(start, 10));
        b.record(&sample(start, 30));
        // Thread a moves to second 3; b still may add to second 0, so nothing is settled.
        a.record(&sample(start + Duration::from_millis(3100), 20));
        assert!(series.state.lock().unwrap().done.is_empty());
        b.record(&sample(start + Duration::from_millis(2500), 40));
        // Both are past second 1 now: seconds 0 and 1 (empty) are settled.
        assert_eq!(series.state.lock().unwrap().done.len(), 2);
        a.finish();
        b.finish();
        let series = Arc::into_inner(series).unwrap().into_series();
        let counts: Vec<(u64, u64)> = series.iter().map(|s| (s.second, s.requests)).collect();
        assert_eq!(counts, vec![(0, 2), (1, 0), (2, 1), (3, 1)]);
        assert!((series[0].max_secs - 0.030).abs() < 0.001);
        assert_eq!(series[1].max_secs, 0.0);
    }
}
