//! A worker's running process: starting it and waiting until it serves, signalling its process
//! group, and seeing it exit, whether the front started it or the preloaded parent forked it.

use std::future::Future;
use std::io;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::time::{Duration, Instant};

use headway_hop::front::FrontEnd;
use tokio::net::UnixStream;
use tokio::process::{Child, Command};

use super::launch::BootError;
use super::output::Output;
use super::zygote::Forked;

/// A running worker process. It leads its own process group, so the group id is its pid.
pub struct Process {
    pub pid: u32,
    exit: ExitWatch,
}

/// How the end of a worker process is seen.
enum ExitWatch {
    /// A child of the front: waited for, its output carried into the log.
    Child(Child, Output),
    /// Forked by the preloaded parent (`--preload`): watched through a pidfd.
    Forked(Forked),
}

impl Process {
    /// A process the front started itself, its output carried into the log.
    fn spawned(child: Child, output: Output) -> Process {
        Process { pid: child.id().unwrap_or(0), exit: ExitWatch::Child(child, output) }
    }

    /// A process the preloaded parent forked.
    pub fn forked(forked: Forked) -> Process {
        Process { pid: forked.pid, exit: ExitWatch::Forked(forked) }
    }

    /// Resolves once the process has exited, saying how as far as the front can know.
    pub async fn exited(&mut self) -> String {
        match &mut self.exit {
            ExitWatch::Child(child, output) => {
                let status = child.wait().await.map_or_else(|err| err.to_string(), |status| status.to_string());
                output.finished().await;
                status
            }
            ExitWatch::Forked(forked) => forked.exited().await,
        }
    }

    /// Where a reader of the log finds what the process said ([`Output::said`]); a forked
    /// worker's lines come through its preloaded parent's output.
    pub fn said(&self) -> String {
        match &self.exit {
            ExitWatch::Child(_, output) => output.said(),
            ExitWatch::Forked(_) => "its output, and the preloaded parent's, is logged at --log-level info".to_owned(),
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

/// Starts worker `index`'s process and waits until `ready` says it serves.
pub async fn boot(
    command: &mut Command,
    index: usize,
    ready: impl Future<Output = io::Result<()>>,
    timeout: Duration,
) -> Result<Process, BootError> {
    let (child, output) =
        Output::spawn(command, |pid| tracing::info_span!("worker", n = index, pid)).map_err(BootError::Spawn)?;
    until_ready(Process::spawned(child, output), ready, timeout).await
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
            Err(BootError::Exited(status, process.said()))
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
