//! Recycling: replacing a worker that still works, before a slow leak or fragmentation makes it
//! a problem: after it has served its share of requests (`--max-requests`, plus a random
//! `--max-requests-jitter` so that workers started together are not all replaced together), or
//! when its memory stays above `--max-worker-memory`. And why every worker replacement happened,
//! counted by cause for stats and `/metrics`.
//!
//! A worker due for recycling goes the way of a reload: it stops taking requests, finishes the
//! ones it runs, and is replaced while requests wait in the queue. Only one worker is away for
//! a recycle (or a reload) at a time, a [`Turns`] permit: a worker that becomes due while
//! another is away keeps serving until its turn, so the server never loses more than one
//! worker's capacity to a replacement nobody asked for.
//!
//! The front counts requests itself (every slot passes through it), so `--max-requests` works
//! for `--cmd` workers as well as the bundled one. Memory has no notification to wait for
//! (cgroup memory events would need a cgroup per worker), so [`watch_memory`] reads `/proc`
//! once a second for all workers together; a worker must be above the limit for
//! [`MEMORY_SAMPLES`] readings in a row, so a brief peak (one large upload) does not cost a
//! process.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use headway_common::procfs;
use headway_common::stats::RecyclesSnapshot;
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};
use tracing::warn;

use crate::worker::{Phase, Worker};

/// How often worker memory is read.
const MEMORY_INTERVAL: Duration = Duration::from_secs(1);
/// Readings above `--max-worker-memory` in a row that make a worker due.
const MEMORY_SAMPLES: u32 = 3;

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

/// The permit to take a worker away for a recycle or a reload: one at a time.
#[derive(Clone)]
pub struct Turns(Arc<Semaphore>);

impl Default for Turns {
    fn default() -> Self {
        Turns(Arc::new(Semaphore::new(1)))
    }
}

impl Turns {
    pub async fn take(&self) -> OwnedSemaphorePermit {
        self.0.clone().acquire_owned().await.expect("the semaphore is never closed")
    }
}

/// Marks a worker due for recycling once its process group's resident memory has been above
/// `limit` for [`MEMORY_SAMPLES`] readings in a row. Runs until aborted.
pub async fn watch_memory(workers: Vec<Arc<Worker>>, limit: u64) {
    let mut above: HashMap<usize, (u32, u32)> = HashMap::new(); // index -> (pid, readings in a row)
    let mut interval = tokio::time::interval(MEMORY_INTERVAL);
    loop {
        interval.tick().await;
        let processes = tokio::task::spawn_blocking(procfs::processes).await.unwrap_or_default();
        for worker in &workers {
            let pid = worker.pid();
            if pid == 0 || !matches!(worker.phase(), Phase::Ready { .. }) {
                above.remove(&worker.index);
                continue;
            }
            let rss = procfs::group_usage(&processes, pid).rss_bytes;
            if rss <= limit {
                above.remove(&worker.index);
                continue;
            }
            let entry = above.entry(worker.index).or_insert((pid, 0));
            if entry.0 != pid {
                *entry = (pid, 0);
            }
            entry.1 += 1;
            if entry.1 == MEMORY_SAMPLES {
                warn!(
                    "worker {} (pid {pid}) has used {} MiB, above --max-worker-memory, for {MEMORY_SAMPLES} s; \
                     recycling it",
                    worker.index,
                    rss >> 20
                );
                worker.lifetime.mark_due(Cause::Memory);
            }
        }
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
