//! The whole result of a `headway lab run` as one document: the machine, the servers and their
//! versions, the skipped peers, and every scenario's rows and tables. It is what `--json` prints,
//! what `--report DIR` writes as results.json, and what the HTML report is drawn from.

use serde::Serialize;

use crate::scenarios::{ScenarioResult, Size};
use crate::servers::{Peer, ServerKind, Skipped};

#[derive(Debug, Clone, Serialize)]
pub struct LabReport {
    pub headway_version: String,
    pub machine: Machine,
    /// Whether each server ran in a session of its own (`--own-sessions`).
    pub own_sessions: bool,
    pub size: Size,
    pub servers: Vec<ServerInfo>,
    pub skipped: Vec<Skipped>,
    pub scenarios: Vec<ScenarioResult>,
    pub elapsed_secs: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct ServerInfo {
    pub name: String,
    pub version: String,
    /// Where the lab found it.
    pub found: String,
    /// How it is run for W x T.
    pub configuration: String,
}

impl ServerInfo {
    pub fn of(peer: &Peer) -> ServerInfo {
        ServerInfo {
            name: peer.kind.name().into(),
            version: peer.version.clone(),
            found: peer.found.clone(),
            configuration: peer.kind.configuration().into(),
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Machine {
    pub cores: usize,
    pub cpu: String,
    pub memory_bytes: u64,
    /// The 1-minute load average when the run started: how busy the (shared) machine was.
    pub load_average: f64,
    pub kernel: String,
    /// Whether the kernel's autogroup is on (a session is then one scheduling group); `None`
    /// where the kernel has none.
    pub autogroup: Option<bool>,
}

impl Machine {
    pub fn here(cores: usize) -> Machine {
        let read = |path: &str| std::fs::read_to_string(path).unwrap_or_default();
        let cpuinfo = read("/proc/cpuinfo");
        let cpu = cpuinfo
            .lines()
            .find_map(|line| line.strip_prefix("model name")?.split_once(':').map(|(_, name)| name.trim().to_owned()))
            .unwrap_or_default();
        Machine {
            cores,
            cpu,
            memory_bytes: meminfo_bytes("MemTotal").unwrap_or(0),
            load_average: crate::measure::load_average(),
            kernel: read("/proc/sys/kernel/osrelease").trim().to_owned(),
            autogroup: match read("/proc/sys/kernel/sched_autogroup_enabled").trim() {
                "0" => Some(false),
                "1" => Some(true),
                _ => None,
            },
        }
    }

    /// One line for the top of a run's output.
    pub fn describe(&self) -> String {
        format!(
            "machine: {} cores ({}), {:.1} GiB, Linux {}, autogroup {}, load average {:.2} at the start",
            self.cores,
            self.cpu,
            self.memory_bytes as f64 / (1u64 << 30) as f64,
            self.kernel,
            match self.autogroup {
                Some(true) => "on",
                Some(false) => "off",
                None => "absent",
            },
            self.load_average
        )
    }
}

/// How the servers' processes are scheduled against the load generator, for the top of a run.
pub fn describe_sessions(own_sessions: bool) -> &'static str {
    if own_sessions {
        "sessions: each server in its own (with autogroup on, one scheduling group against the lab's)"
    } else {
        "sessions: the servers share the lab's (each thread scheduled on its own)"
    }
}

/// A field of /proc/meminfo, in bytes.
pub fn meminfo_bytes(field: &str) -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|line| line.split(':').next() == Some(field))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// The servers block printed at the start of a run.
pub fn describe_servers(servers: &[ServerInfo]) -> String {
    let width = ServerKind::all().map(|k| k.name().len()).max().unwrap_or(0);
    servers.iter().map(|s| format!("  {:<width$}  {}  ({})\n", s.name, s.version, s.found)).collect()
}
