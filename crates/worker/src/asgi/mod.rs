//! ASGI 3: the native half. The protocol itself (scopes, `receive`/`send`, lifespan) runs on an
//! asyncio loop in Python (`headway/worker/asgi.py`); what it needs from the native core is a
//! request's I/O, done on the slot thread that claimed it so that the loop never blocks: a
//! [`channel::Channel`] hands the Python side one transport's requests and takes its responses.
//!
//! Slots keep their meaning: each of the T slot threads carries one request at a time to the
//! loop and waits with it, so an ASGI worker runs at most T HTTP requests at once and the
//! front's queue decides the order. A WebSocket holds no slot: the front opens a connection of
//! its own for each handshake, which the Python side serves on its loop, with [`websocket`] for
//! the frames.

pub mod channel;
pub mod websocket;

use pyo3::prelude::*;

use crate::log::{log, print_traceback};
use crate::server::Application;
use crate::transport::Transport;
use channel::Channel;

/// The Python side's per-transport entry point: called on a slot thread with a [`Channel`], it
/// serves the channel's requests and returns when the transport can carry no more.
pub struct Handler {
    pub serve_channel: Py<PyAny>,
}

impl Application for Handler {
    fn serve(&self, py: Python<'_>, transport: Box<dyn Transport>) -> Option<Box<dyn Transport>> {
        let channel = match Py::new(py, Channel::new(transport)) {
            Ok(channel) => channel,
            Err(error) => {
                log(py, "cannot make the request's objects; closing the connection:");
                print_traceback(py, &error);
                return None;
            }
        };
        let served = self.serve_channel.bind(py).call1((channel.clone_ref(py),));
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
