//! Requests from the hop for the asyncio loop to serve itself, so that under load a request never
//! crosses a thread: the loop claims a published request, reads its head, runs the app and writes
//! the response, all on its own thread, as uvicorn's loop does with a socket.
//!
//! The loop cannot sleep on the hop's futex, so it watches the hop's work bell (`add_reader`),
//! an eventfd the front rings when it publishes a request while the loop waits for one
//! ([`WorkerEnd::arm_loop`]). The loop claims whenever it is rung and whenever a request ends,
//! while it has room; only when it has room and finds nothing does it ask to be rung. It takes a
//! free place before claiming, so the worker never holds more than T requests at once, and the
//! front's queue keeps the rest. (A thread used to sleep on the futex for the loop and ring it:
//! two wake-ups where one does, a quarter of the worker's CPU in hello-world runs.)

use std::os::fd::{AsFd, AsRawFd};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use headway_hop::worker::WorkerEnd;
use pyo3::prelude::*;

use super::channel::Channel;
use crate::hop::Exchange;

#[pyclass(module = "headway._native", name = "Claims", frozen)]
pub struct Claims {
    shared: Arc<Shared>,
}

struct Shared {
    end: Arc<WorkerEnd>,
    places: usize,
    /// Places not taken by a claimed request.
    free: Mutex<usize>,
    /// Signalled when a place frees up, for the drain at the end.
    freed: Condvar,
}

impl Claims {
    /// Claims for at most `places` requests at once, and a thread that returns once the hop is
    /// stopped and every request the loop claimed has ended (the worker waits for it to exit).
    pub fn start(end: Arc<WorkerEnd>, places: usize) -> std::io::Result<(Claims, std::thread::JoinHandle<()>)> {
        let shared = Arc::new(Shared { end, places, free: Mutex::new(places), freed: Condvar::new() });
        let drained = shared.clone();
        let handle = std::thread::Builder::new().name("headway-asgi-drain".into()).spawn(move || drained.drain())?;
        Ok((Claims { shared }, handle))
    }
}

impl Shared {
    fn free(&self) -> MutexGuard<'_, usize> {
        self.free.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Returns once stopped and no request is under way.
    fn drain(&self) {
        self.end.wait_for_stop();
        let mut free = self.free();
        while *free < self.places {
            free = self.freed.wait(free).unwrap_or_else(|poisoned| poisoned.into_inner());
        }
    }

    /// Claims published requests while there is room; asks to be rung if there is room left.
    fn claim(&self) -> Vec<usize> {
        let mut free = self.free();
        let mut indexes = Vec::new();
        let mut armed = false;
        while *free > 0 {
            if let Some(index) = self.end.try_claim() {
                *free -= 1;
                indexes.push(index);
            } else if armed {
                break;
            } else {
                // Then one more look: a request published before the front could see the flag.
                self.end.arm_loop();
                armed = true;
            }
        }
        indexes
    }
}

#[pymethods]
impl Claims {
    /// The work bell: readable when the front published a request for the loop.
    fn fileno(&self) -> i32 {
        self.shared.end.work_bell().as_fd().as_raw_fd()
    }

    /// The requests the loop can claim now that it has room for; each is a channel to serve, then
    /// to give back with `done`. `rung`: called because the work bell is readable, which this
    /// clears.
    #[pyo3(signature = (rung=false))]
    fn take(&self, py: Python<'_>, rung: bool) -> PyResult<Vec<Py<Channel>>> {
        let shared = &self.shared;
        if rung {
            shared.end.work_bell().drain();
        }
        shared
            .claim()
            .into_iter()
            .map(|index| Py::new(py, Channel::on_loop(Box::new(Exchange::new(shared.end.clone(), index)))))
            .collect()
    }

    /// A request taken with `take` has ended: its place is free.
    fn done(&self) {
        *self.shared.free() += 1;
        self.shared.freed.notify_one();
    }
}
