//! A worker: one process serving the app, and what the front knows about it.
//!
//! Any HTTP/1.1 server that can listen on a unix socket can be a worker: any command given with
//! `--cmd` (Puma in single mode, a Node program) is reached that way, and the front relies on
//! nothing more. The bundled worker is reached through the shared-memory hop instead
//! ([`Transport`]). [`Worker`] is the state the supervisor, the worker's slots, and the stats
//! share; [`Launch`] says how to start the process, [`boot`] starts it and waits until it
//! serves.

use std::future::Future;
use std::io;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use headway_hop::front::FrontEnd;

use clap::ValueEnum;
use serde::Serialize;
use tokio::net::UnixStream;
use tokio::process::{Child, Command};
use tokio::sync::{watch, Notify};

use crate::recycle::{Lifetime, Recycles};
use crate::slot::HopLink;
use crate::tally::Tally;
use crate::zygote::Forked;

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
    /// The bundled Python worker, run by `python`.
    Python { python: PathBuf, app: PythonApp },
    /// Any command; `{socket}` in it is replaced by the socket path.
    Command(String),
}

/// What the bundled worker serves and how, the same whether it is started on its own or forked
/// from a preloaded parent (`zygote`).
#[derive(Debug, Clone)]
pub struct PythonApp {
    /// `module:callable`; `None`: the demo app.
    pub spec: Option<String>,
    pub interface: Interface,
    /// `--hooks`: a module whose `post_fork(worker)` and `on_exit(worker)` the workers call.
    pub hooks: Option<String>,
    /// `--root-path`: the path prefix the app is mounted under.
    pub root_path: Option<String>,
}

impl PythonApp {
    /// The end of the worker's command line: these options, then the app.
    pub fn args(&self) -> Vec<String> {
        let mut args = vec!["--interface".to_owned(), self.interface.name()];
        if let Some(hooks) = &self.hooks {
            args.extend(["--hooks".to_owned(), hooks.clone()]);
        }
        if let Some(root_path) = &self.root_path {
            args.extend(["--root-path".to_owned(), root_path.clone()]);
        }
        args.extend(self.spec.clone());
        args
    }
}

/// How the bundled worker calls the app (`--interface`).
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Interface {
    /// ASGI 3 if the app is a coroutine function or has an async `__call__`, else WSGI: decided by
    /// the worker once it has imported the app.
    Auto,
    /// PEP 3333.
    Wsgi,
    /// ASGI 3: HTTP, WebSocket (the front hands the workers their handshakes) and lifespan.
    Asgi,
}

impl Interface {
    /// As the flag spells it, for the worker's command line.
    pub fn name(self) -> String {
        self.to_possible_value().expect("no variant is skipped").get_name().to_owned()
    }
}

/// Whether the workers take WebSocket handshakes (else a handshake is a plain request): from the
/// launch at first, then as each bundled worker says when it is ready, since with `--interface
/// auto` only the worker knows whether it imported an ASGI app. The supervisor hears it; the
/// front routes handshakes by it.
#[derive(Debug, Clone)]
pub struct TakesWebSockets(Arc<AtomicBool>);

impl TakesWebSockets {
    pub fn new(takes: bool) -> TakesWebSockets {
        TakesWebSockets(Arc::new(AtomicBool::new(takes)))
    }

    pub fn get(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }

    pub fn set(&self, takes: bool) {
        self.0.store(takes, Ordering::Relaxed);
    }
}

/// How the front's slots reach a worker.
pub enum Transport {
    /// HTTP/1.1 over the worker's unix socket, a keep-alive connection per slot.
    Http,
    /// The shared-memory hop. Holds the link to the current process's region, set before the
    /// process is announced ready.
    Hop(Mutex<Option<Arc<HopLink>>>),
}

/// The state of one worker, shared by its supervisor task, its slots and the stats.
pub struct Worker {
    /// 1-based, stable across restarts.
    pub index: usize,
    /// The unix socket an HTTP worker listens on.
    pub socket: PathBuf,
    pub transport: Transport,
    /// Slots of this worker that are running a request now. The queue reads it to pick the
    /// least busy worker; a drain waits for it to reach zero.
    pub busy: Arc<Tally>,
    pub served: AtomicU64,
    /// Total time its slots spent running requests, in microseconds. Against the worker's CPU
    /// time it tells how CPU-bound the app is (`headway lab recommend` uses it).
    pub busy_micros: AtomicU64,
    /// Replacements after a crash or a timeout.
    pub restarts: AtomicU64,
    /// Replacements of every kind, by cause.
    pub recycles: Recycles,
    /// The current process: what it served, and whether it is due for recycling.
    pub lifetime: Lifetime,
    /// WebSockets open to this worker, each on a connection of its own (never on a slot).
    pub websockets: Arc<Tally>,
    /// Bumped to have every open WebSocket of this worker closed.
    websockets_closing: watch::Sender<u64>,
    pid: AtomicU32,
    phase: watch::Sender<Phase>,
    /// A slot saw a request run past the request timeout.
    hung: Notify,
}

