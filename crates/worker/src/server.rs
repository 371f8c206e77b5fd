//! The Python worker process: attach to the front's shared memory (or, run on its own, bind the
//! unix socket) through the worker core's `slots`, run one Python thread per slot, stop cleanly
//! on a signal.
//!
//! Each of the T slot threads is a Python thread that keeps its thread state for life and holds
//! the GIL except while it waits with nothing to do: the core lets go of it then, through
//! [`Gil`]. An ASGI app may serve the hop from its event loop instead, with at most T requests
//! at once ([`Application::serve_hop`]).
//!
//! SIGTERM and SIGINT reach Python's C-level handler, which writes the signal number to a
//! wake-up pipe; the main thread waits on that pipe without the GIL, then stops the slots (the
//! core says what that does over the hop and on a socket) and joins them. Then `serve` returns 0.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::thread::JoinHandle;

use headway_worker_core::slots::{pipe, Slots};
use headway_worker_core::transport::Transport;
use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;

use crate::app::Application;
use crate::asgi::Handler;
use crate::log::{log, Gil};
use crate::wsgi::{environ, App};

create_exception!(
    _native,
    StartupError,
    PyException,
    "The worker cannot start (bad socket path and the like): one line for the user."
);

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
    let slots = Arc::new(Slots::attach(path, threads).map_err(StartupError::new_err)?);
    let stops = StopSignals::install(py)?;
    let on_loop = match slots.hop() {
        Some(end) => app.serve_hop(py, end, threads)?,
        None => None,
    };
    let (handles, how) = match on_loop {
        Some(handle) => (vec![handle], format!("{threads} requests at once on its event loop")),
        None => (0..threads)
            .map(|number| {
                let (slots, app) = (slots.clone(), app.clone());
                spawn_thread(number, move |py| {
                    slots.run_slot(&Gil(py), number, &mut |transport| serve_guarded(py, app.as_ref(), transport))
                })
            })
            .collect::<PyResult<Vec<_>>>()
            .map(|handles| (handles, format!("{threads} threads")))?,
    };
    slots.announce_ready(app.takes_websockets());
    log(py, &format!("pid {} serving {describe} {} with {how}", std::process::id(), slots.place()));
    py.detach(|| stops.wait());
    slots.stop();
    join(py, handles);
    stops.restore(py)?;
    Ok(0)
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
