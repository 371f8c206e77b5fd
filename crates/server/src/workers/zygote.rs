//! `--preload`: the app is imported once, in a parent process (the *zygote*), and every worker
//! process of the bundled worker is forked from it, so the workers share the app's memory pages
//! until they write to them (copy-on-write), as with `gunicorn --preload` or Puma's
//! `preload_app!`.
//!
//! Why a zygote that the front asks for each worker, rather than one parent that forks them
//! all at start: each worker process needs its own hop region and doorbell, made by the front
//! when that process is about to start (a crashed or recycled worker gets a fresh region, see
//! `slot::hop`). So the front keeps making them, and passes them to the zygote over a unix
//! datagram socket (SCM_RIGHTS) with the worker's number; the zygote forks a child that keeps
//! them, and answers with the child's pid. The child makes itself a process group of its own,
//! so that signals, the memory limit and stats reach it exactly as a worker the front started.
//! It is not the front's child, so the front watches it through a pidfd ([`Forked`]); its exit
//! status goes to the zygote, which reaps it.
//!
//! A worker that dies is forked again from the same zygote. A reload starts a new zygote with
//! the new code first, and only if it imports are the workers replaced (forked from it); each
//! worker process holds its zygote, so an old zygote goes once its last worker has.
//!
//! A zygote that dies (a kill, the OOM killer) takes none of its workers with it: they are
//! tied to the front, not to the process that forked them (each watches the front's pidfd, see
//! the Python side), and keep serving. The next worker that needs forking finds the zygote gone
//! and has a new one started first, importing the app again ([`Preloaded::fork`]).
//!
//! The Python side is `python -m headway.worker.preload`; the Ruby side, the Rack worker run with
//! `--preload` (`ruby/lib/headway/preload.rb`).

use std::io;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixDatagram;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use headway_hop::files::send_with_fds;
use headway_hop::front::FrontEnd;
use tokio::io::unix::AsyncFd;
use tokio::io::Interest;
use tokio::process::Child;

use crate::workers::launch::{BootError, Launch};
use crate::workers::output::Output;
use crate::workers::slots_per_worker::SlotsPerWorker;

/// What the zygote runs: the bundled worker's launch (Python or Ruby).
#[derive(Debug, Clone)]
pub struct ZygoteConfig {
    pub launch: Launch,
    pub slots: SlotsPerWorker,
    pub workers: usize,
}

/// A running zygote: the app imported, waiting for fork requests.
pub struct Zygote {
    /// The front's end of the socket pair; one request and its answer at a time.
    channel: Mutex<UnixDatagram>,
    /// Killed when the last worker forked from it (and the supervisor) let go of it.
    child: Child,
    /// What it and the workers forked from it print (they share its pipes), into the log.
    _output: Output,
}

