//! Recycling: replacing a worker that still works, before a slow leak or fragmentation makes it
//! a problem: after it has served its share of requests (`--max-requests`, plus a random
//! `--max-requests-jitter` so that workers started together are not all replaced together), or
//! when its memory stays above `--max-worker-memory`. A process's count and whether it is due
//! are in [`super::replacement`].
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
use std::sync::Arc;
use std::time::Duration;

use headway_common::procfs;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tracing::warn;

use super::replacement::Cause;
use super::worker::{Phase, Worker};

/// How often worker memory is read.
const MEMORY_INTERVAL: Duration = Duration::from_secs(1);
/// Readings above `--max-worker-memory` in a row that make a worker due.
const MEMORY_SAMPLES: u32 = 3;

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
/// `limit` for [`MEMORY_SAMPLES`] readings in a row; `workers` lists them as they are now. Runs
/// until aborted.
pub async fn watch_memory(workers: impl Fn() -> Vec<Arc<Worker>>, limit: u64) {
    let mut above: HashMap<usize, (u32, u32)> = HashMap::new(); // index -> (pid, readings in a row)
    let mut interval = tokio::time::interval(MEMORY_INTERVAL);
    loop {
        interval.tick().await;
        let processes = tokio::task::spawn_blocking(procfs::processes).await.unwrap_or_default();
        for worker in &workers() {
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
