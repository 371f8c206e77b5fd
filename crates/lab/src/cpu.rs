//! Where a server spends its CPU: the user + system time of every process of its tree (from
//! `/proc`) before and after a case, divided by the requests it answered, and split between the
//! process the lab started and the rest. For headway the split comes from its own stats (its
//! front process, and each worker's process group); for a peer it is the master, or the only
//! process, against its worker processes. The load generator runs in the lab's own process,
//! outside every server's tree, so its CPU is never counted here; it measures its own threads
//! (the row's `load_us_per_request`), since a server whose answers cost it more leaves itself
//! less of the cores they share.
//!
//! What the server did not use is told too: how much of the machine's cores sat idle during the
//! case, and how much the hypervisor took for other guests (steal). Idle cores under a closed
//! loop mean some stage ran out of work while another was busy (a serial stage shows so); steal
//! means the run measured a smaller machine than it thinks, which on a shared VM is how one run
//! differs from the next.

use std::collections::BTreeMap;

use headway_common::stats::Snapshot;
use serde::{Deserialize, Serialize};

use crate::process_tree::Tree;

/// CPU seconds used so far by the processes of one server, at one moment.
#[derive(Debug, Clone, PartialEq)]
pub struct CpuSample {
    /// The process the lab started.
    root: u32,
    /// Every process of its tree.
    by_pid: BTreeMap<u32, f64>,
    /// headway only, from its stats.
    headway: Option<HeadwayCpu>,
}

#[derive(Debug, Clone, PartialEq)]
struct HeadwayCpu {
    front_secs: f64,
    /// Each worker's process group, by the worker's pid.
    workers: BTreeMap<u32, f64>,
}

impl CpuSample {
    /// `tree` is the server's process tree rooted at `root`; `stats` headway's, read at the same
    /// moment (`None` for a peer).
    pub fn of(root: u32, tree: &Tree, stats: Option<&Snapshot>) -> CpuSample {
        let headway = stats.map(|stats| HeadwayCpu {
            front_secs: stats.front.cpu_secs,
            workers: stats.workers.iter().map(|worker| (worker.pid, worker.usage.cpu_secs)).collect(),
        });
        CpuSample { root, by_pid: tree.cpu_secs.clone(), headway }
    }
}

/// The CPU a server used during one case.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CpuUse {
    /// Every process of the server, in seconds.
    pub server_secs: f64,
    /// headway's front process (from its stats); for a peer, the process the lab started (its
    /// master, or the whole server when it runs as one process).
    pub main_secs: f64,
    /// headway's workers' process groups (from its stats); for a peer, every other process.
    pub workers_secs: f64,
    /// The three above per request answered, in microseconds.
    pub server_us_per_request: f64,
    pub main_us_per_request: f64,
    pub workers_us_per_request: f64,
}

impl CpuUse {
    /// What the server used between `before` and `after`, over the `requests` it answered in
    /// between; `None` when it answered none. A process that started in between counts whole;
    /// one that ended in between is lost with its time (none do in a steady run).
    pub fn between(before: &CpuSample, after: &CpuSample, requests: u64) -> Option<CpuUse> {
        if requests == 0 {
            return None;
        }
        let grown = |now: &BTreeMap<u32, f64>, then: &BTreeMap<u32, f64>, pid: &u32| {
            now[pid] - then.get(pid).copied().unwrap_or(0.0)
        };
        let server_secs: f64 = after.by_pid.keys().map(|pid| grown(&after.by_pid, &before.by_pid, pid)).sum();
        let (main_secs, workers_secs) = match (&before.headway, &after.headway) {
            (Some(then), Some(now)) => (
                now.front_secs - then.front_secs,
                now.workers.keys().map(|pid| grown(&now.workers, &then.workers, pid)).sum(),
            ),
            _ => {
                let main_secs = after.by_pid.get(&after.root).copied().unwrap_or(0.0)
                    - before.by_pid.get(&before.root).copied().unwrap_or(0.0);
                (main_secs, server_secs - main_secs)
            }
        };
        let per_request = |secs: f64| secs * 1e6 / requests as f64;
        Some(CpuUse {
            server_secs,
            main_secs,
            workers_secs,
            server_us_per_request: per_request(server_secs),
            main_us_per_request: per_request(main_secs),
            workers_us_per_request: per_request(workers_secs),
        })
    }
}

/// The machine's CPU time so far, from the first line of `/proc/stat`, in clock ticks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostSample {
    total: u64,
    /// Idle and waiting for I/O.
    idle: u64,
    /// Taken by the hypervisor for another guest while this one had work.
    steal: u64,
}

impl HostSample {
    /// Now; `None` where `/proc/stat` cannot be read.
    pub fn now() -> Option<HostSample> {
        Self::parse(&std::fs::read_to_string("/proc/stat").ok()?)
    }

    fn parse(text: &str) -> Option<HostSample> {
        // "cpu  user nice system idle iowait irq softirq steal guest guest_nice": guest time is
        // already counted in user, so the total is the first eight.
        let line = text.lines().find(|line| line.starts_with("cpu "))?;
        let ticks: Vec<u64> = line.split_whitespace().skip(1).take(8).map(|n| n.parse().ok()).collect::<Option<_>>()?;
        let ticks = <[u64; 8]>::try_from(ticks).ok()?;
        let [_user, _nice, _system, idle, iowait, _irq, _softirq, steal] = ticks;
        Some(HostSample { total: ticks.iter().sum(), idle: idle + iowait, steal })
    }
}

