//! ASGI 3: the native half. The protocol itself (scopes, `receive`/`send`, lifespan) runs on an
//! asyncio loop in Python (`headway/worker/asgi.py`); what it needs from the native core is a
//! request's I/O, done on the slot thread that claimed it so that the loop never blocks: a
//! [`channel::Channel`] hands the Python side one transport's requests and takes its responses.
//!
//! Slots keep their meaning: each of the T slot threads carries one request at a time to the
//! loop and waits with it, so an ASGI worker runs at most T HTTP requests at once and the
//! front's queue decides the order. Over the hop the loop serves requests itself, without slot
//! threads and with the same bound ([`claims`]): handing each request from thread to thread was
//! where most of its time went. A WebSocket holds no slot: the front opens a connection of
//! its own for each handshake, which the Python side serves on its loop, with [`websocket`] for
//! the frames.

pub mod channel;
pub mod claims;
pub mod websocket;

use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use headway_hop::worker::WorkerEnd;
use pyo3::intern;
use pyo3::prelude::*;

use crate::log::{log, print_traceback};
use crate::server::{request_object, Application};
use crate::transport::Transport;
use channel::Channel;
use claims::Claims;

/// The Python side (`headway.worker.asgi.Server`): its `serve_channel(channel)`, called on a slot
/// thread, serves the channel's requests and returns when the transport can carry no more; when
/// the worker serves the front, its `watch_clients(watcher)` is given a [`ClientWatcher`] and
/// its `serve_claims(claims)` the hop's requests as [`claims::Claims`].
pub struct Handler {
    pub server: Py<PyAny>,
}

impl Application for Handler {
    fn takes_websockets(&self) -> bool {
        true
    }

    fn attach(&self, py: Python<'_>, end: &Arc<WorkerEnd>) -> PyResult<()> {
        let watcher = ClientWatcher { end: end.clone(), seen: Mutex::new(0) };
        self.server.bind(py).call_method1(intern!(py, "watch_clients"), (watcher,))?;
        Ok(())
    }

    fn serve_hop(&self, py: Python<'_>, end: &Arc<WorkerEnd>, threads: usize) -> PyResult<Option<JoinHandle<()>>> {
        let (claims, drained) = Claims::start(end.clone(), threads)?;
        self.server.bind(py).call_method1(intern!(py, "serve_claims"), (claims,))?;
        Ok(Some(drained))
    }

    fn serve(&self, py: Python<'_>, transport: Box<dyn Transport>) -> Option<Box<dyn Transport>> {
        let channel = request_object(py, Py::new(py, Channel::new(transport)))?;
        let served = self.server.bind(py).call_method1(intern!(py, "serve_channel"), (channel.clone_ref(py),));
        let mut transport = channel.borrow_mut(py).take_transport()?;
        if let Err(error) = served {
            // A bug of ours in the Python half: the request (if any) cannot end well.
            log(py, "unexpected error on a connection; closing it:");
            print_traceback(py, &error);
            transport.abandon(py);
            return None;
        }
        Some(transport)
    }
}

/// Hears from the front that the clients of requests under way have gone (it marks their hop
/// slots), for the Python side to tell their apps (`http.disconnect`).
#[pyclass(module = "headway._native", name = "ClientWatcher", frozen)]
pub struct ClientWatcher {
    end: Arc<WorkerEnd>,
    /// The front's count of marks already looked at.
    seen: Mutex<u32>,
}

#[pymethods]
impl ClientWatcher {
    /// Waits (without the GIL) for the front to mark a client gone; returns the slots whose
    /// client is gone now, or None once the worker stops.
    fn wait(&self, py: Python<'_>) -> Option<Vec<usize>> {
        py.detach(|| {
            let mut seen = self.seen.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            self.end.wait_for_gone_clients(&mut seen)
        })
    }

    /// Whether the client of the request on slot `index` is gone, now: a mark seen by `wait`
    /// may belong to the slot's previous request (the next one clears it).
    fn is_gone(&self, index: usize) -> bool {
        index < self.end.slots() && self.end.slot(index).is_client_gone()
    }
}
