//! A worker: one process serving HTTP/1.1 on a private unix socket, and what the front knows
//! about it.
//!
//! Any HTTP/1.1 server that can listen on a unix socket can be a worker: the bundled Python
//! worker (WSGI, one thread per slot), or any command given with `--cmd` (Puma in single mode,
//! a Node program). The front never relies on more than that. [`Worker`] is the state the
//! supervisor, the worker's slots, and the stats share; [`Launch`] says how to start the
//! process.

use std::io;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use tokio::net::UnixStream;
use tokio::process::{Child, Command};
use tokio::sync::{watch, Notify};

use crate::tally::Tally;

/// Where a worker is in its life. Slots connect only while it is `Ready`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "state")]
pub enum Phase {
    /// Being started, or restarted after an exit.
    Starting,
    /// Listening; `generation` changes with every new process, so a slot can tell its
    /// connection belongs to a process that is gone.
    Ready { generation: u64 },
    /// Taking no new requests until its running ones finish, then to be replaced.
    Draining,
    /// Shut down for good.
    Stopped,
}

/// How worker processes are started.
#[derive(Debug, Clone)]
pub enum Launch {
    /// The bundled Python worker running a WSGI app (`None`: the demo app).
    Python { python: PathBuf, app: Option<String> },
    /// Any command; `{socket}` in it is replaced by the socket path.
    Command(String),
}

/// The state of one worker, shared by its supervisor task, its slots and the stats.
pub struct Worker {
    /// 1-based, stable across restarts.
    pub index: usize,
    pub socket: PathBuf,
    /// Slots of this worker that are running a request now. The queue reads it to pick the
    /// least busy worker; a drain waits for it to reach zero.
    pub busy: Arc<Tally>,
    pub served: AtomicU64,
    /// Total time its slots spent running requests, in microseconds. Against the worker's CPU
    /// time it tells how CPU-bound the app is (`headway lab recommend` uses it).
    pub busy_micros: AtomicU64,
    pub restarts: AtomicU64,
    pid: AtomicU32,
    phase: watch::Sender<Phase>,
    /// A slot saw a request run past the request timeout.
    hung: Notify,
}

impl Worker {
    pub fn new(index: usize, socket: PathBuf) -> Self {
        Worker {
            index,
            socket,
            busy: Arc::new(Tally::default()),
            served: AtomicU64::new(0),
            busy_micros: AtomicU64::new(0),
            restarts: AtomicU64::new(0),
            pid: AtomicU32::new(0),
            phase: watch::Sender::new(Phase::Starting),
            hung: Notify::new(),
        }
    }

    pub fn phase(&self) -> Phase {
        *self.phase.borrow()
    }

    pub fn set_phase(&self, phase: Phase) {
        self.phase.send_replace(phase);
    }

    pub fn watch_phase(&self) -> watch::Receiver<Phase> {
        self.phase.subscribe()
    }

    /// The pid of the current process, 0 when there is none.
    pub fn pid(&self) -> u32 {
        self.pid.load(Ordering::Relaxed)
    }

    pub fn set_pid(&self, pid: u32) {
        self.pid.store(pid, Ordering::Relaxed);
    }

    /// Called by a slot whose request outlived the request timeout: the process is presumed
    /// stuck and will be replaced.
    pub fn report_hung(&self) {
        self.hung.notify_one();
    }

    pub async fn hung(&self) {
        self.hung.notified().await
    }
}

impl Launch {
    /// The command that starts worker `index` on `socket`, in a process group of its own so
    /// that stopping it also stops whatever it forked.
    pub fn command(&self, socket: &Path, index: usize, threads: usize, workers: usize) -> Command {
        let mut command = match self {
            Launch::Python { python, app } => {
                let mut command = Command::new(python);
                command.args(["-m", "headway.worker", "--socket"]).arg(socket).args([
                    "--threads",
                    &threads.to_string(),
                    "--workers",
                    &workers.to_string(),
                ]);
                command.args(app);
                command
            }
            Launch::Command(line) => {
                let mut command = Command::new("/bin/sh");
                command.arg("-c").arg(line.replace("{socket}", &socket.to_string_lossy()));
                command
            }
        };
        command
            .env("HEADWAY_SOCKET", socket)
            .env("HEADWAY_WORKER", index.to_string())
            .env("HEADWAY_THREADS", threads.to_string())
            .stdin(Stdio::null())
            .process_group(0)
            .kill_on_drop(true);
        // SAFETY: prctl is async-signal-safe and touches only the child's own state.
        unsafe {
            command.pre_exec(|| {
                // If the front dies without stopping its workers, the kernel stops them: no
                // orphaned app processes holding ports, memory or database connections.
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(io::Error::last_os_error());
                }
                Ok(())
            });
        }
        command
    }
}

/// Why a worker process could not be brought up.
#[derive(Debug, thiserror::Error)]
pub enum BootError {
    #[error("could not start: {0}")]
    Spawn(io::Error),
    #[error("exited with {0} before listening on its socket (its output is above)")]
    Exited(std::process::ExitStatus),
    #[error("did not listen on its socket within {0:?}")]
    Timeout(Duration),
}

/// A running worker process. It leads its own process group, so the group id is its pid.
pub struct Process {
    pub child: Child,
    pub pid: u32,
}

impl Process {
    /// Sends `signal` to the whole process group, reaching whatever the worker forked.
    pub fn signal(&self, signal: libc::c_int) {
        // SAFETY: kill(2) with a negative pid signals the process group we created.
        unsafe {
            libc::kill(-(self.pid as libc::pid_t), signal);
        }
    }

    /// Stops the process: SIGTERM to its group, SIGKILL to whatever of the group is still there
    /// after `grace`. The whole group is waited for, not just the direct child: a `--cmd` worker
    /// is `sh -c COMMAND`, and the shell dies at once on SIGTERM while the server it started
    /// (Puma, say) is still finishing its requests and shutting down.
    pub async fn terminate(&mut self, grace: Duration) {
        self.signal(libc::SIGTERM);
        let deadline = Instant::now() + grace;
        let _ = tokio::time::timeout(grace, self.child.wait()).await;
        while self.group_alive() && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        self.signal(libc::SIGKILL);
        let _ = self.child.wait().await;
    }

    /// Whether any process of the group is left (a zombie counts until its parent reaps it).
    fn group_alive(&self) -> bool {
        // SAFETY: signal 0 only checks that the group exists and may be signalled.
        unsafe { libc::kill(-(self.pid as libc::pid_t), 0) == 0 }
    }
}

/// Starts a worker process and waits until its socket accepts connections.
pub async fn boot(command: &mut Command, socket: &Path, timeout: Duration) -> Result<Process, BootError> {
    // A socket file left by a previous process would make some servers refuse to bind.
    let _ = std::fs::remove_file(socket);
    let child = command.spawn().map_err(BootError::Spawn)?;
    let pid = child.id().unwrap_or(0);
    let mut process = Process { child, pid };
    let started = Instant::now();
    loop {
        if UnixStream::connect(socket).await.is_ok() {
            return Ok(process);
        }
        if let Ok(Some(status)) = process.child.try_wait() {
            process.signal(libc::SIGKILL);
            return Err(BootError::Exited(status));
        }
        if started.elapsed() > timeout {
            process.terminate(Duration::ZERO).await;
            return Err(BootError::Timeout(timeout));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
