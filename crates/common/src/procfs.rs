//! Processes as Linux shows them in `/proc`: the one reader of `/proc/PID/stat` in headway.
//!
//! The server reports the memory and CPU time of its front and of each worker's process group;
//! the lab follows a server's process tree to sum its memory and to stop all of it. Both read
//! the same few fields, so they read them here.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

/// The fields of `/proc/PID/stat` headway uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcStat {
    pub ppid: u32,
    pub pgrp: u32,
    /// User plus system time, in clock ticks.
    cpu_ticks: u64,
    rss_pages: u64,
}

impl ProcStat {
    /// The process `pid` now; `None` when it has gone (or its stat is not what Linux writes).
    pub fn read(pid: u32) -> Option<ProcStat> {
        Self::parse(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
    }

    fn parse(text: &str) -> Option<ProcStat> {
        // The command name (field 2) is in parentheses and may hold spaces and parentheses:
        // the fields after it are counted from the last ')'.
        let fields: Vec<&str> = text.get(text.rfind(')')? + 2..)?.split(' ').collect();
        let field = |n: usize| fields.get(n - 3)?.parse::<u64>().ok();
        Some(ProcStat {
            ppid: field(4)? as u32,
            pgrp: field(5)? as u32,
            cpu_ticks: field(14)? + field(15)?,
            rss_pages: field(24)?,
        })
    }

    pub fn usage(&self) -> ProcessUsage {
        // SAFETY: sysconf has no preconditions.
        let (ticks, page) = unsafe { (libc::sysconf(libc::_SC_CLK_TCK), libc::sysconf(libc::_SC_PAGESIZE)) };
        ProcessUsage {
            rss_bytes: self.rss_pages * page.max(1) as u64,
            cpu_secs: self.cpu_ticks as f64 / ticks.max(1) as f64,
        }
    }
}

/// Every process now, by pid. A process that exits while the list is read is left out.
pub fn processes() -> HashMap<u32, ProcStat> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return HashMap::new() };
    entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| Some((pid, ProcStat::read(pid)?)))
        .collect()
}

/// Memory and CPU time of a process, or of every process in a group (a `--cmd` worker may be a
/// shell and the server it started). Also a field of the `/stats` JSON, hence serde.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProcessUsage {
    pub rss_bytes: u64,
    pub cpu_secs: f64,
}

impl ProcessUsage {
    /// Of the process `pid`; zero when it has gone.
    pub fn of_process(pid: u32) -> Self {
        ProcStat::read(pid).map(|stat| stat.usage()).unwrap_or_default()
    }

    /// Summed over the processes of the group `pgid`.
    pub fn of_group(pgid: u32) -> Self {
        group_usage(&processes(), pgid)
    }
}

/// Summed over the processes of the group `pgid` among `processes` (one read of `/proc` serves
/// every group a caller looks at).
pub fn group_usage(processes: &HashMap<u32, ProcStat>, pgid: u32) -> ProcessUsage {
    processes.values().filter(|stat| stat.pgrp == pgid).map(ProcStat::usage).fold(
        ProcessUsage::default(),
        |total, usage| ProcessUsage {
            rss_bytes: total.rss_bytes + usage.rss_bytes,
            cpu_secs: total.cpu_secs + usage.cpu_secs,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_counted_from_the_last_parenthesis() {
        let text = "4242 (a (b) c) S 17 4242 4242 0 -1 4194560 500 0 0 0 30 12 0 0 20 0 1 0 100 \
                    9000000 2048 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n";
        let stat = ProcStat::parse(text).expect("a well-formed stat");
        assert_eq!((stat.ppid, stat.pgrp, stat.cpu_ticks, stat.rss_pages), (17, 4242, 42, 2048));
        assert_eq!(ProcStat::parse("4242 (truncated"), None);
        assert_eq!(ProcStat::parse("4242 (short) S 1 2"), None);
    }

    #[test]
    fn reads_own_process() {
        let own = std::process::id();
        let stat = ProcStat::read(own).expect("this process exists");
        assert!(ProcessUsage::of_process(own).rss_bytes > 1 << 20, "a test binary uses more than 1 MiB");
        assert!(ProcessUsage::of_group(stat.pgrp).rss_bytes > 1 << 20, "the test's group holds the test");
        assert_eq!(processes().get(&own).map(|stat| stat.pgrp), Some(stat.pgrp));
    }
}
