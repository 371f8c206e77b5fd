//! A started server, for all of them alike: when it is ready, and how it is stopped. A
//! [`RunningServer`] stops its whole process tree when it is dropped, also on an error, and is
//! registered so that Ctrl-C stops it too ([`stop_all_live`]).

use std::collections::BTreeSet;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::Child;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use headway_common::bind::Bind;
use headway_common::client;
use headway_common::stats::{Snapshot, WorkerState};

use super::config::ServerConfig;
use super::peers::ServerKind;
use crate::process_tree::{signal_tree, tree_of, MemorySampler, Tree};

/// Longest a server may take to be ready.
const BOOT_TIMEOUT: Duration = Duration::from_secs(60);
/// Longest the lab waits for one answer to its own requests (readiness, stats): a server that
/// takes longer is not ready, or not well.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(2);
/// Longest a server may take to exit after SIGTERM before it gets SIGKILL.
const STOP_TIMEOUT: Duration = Duration::from_secs(5);
const POLL_EVERY: Duration = Duration::from_millis(50);

/// Roots of the servers running now, for [`stop_all_live`].
static LIVE: Mutex<BTreeSet<u32>> = Mutex::new(BTreeSet::new());

/// Kills every server the lab started that is still running (on Ctrl-C).
pub fn stop_all_live() {
    let roots: Vec<u32> = LIVE.lock().map(|live| live.iter().copied().collect()).unwrap_or_default();
    for root in roots {
        signal_tree(&tree_of(root), libc::SIGKILL);
    }
}

/// Has [`stop_all_live`] stop `pid` too, until [`forget_live`]: a server as it starts, or another
/// process the lab started itself (HAProxy).
pub fn watch_live(pid: u32) {
    if let Ok(mut live) = LIVE.lock() {
        live.insert(pid);
    }
}

pub fn forget_live(pid: u32) {
    if let Ok(mut live) = LIVE.lock() {
        live.remove(&pid);
    }
}

/// A server the lab started. Dropping it stops it.
pub struct RunningServer {
    pub kind: ServerKind,
    pub port: u16,
    pub control_port: Option<u16>,
    pub config: ServerConfig,
    /// The app it serves, as the tables name it.
    pub app: String,
    pub(super) child: Child,
    pub(super) log: PathBuf,
    pub memory: MemorySampler,
}

impl RunningServer {
    pub fn name(&self) -> &'static str {
        self.kind.name()
    }

    /// Whether headway's lanes were on; `None` for a peer, which has none.
    pub fn lanes(&self) -> Option<bool> {
        self.kind.has_control().then_some(self.config.lanes)
    }

    /// The process the lab started: the root of the server's process tree.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    pub(super) async fn wait_ready(&mut self) -> anyhow::Result<()> {
        let deadline = Instant::now() + BOOT_TIMEOUT;
        loop {
            if let Some(status) = self.child.try_wait()? {
                bail!("{} exited with {status} while starting; its last output:\n{}", self.name(), self.log_tail());
            }
            let not_yet = match self.readiness().await {
                Ok(true) => return Ok(()),
                Ok(false) => "not every worker is ready".to_owned(),
                Err(err) => format!("{err:#}"),
            };
            if Instant::now() > deadline {
                bail!(
                    "{} was not ready within {BOOT_TIMEOUT:?} ({not_yet}); its last output:\n{}",
                    self.name(),
                    self.log_tail()
                );
            }
            tokio::time::sleep(POLL_EVERY).await;
        }
    }

    /// Whether the server is ready, by its own account, not by any page of the app (an app under
    /// `recommend` may have none the lab knows): headway when its control address shows every
    /// worker ready; any other server when its port answers HTTP at all, whatever the status.
    /// An error is a server that does not answer (yet).
    async fn readiness(&self) -> anyhow::Result<bool> {
        match self.stats().await? {
            Some(stats) => {
                let ready = stats.workers.iter().filter(|worker| worker.state == WorkerState::Ready).count();
                Ok(ready >= self.config.workers)
            }
            None => {
                let public = local(self.port);
                in_time(&public, "/", client::get(&public, "/")).await.map(|_| true)
            }
        }
    }

    /// headway's stats, from its control address; `None` for a peer, which has none.
    pub async fn stats(&self) -> anyhow::Result<Option<Snapshot>> {
        let Some(port) = self.control_port else { return Ok(None) };
        let control = local(port);
        let body = in_time(&control, "/stats", client::get_stats(&control)).await?;
        let stats = serde_json::from_slice(&body).with_context(|| format!("{control}/stats is not headway's stats"))?;
        Ok(Some(stats))
    }

    /// The last lines of the server's output.
    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }

    /// Stops the server: SIGTERM to its whole tree, SIGKILL to whatever is left after a few
    /// seconds. Returns how long that took.
    pub fn stop(mut self) -> Duration {
        self.stop_now()
    }

    /// Stops the server as its operator would: SIGTERM to the main process alone, which
    /// shuts down in its own order (headway: readiness off, serve on for its shutdown delay,
    /// drain, stop its workers); whatever is left after `limit` is killed.
    pub async fn stop_gracefully(mut self, limit: Duration) {
        // SAFETY: kill(2) with a pid this guard owns and has not reaped yet.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM) };
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline && matches!(self.child.try_wait(), Ok(None)) {
            tokio::time::sleep(POLL_EVERY).await;
        }
        self.stop_now();
    }

    fn stop_now(&mut self) -> Duration {
        let started = Instant::now();
        let root = self.child.id();
        let mut seen = tree_of(root);
        signal_tree(&seen, libc::SIGTERM);
        let deadline = started + STOP_TIMEOUT;
        while Instant::now() < deadline {
            let now = tree_of(root);
            if matches!(self.child.try_wait(), Ok(Some(_))) && all_gone(&seen) {
                break;
            }
            seen.pids.extend(now.pids);
            seen.groups.extend(now.groups);
            std::thread::sleep(POLL_EVERY);
        }
        signal_tree(&seen, libc::SIGKILL);
        let _ = self.child.wait();
        if let Ok(mut live) = LIVE.lock() {
            live.remove(&root);
        }
        started.elapsed()
    }
}

fn all_gone(tree: &Tree) -> bool {
    tree.pids.iter().all(|pid| !Path::new(&format!("/proc/{pid}")).exists())
}

impl Drop for RunningServer {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            self.stop_now();
        }
    }
}

/// 127.0.0.1:`port`, where the lab runs every server.
fn local(port: u16) -> Bind {
    Bind::Tcp(SocketAddr::from((Ipv4Addr::LOCALHOST, port)))
}

/// The answer to `request` (a GET of `path` at `bind`), if it comes within [`ANSWER_TIMEOUT`].
async fn in_time<T>(
    bind: &Bind,
    path: &str,
    request: impl std::future::Future<Output = anyhow::Result<T>>,
) -> anyhow::Result<T> {
    tokio::time::timeout(ANSWER_TIMEOUT, request)
        .await
        .with_context(|| format!("no answer from {bind}{path} within {ANSWER_TIMEOUT:?}"))?
}
