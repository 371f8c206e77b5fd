//! Why a worker's process is replaced ([`Cause`]), every replacement counted by cause for stats
//! and `/metrics` ([`Recycles`]), and a process's [`Lifetime`] as recycling sees it: the requests
//! it served against its limit (`--max-requests` plus jitter), and whether it is due and why.
//!
//! Slots count here as they serve; the supervisor waits on [`Lifetime::due`]; [`super::recycle`]
//! holds the memory watch that marks a process due.

use std::sync::atomic::{AtomicU64, Ordering};

use headway_common::stats::RecyclesSnapshot;
use tokio::sync::watch;

/// Why a worker's process was replaced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cause {
    /// It served its `--max-requests` (plus jitter).
    MaxRequests,
    /// Its memory stayed above `--max-worker-memory`.
    Memory,
    /// A request outlived `--timeout`, or it broke the hop's rules.
    Timeout,
    /// It exited on its own.
    Crash,
    /// A reload (SIGHUP, or `--reload` seeing a change).
    Reload,
}

impl Cause {
    const ALL: [Cause; 5] = [Cause::MaxRequests, Cause::Memory, Cause::Timeout, Cause::Crash, Cause::Reload];

    /// Whether the process failed (crashed or hung), which counts as a restart too.
    pub fn is_failure(self) -> bool {
        matches!(self, Cause::Timeout | Cause::Crash)
    }

    /// As `/metrics` labels it.
    pub fn label(self) -> &'static str {
        match self {
            Cause::MaxRequests => "max_requests",
            Cause::Memory => "memory",
            Cause::Timeout => "timeout",
            Cause::Crash => "crash",
            Cause::Reload => "reload",
        }
    }
}

/// When a healthy worker is recycled; from the flags.
#[derive(Debug, Clone, Default)]
pub struct RecyclePolicy {
    /// `--max-requests`; 0: never for that.
    pub max_requests: u64,
    /// `--max-requests-jitter`: up to this many more, drawn per process.
    pub max_requests_jitter: u64,
    /// `--max-worker-memory`, in bytes, of the worker's whole process group.
    pub max_memory: Option<u64>,
}

impl RecyclePolicy {
    /// The number of requests a new process serves before it is recycled; `u64::MAX`: no limit.
    fn request_limit(&self) -> u64 {
        if self.max_requests == 0 {
            return u64::MAX;
        }
        self.max_requests + rand::random_range(0..=self.max_requests_jitter)
    }
}

/// Replacements of one worker, by cause.
#[derive(Default)]
pub struct Recycles([AtomicU64; Cause::ALL.len()]);

impl Recycles {
    pub fn count(&self, cause: Cause) {
        self.0[cause as usize].fetch_add(1, Ordering::Relaxed);
    }

    pub fn snapshot(&self) -> RecyclesSnapshot {
        let get = |cause: Cause| self.0[cause as usize].load(Ordering::Relaxed);
        RecyclesSnapshot {
            max_requests: get(Cause::MaxRequests),
            memory: get(Cause::Memory),
            timeout: get(Cause::Timeout),
            crash: get(Cause::Crash),
            reload: get(Cause::Reload),
        }
    }
}

/// The current process of a worker: requests it served, its limit, and whether it is due.
pub struct Lifetime {
    served: AtomicU64,
    limit: AtomicU64,
    due: watch::Sender<Option<Cause>>,
}

impl Default for Lifetime {
    fn default() -> Self {
        Lifetime { served: AtomicU64::new(0), limit: AtomicU64::new(u64::MAX), due: watch::Sender::new(None) }
    }
}

impl Lifetime {
    /// A new process starts: nothing served, a fresh limit, not due.
    pub fn begin(&self, policy: &RecyclePolicy) {
        self.served.store(0, Ordering::Relaxed);
        self.limit.store(policy.request_limit(), Ordering::Relaxed);
        self.due.send_replace(None);
    }

    /// Counts a request the process served; the one that reaches its limit makes it due.
    pub fn served_one(&self) {
        let served = self.served.fetch_add(1, Ordering::Relaxed) + 1;
        if served == self.limit.load(Ordering::Relaxed) {
            self.mark_due(Cause::MaxRequests);
        }
    }

    /// Marks the process for recycling, unless it already is.
    pub fn mark_due(&self, cause: Cause) {
        self.due.send_if_modified(|due| {
            if due.is_some() {
                return false;
            }
            *due = Some(cause);
            true
        });
    }

    /// Resolves with the cause once the process is due.
    pub async fn due(&self) -> Cause {
        let mut due = self.due.subscribe();
        let cause = *due.wait_for(Option::is_some).await.expect("the sender lives in self");
        cause.expect("waited for some")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_fall_within_the_jitter() {
        let policy = RecyclePolicy { max_requests: 50, max_requests_jitter: 10, max_memory: None };
        let limits: Vec<u64> = (0..200).map(|_| policy.request_limit()).collect();
        assert!(limits.iter().all(|limit| (50..=60).contains(limit)), "{limits:?}");
        assert!(limits.iter().any(|&limit| limit != limits[0]), "the jitter varies the limit");
        assert_eq!(RecyclePolicy::default().request_limit(), u64::MAX);
    }

    #[tokio::test]
    async fn the_request_that_reaches_the_limit_makes_the_process_due_once() {
        let lifetime = Lifetime::default();
        lifetime.begin(&RecyclePolicy { max_requests: 3, max_requests_jitter: 0, max_memory: None });
        let mut due = lifetime.due.subscribe();
        lifetime.served_one();
        lifetime.served_one();
        assert_eq!(*due.borrow_and_update(), None);
        lifetime.served_one();
        assert_eq!(lifetime.due().await, Cause::MaxRequests);
        lifetime.mark_due(Cause::Memory);
        assert_eq!(*lifetime.due.borrow(), Some(Cause::MaxRequests), "the first cause stands");
        lifetime.begin(&RecyclePolicy::default());
        assert_eq!(*lifetime.due.borrow(), None, "a new process starts afresh");
    }
}