impl Worker {
    pub fn new(index: usize, socket: PathBuf, transport: Transport) -> Self {
        Worker {
            index,
            socket,
            transport,
            busy: Arc::new(Tally::default()),
            served: AtomicU64::new(0),
            busy_micros: AtomicU64::new(0),
            restarts: AtomicU64::new(0),
            recycles: Recycles::default(),
            lifetime: Lifetime::default(),
            websockets: Arc::new(Tally::default()),
            websockets_closing: watch::Sender::new(0),
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

    /// The process has exited: exchanges still waiting on it over the hop fail (a socket
    /// connection sees its end by itself).
    pub fn process_gone(&self) {
        if let Transport::Hop(link) = &self.transport {
            if let Some(link) = link.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).take() {
                link.mark_gone();
            }
        }
    }

    /// The pid of the current process, 0 when there is none.
    pub fn pid(&self) -> u32 {
        self.pid.load(Ordering::Relaxed)
    }

    pub fn set_pid(&self, pid: u32) {
        self.pid.store(pid, Ordering::Relaxed);
    }

    /// Called by a slot whose request outlived the request timeout, or that the worker broke
    /// the hop's rules: the process can no longer be trusted to serve and will be replaced.
    pub fn report_hung(&self) {
        self.hung.notify_one();
    }

    pub async fn hung(&self) {
        self.hung.notified().await
    }

    /// What an open WebSocket watches to learn that it must close.
    pub fn watch_websockets_closing(&self) -> watch::Receiver<u64> {
        self.websockets_closing.subscribe()
    }

    /// Has every open WebSocket of this worker closed (a close frame to both sides, see
    /// `front::websocket`); `websockets` reaches zero once they are gone.
    pub fn close_websockets(&self) {
        self.websockets_closing.send_modify(|closings| *closings += 1);
    }
}

impl Launch {
    /// How the front reaches workers started this way.
    pub fn transport(&self) -> Transport {
        match self {
            Launch::Python { .. } => Transport::Hop(Mutex::new(None)),
            Launch::Command(_) => Transport::Http,
        }
    }

    /// Whether workers started this way take WebSocket handshakes, each on a connection of its
    /// own to their socket (see `slot::upgrade`), as far as the launch tells: any `--cmd` server
    /// may; the bundled worker does when told to run ASGI. With `auto`, the worker says so
    /// itself once it has imported the app ([`TakesWebSockets`]).
    pub fn takes_websockets(&self) -> bool {
        match self {
            Launch::Python { app, .. } => app.interface == Interface::Asgi,
            Launch::Command(_) => true,
        }
    }

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
                command.args(app.args());
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
    Exited(String),
    #[error("did not import the app ({0}; the traceback is above)")]
    NotImported(String),
    #[error("did not listen on its socket within {0:?}")]
    Timeout(Duration),
}

/// A running worker process. It leads its own process group, so the group id is its pid.
pub struct Process {
    pub pid: u32,
    exit: ExitWatch,
}

/// How the end of a worker process is seen.
enum ExitWatch {
    /// A child of the front: waited for.
    Child(Child),
    /// Forked by the preloaded parent (`--preload`): watched through a pidfd.
    Forked(Forked),
}

impl Process {
    /// A process the front started itself.
    pub fn spawned(child: Child) -> Process {
        Process { pid: child.id().unwrap_or(0), exit: ExitWatch::Child(child) }
    }

    /// A process the preloaded parent forked.
    pub fn forked(forked: Forked) -> Process {
        Process { pid: forked.pid, exit: ExitWatch::Forked(forked) }
    }

    /// Resolves once the process has exited, saying how as far as the front can know.
    pub async fn exited(&mut self) -> String {
        match &mut self.exit {
            ExitWatch::Child(child) => {
                child.wait().await.map_or_else(|err| err.to_string(), |status| status.to_string())
            }
            ExitWatch::Forked(forked) => forked.exited().await,
        }
    }

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
        let _ = tokio::time::timeout(grace, self.exited()).await;
        while self.group_alive() && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        self.signal(libc::SIGKILL);
        self.exited().await;
    }

    /// Whether any process of the group is left (a zombie counts until its parent reaps it).
    fn group_alive(&self) -> bool {
        // SAFETY: signal 0 only checks that the group exists and may be signalled.
        unsafe { libc::kill(-(self.pid as libc::pid_t), 0) == 0 }
    }
}

/// Starts a worker process and waits until `ready` says it serves.
pub async fn boot(
    command: &mut Command,
    ready: impl Future<Output = io::Result<()>>,
    timeout: Duration,
) -> Result<Process, BootError> {
    let child = command.spawn().map_err(BootError::Spawn)?;
    until_ready(Process::spawned(child), ready, timeout).await
}

/// Waits until `ready` says the started `process` serves; stops it if it does not in time.
pub async fn until_ready(
    mut process: Process,
    ready: impl Future<Output = io::Result<()>>,
    timeout: Duration,
) -> Result<Process, BootError> {
    tokio::select! {
        ready = ready => match ready {
            Ok(()) => Ok(process),
            Err(err) => {
                process.terminate(Duration::ZERO).await;
                Err(BootError::Spawn(err))
            }
        },
        status = process.exited() => {
            process.signal(libc::SIGKILL);
            Err(BootError::Exited(status))
        }
        () = tokio::time::sleep(timeout) => {
            process.terminate(Duration::ZERO).await;
            Err(BootError::Timeout(timeout))
        }
    }
}

/// Resolves once `socket` accepts connections. A server gives no sign that it listens, so this
/// tries to connect, every few milliseconds.
pub async fn until_listening(socket: &Path) -> io::Result<()> {
    while UnixStream::connect(socket).await.is_err() {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(())
}

/// Makes the process started by `command` inherit the region and bells of `end`, and tells it
/// their descriptors in `$HEADWAY_HOP`.
pub fn hand_over(command: &mut Command, end: &FrontEnd) {
    let fds = end.descriptors().map(|fd| fd.as_raw_fd());
    command.env(headway_hop::worker::ENV, fds.map(|fd| fd.to_string()).join(","));
    // SAFETY: fcntl is async-signal-safe; it only clears close-on-exec on descriptors this
    // process owns, in the child between fork and exec.
    unsafe {
        command.pre_exec(move || {
            for fd in fds {
                if libc::fcntl(fd, libc::F_SETFD, 0) != 0 {
                    return Err(io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
}
