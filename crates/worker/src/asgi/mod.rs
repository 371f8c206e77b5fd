//! ASGI 3: the native half. The protocol's Python side (lifespan, the task that calls the app,
//! WebSocket connections) runs on an asyncio loop in Python (`headway/worker/asgi.py`); what is
//! native is everything a request passes through on its way: its scope ([`scope`]), its
//! `receive` and `send` ([`cycle`]), and how the loop takes requests from the hop ([`claims`]);
//! a cycle reaches back to the loop only through [`loop_side`], so no reference runs back up.
//!
//! Slots keep their meaning: an ASGI worker has at most T HTTP requests in the app at once, and
//! the front's queue decides the order of the rest. Started by the front, the loop serves the
//! hop's requests itself, without slot threads and with that bound ([`claims`]): handing each
//! request from thread to thread was where most of its time went. Run on its own unix socket,
//! each of the T slot threads carries one connection's requests to the loop ([`channel`]). A
//! WebSocket holds no slot: the front opens a connection of its own for each handshake, which
//! the Python side serves on its loop, with [`websocket`] for the frames.

pub mod channel;
pub mod claims;
pub mod cycle;
pub mod loop_side;
pub mod ready;
pub mod scope;
pub mod websocket;

use std::sync::Arc;
use std::thread::JoinHandle;

use headway_hop::worker::WorkerEnd;
use pyo3::intern;
use pyo3::prelude::*;

use crate::app::{request_object, Application};
use crate::log::{log, print_traceback, Gil};
use channel::Channel;
use claims::Claims;
use headway_worker_core::transport::Transport;

/// The Python side (`headway.worker.asgi.Server`): its `serve_channel(channel)`, called on a slot
/// thread, serves the channel's requests and returns when the transport can carry no more; when
/// the worker serves the front, its `serve_claims(claims)` is given the hop's requests as
/// [`claims::Claims`].
pub struct Handler {
    pub server: Py<PyAny>,
}

impl Application for Handler {
    fn takes_websockets(&self) -> bool {
        true
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
            transport.abandon(&Gil(py));
            return None;
        }
        Some(transport)
    }
}
