//! The worker's slots, whatever the language: where its T slot threads get their work (the shared
//! memory the headway front passed down, or, run on its own, a unix socket it binds), what each
//! slot thread runs, and how they are stopped.
//!
//! The binding makes the T threads (they must be the interpreter's own threads) and has each call
//! [`Slots::run_slot`] until it returns; it waits for a stop signal its own way, then calls
//! [`Slots::stop`] and joins the threads. There is no queue inside the worker: a slot thread
//! claims a published request only when it is free (`hop.rs`), and on a socket takes a
//! connection only while it has none (`unix.rs`).
//!
//! On [`Slots::stop`], over the hop, the slot threads serve what is already published and stop
//! once nothing is. On a socket, the socket file is removed (no new connection can reach us),
//! slots waiting to accept are woken, idle connections are closed, requests in flight finish.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use headway_hop::worker::WorkerEnd;

use crate::hop;
use crate::runtime::Runtime;
use crate::transport::Serve;
use crate::unix::{self, Shared, SlotState};

const LISTEN_BACKLOG: i32 = 1024;

/// Where the slots get their work.
pub enum Slots {
    /// Started by the headway front: the shared memory it passed down.
    Hop(Arc<WorkerEnd>),
    /// Run on its own: HTTP/1.1 on a unix socket.
    Socket(SocketSlots),
}

/// A worker's own unix socket and what its stopping needs of each slot.
pub struct SocketSlots {
    path: String,
    /// The socket file we made: one a newer worker put there is not ours to remove.
    inode: Option<u64>,
    shared: Arc<Shared>,
    states: Vec<Arc<SlotState>>,
    /// Written once to wake every slot waiting to accept.
    stop_write: OwnedFd,
}

impl Slots {
    /// The front's shared memory when `$HEADWAY_HOP` names it, else a listening socket at `path`
    /// for `threads` slots. The error is the line the user gets.
    pub fn attach(path: &str, threads: usize) -> Result<Slots, String> {
        // SAFETY: $HEADWAY_HOP names descriptors the front passed down to this process alone.
        match unsafe { WorkerEnd::from_env() } {
            Ok(Some(end)) => Ok(Slots::Hop(Arc::new(end))),
            Ok(None) => SocketSlots::bind(path, threads).map(Slots::Socket),
            Err(error) => Err(format!("cannot attach to the front's shared memory: {error}")),
        }
    }

    /// The front's end of the shared memory, when the front started us.
    pub fn hop(&self) -> Option<&Arc<WorkerEnd>> {
        match self {
            Slots::Hop(end) => Some(end),
            Slots::Socket(_) => None,
        }
    }

    /// Where requests come from, for the startup line: `over shared memory`, `on PATH`.
    pub fn place(&self) -> String {
        match self {
            Slots::Hop(_) => "over shared memory".to_owned(),
            Slots::Socket(socket) => format!("on {}", socket.path),
        }
    }

    /// Slot `number`'s life, on the interpreter's thread that calls it: serves what comes with
    /// `serve` until the worker stops.
    pub fn run_slot(&self, runtime: &dyn Runtime, number: usize, serve: &mut Serve<'_>) {
        match self {
            Slots::Hop(end) => hop::run_thread(runtime, end, &mut |transport| {
                serve(transport);
                None
            }),
            Slots::Socket(socket) => match socket.states.get(number) {
                Some(state) => unix::run_slot(runtime, &socket.shared, state, serve),
                None => runtime.log(&format!("there is no slot {number}")),
            },
        }
    }

    /// Tells the front the slots are running (over the hop; a socket says so by listening).
    /// `takes_websockets`: the app serves WebSocket handshakes on the worker's socket.
    pub fn announce_ready(&self, takes_websockets: bool) {
        if let Slots::Hop(end) = self {
            end.announce_ready(takes_websockets);
        }
    }

    /// Stops taking work: the slot threads return from [`Slots::run_slot`] once what they have
    /// is served (see the module's comment).
    pub fn stop(&self) {
        match self {
            Slots::Hop(end) => end.stop(),
            Slots::Socket(socket) => socket.stop(),
        }
    }
}

impl SocketSlots {
    fn bind(path: &str, threads: usize) -> Result<SocketSlots, String> {
        let listener = bind_unix(path)?;
        let inode = std::fs::metadata(path).map(|meta| meta.ino()).ok();
        let (stop_read, stop_write) = pipe().map_err(|error| format!("cannot make a pipe: {error}"))?;
        let shared = Arc::new(Shared { listener, stop_fd: stop_read, stopping: false.into() });
        let states = (0..threads).map(|_| Arc::default()).collect();
        Ok(SocketSlots { path: path.to_owned(), inode, shared, states, stop_write })
    }

    fn stop(&self) {
        self.shared.stopping.store(true, Ordering::SeqCst);
        if std::fs::metadata(&self.path).is_ok_and(|meta| Some(meta.ino()) == self.inode) {
            let _ = std::fs::remove_file(&self.path);
        }
        // Wakes every slot waiting to accept; never read, so it stays readable.
        // SAFETY: writes one byte from a live buffer to our pipe.
        unsafe { libc::write(self.stop_write.as_raw_fd(), b".".as_ptr().cast(), 1) };
        for state in &self.states {
            state.close_if_idle();
        }
    }
}

/// A listening unix socket at `path`, replacing a stale socket file left there; the error
/// is the line the user gets.
fn bind_unix(path: &str) -> Result<OwnedFd, String> {
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_socket() => {
            std::fs::remove_file(path).map_err(|error| format!("cannot listen on {path}: {}", describe(&error)))?
        }
        Ok(_) => return Err(format!("{path} exists and is not a socket; not replacing it")),
        Err(_) => {}
    }
    let listener = std::os::unix::net::UnixListener::bind(path)
        .map_err(|error| format!("cannot listen on {path}: {}", describe(&error)))?;
    listener.set_nonblocking(true).map_err(|error| format!("cannot listen on {path}: {}", describe(&error)))?;
    let fd = OwnedFd::from(listener);
    // std listens with a backlog of 128 at most on old kernels; ask for ours.
    // SAFETY: listen on a socket we own.
    unsafe { libc::listen(fd.as_raw_fd(), LISTEN_BACKLOG) };
    Ok(fd)
}

/// An OS error as Python words it: `[Errno 13] Permission denied`.
fn describe(error: &io::Error) -> String {
    match error.raw_os_error() {
        Some(code) => {
            let text = error.to_string();
            let text = text.split(" (os error").next().unwrap_or(&text);
            format!("[Errno {code}] {text}")
        }
        None => error.to_string(),
    }
}

/// A close-on-exec pipe; the write end does not block (a burst of signals must never hang the
/// handler that writes them).
pub fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 fills the two-element array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: pipe2 returned two new descriptors that nothing else owns.
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    set_blocking(&read)?;
    Ok((read, write))
}

fn set_blocking(fd: &OwnedFd) -> io::Result<()> {
    // SAFETY: fcntl on a descriptor we own.
    unsafe {
        let flags = libc::fcntl(fd.as_raw_fd(), libc::F_GETFL);
        if flags < 0 || libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, flags & !libc::O_NONBLOCK) < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}