impl Zygote {
    /// Starts a zygote and waits until it has imported the app. An import error is its
    /// traceback on stderr and [`BootError::Exited`].
    pub async fn start(config: &ZygoteConfig, timeout: Duration) -> Result<Arc<Zygote>, BootError> {
        let (front, zygote) = seqpacket_pair().map_err(BootError::Spawn)?;
        let Some(mut command) = config.launch.preload_command(config.slots, config.workers) else {
            let unsupported = io::Error::new(io::ErrorKind::Unsupported, "only the bundled workers preload");
            return Err(BootError::Spawn(unsupported));
        };
        let fd = zygote.as_raw_fd();
        command.env("HEADWAY_ZYGOTE", fd.to_string()).stdin(Stdio::null()).process_group(0).kill_on_drop(true);
        // SAFETY: fcntl and prctl are async-signal-safe and touch only the child's own state.
        unsafe {
            command.pre_exec(move || {
                if libc::fcntl(fd, libc::F_SETFD, 0) != 0 || libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let (mut child, mut output) =
            Output::spawn(&mut command, |pid| tracing::info_span!("preload", pid)).map_err(BootError::Spawn)?;
        drop(zygote);
        front.set_read_timeout(Some(timeout)).map_err(BootError::Spawn)?;
        let ready = tokio::task::spawn_blocking(move || {
            let word = receive(&front);
            (front, word)
        });
        let (front, word) = ready.await.map_err(|err| BootError::Spawn(err.into()))?;
        match word {
            Ok(word) if word == "ready" => {}
            _ => {
                let status = match tokio::time::timeout(Duration::from_secs(1), child.wait()).await {
                    Ok(Ok(status)) => status.to_string(),
                    _ => "it did not say it was ready".to_owned(),
                };
                output.finished().await;
                return Err(BootError::NotImported(status, output.said()));
            }
        }
        Ok(Arc::new(Zygote { channel: Mutex::new(front), child, _output: output }))
    }

    /// Has the zygote fork worker `index` with `end`'s region and bells, pinned to `cpu` if
    /// given; returns the worker.
    async fn fork(
        self: &Arc<Self>,
        index: usize,
        socket: &Path,
        cpu: Option<usize>,
        end: &FrontEnd,
    ) -> io::Result<Forked> {
        let fds = end.clone_descriptors()?;
        let cpu = cpu.map_or(String::new(), |cpu| cpu.to_string());
        let message = format!("{index}\0{}\0{cpu}", socket.display());
        let zygote = self.clone();
        let answer = tokio::task::spawn_blocking(move || {
            let channel = zygote.channel.lock().unwrap_or_else(|p| p.into_inner());
            send_with_fds(channel.as_fd(), message.as_bytes(), &fds.each_ref().map(|fd| fd.as_raw_fd()), 0)?;
            receive(&channel)
        })
        .await??;
        let pid: u32 = answer
            .parse()
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, format!("the preloaded parent said {answer:?}")))?;
        // SAFETY: pidfd_open has no memory arguments; a negative result is an error.
        let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
        if pidfd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: pidfd_open returned a new descriptor that nothing else owns.
        let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd as RawFd) };
        // SAFETY: the AsyncFd owns the pidfd for its whole life.
        let pidfd = unsafe { AsyncFd::register_with_interest(pidfd, Interest::READABLE) }?;
        Ok(Forked { pid, pidfd, _zygote: self.clone() })
    }

    /// The zygote's pid, for logs.
    pub fn pid(&self) -> u32 {
        self.child.id().unwrap_or(0)
    }
}

/// A worker process forked by a zygote.
pub struct Forked {
    pub pid: u32,
    /// Readable once the process has exited.
    pidfd: AsyncFd<OwnedFd>,
    /// Kept alive while any of its workers is.
    _zygote: Arc<Zygote>,
}

impl Forked {
    /// Resolves once the process has exited, with its status if the front could reap it.
    pub async fn exited(&mut self) -> String {
        match self.pidfd.readable().await {
            Ok(_) => {
                self.reap().map_or_else(|| "a status only the preloaded parent sees".to_owned(), |s| s.to_string())
            }
            Err(err) => err.to_string(),
        }
    }

    /// Reaps the process if it has become the front's own child: when its zygote dies first, it
    /// goes to the reaper of orphans, which is the front when it runs as a container's PID 1,
    /// and would stay a zombie there. Otherwise (its zygote reaps it) there is nothing to do.
    fn reap(&self) -> Option<ExitStatus> {
        // SAFETY: siginfo_t is plain data, which waitid fills in.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        let pidfd = self.pidfd.get_ref().as_raw_fd() as libc::id_t;
        // SAFETY: waitid on a pidfd we own, into a live siginfo_t.
        let reaped = unsafe { libc::waitid(libc::P_PIDFD, pidfd, &mut info, libc::WEXITED | libc::WNOHANG) };
        // SAFETY: after a successful waitid the child fields are set (si_pid 0: nothing reaped).
        let (pid, status) = unsafe { (info.si_pid(), info.si_status()) };
        if reaped != 0 || pid == 0 {
            return None;
        }
        // The wait status as waitpid encodes it: the exit code in the second byte, or the signal.
        Some(ExitStatus::from_raw(if info.si_code == libc::CLD_EXITED { status << 8 } else { status }))
    }
}

