//! What the worker serves with: the trait a WSGI app and the ASGI side both implement, which
//! [`crate::server`] starts on the slot threads.

use std::sync::Arc;
use std::thread::JoinHandle;

use headway_hop::worker::WorkerEnd;
use pyo3::prelude::*;

use crate::log::{log, print_traceback};
use headway_worker_core::transport::Transport;

/// What serves the requests that come through a transport, on the slot thread that has it:
/// a WSGI app ([`crate::wsgi::App`]) or the ASGI side ([`crate::asgi::Handler`]). Gives the transport back, unless it was
/// lost on the way.
pub trait Application: Send + Sync {
    fn serve(&self, py: Python<'_>, transport: Box<dyn Transport>) -> Option<Box<dyn Transport>>;

    /// Whether WebSocket handshakes are served on the worker's socket (ASGI listens there).
    fn takes_websockets(&self) -> bool {
        false
    }

    /// Started by the front: an application that serves the hop its own way, with at most
    /// `threads` requests at once, starts here and returns the thread that ends once the hop
    /// is stopped and its requests are done. None: T slot threads serve it.
    fn serve_hop(&self, _py: Python<'_>, _end: &Arc<WorkerEnd>, _threads: usize) -> PyResult<Option<JoinHandle<()>>> {
        Ok(None)
    }
}

/// A request's Python object, just made: failing to make one (memory) costs the connection,
/// with a line.
pub fn request_object<T>(py: Python<'_>, made: PyResult<Py<T>>) -> Option<Py<T>> {
    made.inspect_err(|error| {
        log(py, "cannot make the request's objects; closing the connection:");
        print_traceback(py, error);
    })
    .ok()
}
