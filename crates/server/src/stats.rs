//! Stats: what the server has done and what it is doing now.
//!
//! The queue is the thing to watch (its depth, its high-water mark, how long requests waited),
//! so its figures come from the queue itself; this module adds the front's counters
//! (connections, responses by status) and what each worker is doing, and assembles one
//! [`Snapshot`] for the control endpoint. Counters are atomics bumped on the request path;
//! everything else is computed only when stats are read.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::queue::{Queue, QueueSnapshot, Reader};
use crate::tally::Tally;
use crate::worker::{Phase, Worker};

/// Counters kept by the front.
pub struct Stats {
    started: Instant,
    connections_open: Tally,
    connections_idle: Tally,
    connections_accepted: AtomicU64,
    /// Responses sent to clients, indexed by status code.
    responses: [AtomicU64; 600],
}

impl Default for Stats {
    fn default() -> Self {
        Stats {
            started: Instant::now(),
            connections_open: Tally::default(),
            connections_idle: Tally::default(),
            connections_accepted: AtomicU64::new(0),
            responses: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }
}

impl Stats {
    /// Counts a client connection as open until the guard is dropped.
    pub fn connection_opened(self: &Arc<Self>) -> Gauge {
        self.connections_accepted.fetch_add(1, Ordering::Relaxed);
        Gauge::raise(self.clone(), |stats| &stats.connections_open)
    }

    /// Counts a connection as idle (waiting for its next request) until the guard is dropped.
    pub fn connection_idle(self: &Arc<Self>) -> Gauge {
        Gauge::raise(self.clone(), |stats| &stats.connections_idle)
    }

    pub fn open_connections(&self) -> u64 {
        self.connections_open.get() as u64
    }

    /// Resolves once no client connection is open.
    pub async fn all_connections_closed(&self) {
        self.connections_open.zero().await
    }

    pub fn response_sent(&self, status: http::StatusCode) {
        if let Some(counter) = self.responses.get(status.as_u16() as usize) {
            counter.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Everything, now. Reading resets the queue's high-water mark for `reader`.
    pub fn snapshot(&self, queue: &Queue, workers: &[Arc<Worker>], threads: usize, reader: Reader) -> Snapshot {
        let workers: Vec<WorkerSnapshot> = workers.iter().map(|worker| WorkerSnapshot::of(worker)).collect();
        let busy = workers.iter().map(|w| w.busy).sum();
        let responses = self
            .responses
            .iter()
            .enumerate()
            .filter_map(|(status, count)| {
                let count = count.load(Ordering::Relaxed);
                (count > 0).then(|| (status.to_string(), count))
            })
            .collect();
        let load = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        let queue_snapshot = queue.snapshot(reader);
        Snapshot {
            uptime_secs: self.started.elapsed().as_secs_f64(),
            abandoned: AbandonedSnapshot { queued: queue_snapshot.withdrawn, running: queue.abandoned_running() },
            queue: queue_snapshot,
            slots: SlotsSnapshot { busy, total: workers.len() * threads },
            connections: ConnectionsSnapshot {
                open: self.connections_open.get() as u64,
                idle: self.connections_idle.get() as u64,
                accepted: load(&self.connections_accepted),
            },
            responses,
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
        Gauge { stats, tally }
    }
}

impl Drop for Gauge {
    fn drop(&mut self) {
        (self.tally)(&self.stats).down();
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Snapshot {
    pub uptime_secs: f64,
    pub queue: QueueSnapshot,
    pub slots: SlotsSnapshot,
    pub connections: ConnectionsSnapshot,
    /// Responses sent to clients, by status code.
    pub responses: BTreeMap<String, u64>,
    pub abandoned: AbandonedSnapshot,
    pub front: ProcessUsage,
    pub workers: Vec<WorkerSnapshot>,
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
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AbandonedSnapshot {
    pub queued: u64,
    pub running: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WorkerSnapshot {
    pub index: usize,
    pub pid: u32,
    pub state: String,
    pub busy: usize,
    pub requests: u64,
    /// Seconds its slots spent running requests (summed over slots).
    pub busy_secs: f64,
    pub restarts: u64,
    #[serde(flatten)]
    pub usage: ProcessUsage,
}

impl WorkerSnapshot {
    fn of(worker: &Worker) -> Self {
        let pid = worker.pid();
        let state = match worker.phase() {
            Phase::Starting => "starting",
            Phase::Ready { .. } => "ready",
            Phase::Draining => "draining",
            Phase::Stopped => "stopped",
        };
        WorkerSnapshot {
            index: worker.index,
            pid,
            state: state.to_owned(),
            busy: worker.busy.get(),
            requests: worker.served.load(Ordering::Relaxed),
            busy_secs: worker.busy_micros.load(Ordering::Relaxed) as f64 / 1e6,
            restarts: worker.restarts.load(Ordering::Relaxed),
            usage: if pid == 0 { ProcessUsage::default() } else { ProcessUsage::of_group(pid) },
        }
    }
}

/// Memory and CPU time of a process, or of every process in a worker's process group (a
/// `--cmd` worker may be a shell and the server it started).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ProcessUsage {
    pub rss_bytes: u64,
    pub cpu_secs: f64,
}

impl ProcessUsage {
    pub fn of_process(pid: u32) -> Self {
        proc_stat(pid).map(|stat| stat.usage()).unwrap_or_default()
    }

    pub fn of_group(pgid: u32) -> Self {
        let Ok(entries) = std::fs::read_dir("/proc") else { return ProcessUsage::default() };
        entries
            .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
            .filter_map(proc_stat)
            .filter(|stat| stat.pgrp == pgid)
            .fold(ProcessUsage::default(), |total, stat| {
                let usage = stat.usage();
                ProcessUsage { rss_bytes: total.rss_bytes + usage.rss_bytes, cpu_secs: total.cpu_secs + usage.cpu_secs }
            })
    }
}

/// The fields of /proc/PID/stat we use.
struct ProcStat {
    pgrp: u32,
    cpu_ticks: u64,
    rss_pages: u64,
}

impl ProcStat {
    fn usage(&self) -> ProcessUsage {
        // SAFETY: sysconf has no preconditions.
        let (ticks, page) = unsafe { (libc::sysconf(libc::_SC_CLK_TCK), libc::sysconf(libc::_SC_PAGESIZE)) };
        ProcessUsage {
            rss_bytes: self.rss_pages * page.max(1) as u64,
            cpu_secs: self.cpu_ticks as f64 / ticks.max(1) as f64,
        }
    }
}

fn proc_stat(pid: u32) -> Option<ProcStat> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces; fields after it are
    // counted from the last ')'.
    let fields: Vec<&str> = text[text.rfind(')')? + 2..].split(' ').collect();
    let field = |n: usize| fields.get(n - 3)?.parse::<u64>().ok();
    Some(ProcStat { pgrp: field(5)? as u32, cpu_ticks: field(14)? + field(15)?, rss_pages: field(24)? })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_own_process_usage() {
        let usage = ProcessUsage::of_process(std::process::id());
        assert!(usage.rss_bytes > 1 << 20, "a test binary uses more than 1 MiB");
    }

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
}
