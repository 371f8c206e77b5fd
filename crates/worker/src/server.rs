//! The worker process: serve the shared memory the headway front passed down (or, run on its
//! own, bind the unix socket), run one thread per slot, stop cleanly on a signal.
//!
//! Each of the T slot threads is a Python thread that keeps its thread state for life and holds
//! the GIL except while it waits with nothing to do (for a request, a connection, or a socket
//! that would block): see `hop.rs` and `socket.rs`. There is no queue inside the worker: a slot
//! thread claims a published request only when it is free (`hop.rs`), and on a socket takes a
//! connection only while it has none (`unix.rs`). An ASGI app may serve the hop from its event
//! loop instead, with at most T requests at once ([`Application::serve_hop`]).
//!
//! SIGTERM and SIGINT reach Python's C-level handler, which writes the signal number to a
//! wake-up pipe; the main thread waits on that pipe without the GIL. Over the hop, the slot
//! threads then serve what is already published and stop once nothing is. On a socket, the
//! socket file is removed (no new connection can reach us), slots waiting to accept are woken,
//! idle connections are closed, requests in flight finish. Then `serve` returns 0.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;

use headway_hop::worker::WorkerEnd;
use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;

use crate::app::Application;
use crate::asgi::Handler;
use crate::hop;
use crate::log::log;
use crate::transport::Transport;
use crate::unix::{run_slot, Shared, SlotState};
use crate::wsgi::{environ, App};

create_exception!(
    _native,
    StartupError,
    PyException,
    "The worker cannot start (bad socket path and the like): one line for the user."
);

const LISTEN_BACKLOG: i32 = 1024;

/// Serves the WSGI `app` with `threads` slots until SIGTERM or SIGINT; returns the exit status.
/// `describe` names the app in the startup line; `root_path` is the prefix it is mounted under
/// (`--root-path`, "" for none). Started by the headway front, the worker serves over the shared
/// memory the front passed down; otherwise on the unix socket `path`.
#[pyfunction]
#[pyo3(signature = (app, path, threads, workers, describe, root_path = String::new()))]
pub fn serve(
    py: Python<'_>,
    app: Py<PyAny>,
    path: &str,
    threads: usize,
    workers: usize,
    describe: &str,
    root_path: String,
) -> PyResult<i32> {
    let base_environ = environ::base(py, threads, workers, &root_path)?.unbind();
    let app = Arc::new(App { app, base_environ, root_path });
    serve_with(py, app, path, threads, describe)
}

/// Like [`serve`], for an ASGI app: `server` is the Python side, whose asyncio loop runs the app
/// (see [`Handler`]).
#[pyfunction]
pub fn serve_asgi(py: Python<'_>, server: Py<PyAny>, path: &str, threads: usize, describe: &str) -> PyResult<i32> {
    serve_with(py, Arc::new(Handler { server }), path, threads, describe)
}

fn serve_with(py: Python<'_>, app: Arc<dyn Application>, path: &str, threads: usize, describe: &str) -> PyResult<i32> {
    // SAFETY: $HEADWAY_HOP names descriptors the front passed down to this process alone.
    match unsafe { WorkerEnd::from_env() } {
        Ok(Some(end)) => serve_hop(py, &app, Arc::new(end), threads, describe),
        Ok(None) => serve_socket(py, &app, path, threads, describe),
        Err(error) => Err(StartupError::new_err(format!("cannot attach to the front's shared memory: {error}"))),
    }
}