/// A connected pair of SOCK_SEQPACKET unix sockets, close-on-exec: messages keep their
/// boundaries (one request, one answer), and unlike datagrams the survivor sees the other end
/// close (a read of 0), so a zygote that dies never leaves the front waiting. std has no type
/// for them; `UnixDatagram` makes the same calls (send, recv, timeouts).
fn seqpacket_pair() -> io::Result<(UnixDatagram, UnixDatagram)> {
    let mut fds = [0; 2];
    // SAFETY: socketpair fills the two-element array.
    if unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC, 0, fds.as_mut_ptr()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: socketpair returned two new descriptors that nothing else owns.
    Ok(unsafe { (UnixDatagram::from_raw_fd(fds[0]), UnixDatagram::from_raw_fd(fds[1])) })
}

/// One message as text.
fn receive(channel: &UnixDatagram) -> io::Result<String> {
    let mut buf = [0u8; 64];
    let read = channel.recv(&mut buf)?;
    if read == 0 {
        return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "the preloaded parent is gone"));
    }
    Ok(String::from_utf8_lossy(&buf[..read]).into_owned())
}

/// The zygote the next worker process is forked from, replaced by a reload.
pub struct Preloaded {
    config: ZygoteConfig,
    timeout: Duration,
    current: Mutex<Arc<Zygote>>,
    /// Held while a dead zygote is replaced, so that the workers that find it gone at once
    /// start one new zygote between them.
    replacing: tokio::sync::Mutex<()>,
}

impl Preloaded {
    /// Starts the first zygote; `timeout` bounds the app's import.
    pub async fn start(config: ZygoteConfig, timeout: Duration) -> Result<Arc<Preloaded>, BootError> {
        let zygote = Zygote::start(&config, timeout).await?;
        tracing::info!("app imported once, in the preloaded parent (pid {})", zygote.pid());
        Ok(Arc::new(Preloaded { config, timeout, current: Mutex::new(zygote), replacing: Default::default() }))
    }

    fn current(&self) -> Arc<Zygote> {
        self.current.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Starts a zygote with the code as it is now; only once it has imported the app does it
    /// replace the current one (whose workers keep it until they are replaced).
    pub async fn renew(&self) -> Result<(), BootError> {
        let zygote = Zygote::start(&self.config, self.timeout).await?;
        tracing::info!("app imported again, in a new preloaded parent (pid {})", zygote.pid());
        *self.current.lock().unwrap_or_else(|p| p.into_inner()) = zygote;
        Ok(())
    }

    /// Forks worker `index` from the current zygote (see [`Zygote::fork`]); if that zygote is
    /// gone, starts a new one first.
    pub async fn fork(
        &self,
        index: usize,
        socket: &Path,
        cpu: Option<usize>,
        end: &FrontEnd,
    ) -> Result<Forked, BootError> {
        let zygote = self.current();
        match zygote.fork(index, socket, cpu, end).await {
            Err(error) if is_gone(&error) => {
                self.replace_dead(&zygote).await?;
                self.current().fork(index, socket, cpu, end).await.map_err(BootError::Spawn)
            }
            forked => forked.map_err(BootError::Spawn),
        }
    }

    /// Replaces `dead` with a new zygote, unless another worker's start already has.
    async fn replace_dead(&self, dead: &Arc<Zygote>) -> Result<(), BootError> {
        let _one_at_a_time = self.replacing.lock().await;
        if !Arc::ptr_eq(&self.current(), dead) {
            return Ok(());
        }
        tracing::warn!("the preloaded parent (pid {}) is gone; importing the app again in a new one", dead.pid());
        self.renew().await
    }
}

/// Whether a fork request failed because the zygote is no longer there to read or answer it.
fn is_gone(error: &io::Error) -> bool {
    matches!(error.kind(), io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionReset | io::ErrorKind::UnexpectedEof)
}