/// How the machine's cores spent one case, as shares of their time (0 to 1).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct HostCpu {
    pub idle_share: f64,
    pub steal_share: f64,
}

impl HostCpu {
    /// Between two samples; `None` if no tick passed (or either sample is missing).
    pub fn between(before: Option<HostSample>, after: Option<HostSample>) -> Option<HostCpu> {
        let (before, after) = (before?, after?);
        let total = after.total.checked_sub(before.total).filter(|&ticks| ticks > 0)? as f64;
        let share = |now: u64, then: u64| now.saturating_sub(then) as f64 / total;
        Some(HostCpu { idle_share: share(after.idle, before.idle), steal_share: share(after.steal, before.steal) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_host_shares_come_from_the_first_line_of_proc_stat() {
        let stat = |user: u64, idle: u64, iowait: u64, steal: u64| {
            format!("cpu  {user} 0 100 {idle} {iowait} 0 10 {steal} 0 0\ncpu0 1 2 3 4 5 6 7 8 9 10\nintr 1\n")
        };
        let before = HostSample::parse(&stat(1000, 5000, 10, 40));
        let after = HostSample::parse(&stat(1600, 5180, 20, 100));
        // 1000 ticks passed: 600 user, 190 idle or waiting, 60 stolen, the rest unchanged.
        let (user, idle, steal) = (600.0, 190.0, 60.0);
        let host = HostCpu::between(before, after).expect("ticks passed");
        assert!((host.idle_share - idle / (user + idle + steal)).abs() < 1e-9, "{host:?}");
        assert!((host.steal_share - steal / (user + idle + steal)).abs() < 1e-9, "{host:?}");
        assert_eq!(HostCpu::between(before, before), None, "no tick, no share");
        assert_eq!(HostSample::parse("intr 1\n"), None);
        assert_eq!(HostSample::parse("cpu  1 2 3\n"), None, "an older kernel's shorter line");
    }

    fn near(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    fn tree(cpu: &[(u32, f64)]) -> Tree {
        Tree { cpu_secs: cpu.iter().copied().collect(), ..Tree::default() }
    }

    #[test]
    fn a_peer_splits_its_master_from_its_workers() {
        // gunicorn: the master (100) and two workers; 20 000 requests in between.
        let before = CpuSample::of(100, &tree(&[(100, 1.0), (101, 5.0), (102, 6.0)]), None);
        let after = CpuSample::of(100, &tree(&[(100, 1.1), (101, 6.5), (102, 7.4)]), None);
        let cpu = CpuUse::between(&before, &after, 20_000).expect("requests were answered");
        assert!(near(cpu.server_secs, 3.0), "{cpu:?}");
        assert!(near(cpu.main_secs, 0.1) && near(cpu.workers_secs, 2.9), "{cpu:?}");
        // 3 s over 20 000 requests: 150 us each, 5 of them in the master.
        assert!(near(cpu.server_us_per_request, 150.0), "{cpu:?}");
        assert!(near(cpu.main_us_per_request, 5.0) && near(cpu.workers_us_per_request, 145.0), "{cpu:?}");
    }

    #[test]
    fn a_process_that_started_during_the_case_counts_whole() {
        let before = CpuSample::of(7, &tree(&[(7, 2.0)]), None);
        let after = CpuSample::of(7, &tree(&[(7, 2.5), (8, 0.5)]), None);
        let cpu = CpuUse::between(&before, &after, 1000).expect("answered");
        assert!(near(cpu.server_us_per_request, 1000.0) && near(cpu.workers_us_per_request, 500.0), "{cpu:?}");
    }

    #[test]
    fn no_answer_no_figure() {
        let sample = CpuSample::of(7, &tree(&[(7, 2.0)]), None);
        assert_eq!(CpuUse::between(&sample, &sample, 0), None);
    }

    #[test]
    fn headway_splits_by_its_stats() {
        let sample = |cpu: &[(u32, f64)], front_secs: f64, workers: &[(u32, f64)]| CpuSample {
            root: 10,
            by_pid: cpu.iter().copied().collect(),
            headway: Some(HeadwayCpu { front_secs, workers: workers.iter().copied().collect() }),
        };
        // The front (10) and two workers (11, 12); worker 12 was replaced by 13 during the case:
        // the new one counts whole, the old one's last moments are lost.
        let before = sample(&[(10, 1.0), (11, 2.0), (12, 2.0)], 1.0, &[(11, 2.0), (12, 2.0)]);
        let after = sample(&[(10, 1.4), (11, 2.5), (13, 0.3)], 1.4, &[(11, 2.5), (13, 0.3)]);
        let cpu = CpuUse::between(&before, &after, 12_000).expect("answered");
        assert!(near(cpu.main_secs, 0.4) && near(cpu.workers_secs, 0.8), "{cpu:?}");
        assert!(near(cpu.server_secs, 1.2), "{cpu:?}");
        assert!(near(cpu.server_us_per_request, 100.0), "{cpu:?}");
    }
}