/// Starts slot thread `number`, which runs `body` attached to Python.
fn spawn_thread(number: usize, body: impl FnOnce(Python<'_>) + Send + 'static) -> PyResult<JoinHandle<()>> {
    std::thread::Builder::new()
        .name(format!("headway-slot-{number}"))
        .spawn(move || Python::attach(body))
        .map_err(|error| StartupError::new_err(format!("cannot start a slot thread: {error}")))
}

/// Serves one transport, surviving a panic in it.
fn serve_guarded(py: Python<'_>, app: &dyn Application, transport: Box<dyn Transport>) -> Option<Box<dyn Transport>> {
    catch_unwind(AssertUnwindSafe(|| app.serve(py, transport))).unwrap_or_else(|_| {
        log(py, "unexpected error on a connection; closing it");
        None
    })
}

fn serve_hop(
    py: Python<'_>,
    app: &Arc<dyn Application>,
    end: Arc<WorkerEnd>,
    threads: usize,
    describe: &str,
) -> PyResult<i32> {
    let stops = StopSignals::install(py)?;
    let (handles, how) = match app.serve_hop(py, &end, threads)? {
        Some(handle) => (vec![handle], format!("{threads} requests at once on its event loop")),
        None => (0..threads)
            .map(|number| {
                let (end, app) = (end.clone(), app.clone());
                spawn_thread(number, move |py| {
                    hop::run_thread(py, &end, &mut |py, transport| {
                        serve_guarded(py, app.as_ref(), transport);
                    })
                })
            })
            .collect::<PyResult<Vec<_>>>()
            .map(|handles| (handles, format!("{threads} threads")))?,
    };
    end.announce_ready(app.takes_websockets());
    log(py, &format!("pid {} serving {describe} over shared memory with {how}", std::process::id()));
    py.detach(|| stops.wait());
    end.stop();
    join(py, handles);
    stops.restore(py)?;
    Ok(0)
}

fn serve_socket(
    py: Python<'_>,
    app: &Arc<dyn Application>,
    path: &str,
    threads: usize,
    describe: &str,
) -> PyResult<i32> {
    let listener = bind_unix(path).map_err(StartupError::new_err)?;
    let inode = std::fs::metadata(path).map(|meta| meta.ino()).ok();
    let (stop_read, stop_write) = pipe()?;
    let stops = StopSignals::install(py)?;
    let shared = Arc::new(Shared { listener, stop_fd: stop_read, stopping: false.into() });
    let states: Vec<Arc<SlotState>> = (0..threads).map(|_| Arc::default()).collect();
    let handles = states
        .iter()
        .enumerate()
        .map(|(number, state)| {
            let (shared, state, app) = (shared.clone(), state.clone(), app.clone());
            spawn_thread(number, move |py| {
                run_slot(py, &shared, &state, &mut |py, transport| serve_guarded(py, app.as_ref(), transport))
            })
        })
        .collect::<PyResult<Vec<_>>>()?;
    log(py, &format!("pid {} serving {describe} on {path} with {threads} threads", std::process::id()));

    py.detach(|| stops.wait());
    shared.stopping.store(true, Ordering::SeqCst);
    remove_socket_file(path, inode);
    // Wakes every slot waiting to accept; never read, so it stays readable.
    // SAFETY: writes one byte from a live buffer to our pipe.
    unsafe { libc::write(stop_write.as_raw_fd(), b".".as_ptr().cast(), 1) };
    for state in &states {
        state.close_if_idle();
    }
    join(py, handles);
    stops.restore(py)?;
    Ok(0)
}

/// Waits for the slot threads, without the GIL they need to finish.
fn join(py: Python<'_>, handles: Vec<JoinHandle<()>>) {
    let panicked = py.detach(|| handles.into_iter().map(|handle| handle.join()).filter(Result::is_err).count());
    if panicked > 0 {
        log(py, &format!("{panicked} slot thread(s) failed"));
    }
}

/// SIGTERM and SIGINT, caught for a clean stop: they reach Python's C-level handler, which
/// writes the signal number to a wake-up pipe the main thread waits on without the GIL.
struct StopSignals {
    read: OwnedFd,
    /// Kept open for the handler to write to.
    _write: OwnedFd,
    numbers: [i32; 2],
}

impl StopSignals {
    fn install(py: Python<'_>) -> PyResult<StopSignals> {
        let (read, write) = pipe()?;
        let signal = py.import("signal")?;
        signal.call_method1("set_wakeup_fd", (write.as_raw_fd(),))?;
        // The C-level handler writes to the wake-up fd; the Python-level one has nothing to do.
        let note = py.eval(c"lambda signum, frame: None", None, None)?;
        let numbers = [signal.getattr("SIGTERM")?.extract::<i32>()?, signal.getattr("SIGINT")?.extract::<i32>()?];
        for number in numbers {
            signal.call_method1("signal", (number, &note))?;
        }
        Ok(StopSignals { read, _write: write, numbers })
    }

    /// Blocks until a stop signal comes.
    fn wait(&self) {
        wait_for_stop(&self.read, &self.numbers);
    }

    fn restore(self, py: Python<'_>) -> PyResult<()> {
        py.import("signal")?.call_method1("set_wakeup_fd", (-1,))?;
        Ok(())
    }
}

/// Reads signal numbers from the wake-up pipe until one of `stops` comes.
fn wait_for_stop(signals: &OwnedFd, stops: &[i32]) {
    let mut buf = [0u8; 64];
    loop {
        // SAFETY: reads into a live buffer of that size.
        let read = unsafe { libc::read(signals.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        if read == 0 {
            return;
        }
        if read < 0 {
            if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return;
        }
        if buf[..read as usize].iter().any(|&signum| stops.contains(&i32::from(signum))) {
            return;
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

/// Unlinks our socket file so that no new connection can reach us; a file that a newer
/// worker put there is not ours to remove.
fn remove_socket_file(path: &str, inode: Option<u64>) {
    if std::fs::metadata(path).is_ok_and(|meta| Some(meta.ino()) == inode) {
        let _ = std::fs::remove_file(path);
    }
}

/// A close-on-exec pipe; the write end does not block (a burst of signals must never hang the
/// handler that writes them).
fn pipe() -> PyResult<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 fills the two-element array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } != 0 {
        return Err(io::Error::last_os_error().into());
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
