//! Requests from the hop for the asyncio loop to serve itself, so that under load a request never
//! crosses a thread: the loop claims a published request, reads its head, runs the app and writes
//! the response, all on its own thread, as uvicorn's loop does with a socket.
//!
//! The loop cannot sleep on the hop's futex, so a claimer thread (no GIL, no Python) does that
//! for it: it waits for a published request, claims it, and rings an eventfd the loop watches
//! (`add_reader`), only when the loop has not been rung already. The loop, woken, takes every
//! claimed request at once and claims more itself while it has room; when a request ends, it
//! claims the next one before going back to sleep. Both take a free place before claiming, so the
//! worker never holds more than T requests at once, and the front's queue keeps the rest.

use std::os::fd::{AsFd, AsRawFd};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use headway_hop::wake::Doorbell;
use headway_hop::worker::WorkerEnd;
use pyo3::prelude::*;

use super::channel::Channel;
use crate::hop::Exchange;

/// The longest the claimer sleeps at once: the front wakes it, and this bounds what a missed
/// wake-up could cost.
const NAP: Duration = Duration::from_secs(1);

#[pyclass(module = "headway._native", name = "Claims", frozen)]
pub struct Claims {
    shared: Arc<Shared>,
}

struct Shared {
    end: Arc<WorkerEnd>,
    places: usize,
    state: Mutex<State>,
    /// Signalled when a place frees up while the claimer waits for one.
    freed: Condvar,
    /// Rung when the claimer has claimed a request for the loop.
    bell: Doorbell,
}

#[derive(Default)]
struct State {
    /// Places for requests not taken by a claimed request (or by the claimer, looking for one).
    free: usize,
    /// Claimed by the claimer, not yet taken by the loop.
    claimed: Vec<usize>,
    /// The claimer waits for a free place.
    claimer_waits: bool,
}

impl Claims {
    /// Claims for at most `places` requests at once; starts the claimer, whose thread returns
    /// once the hop is stopped and every request it or the loop claimed has ended.
    pub fn start(end: Arc<WorkerEnd>, places: usize) -> std::io::Result<(Claims, std::thread::JoinHandle<()>)> {
        let state = Mutex::new(State { free: places, ..State::default() });
        let shared = Arc::new(Shared { end, places, state, freed: Condvar::new(), bell: Doorbell::new()? });
        let claimer = shared.clone();
        let handle = std::thread::Builder::new().name("headway-asgi-claims".into()).spawn(move || claimer.run())?;
        Ok((Claims { shared }, handle))
    }
}

impl Shared {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Claims the next published request, sleeping until there is one; None once stopped.
    /// It does not spin as the slot threads do: on a busy 2-core machine perf put its
    /// `sched_yield` loop at an eighth of the worker's CPU, and the loop claims for itself
    /// whenever a request ends.
    fn claim(&self) -> Option<usize> {
        loop {
            if let Some(index) = self.end.try_claim() {
                return Some(index);
            }
            if self.end.is_stopped() {
                return None;
            }
            self.end.wait_for_work(Some(NAP));
        }
    }

    fn run(&self) {
        loop {
            let mut state = self.state();
            state.claimer_waits = true;
            while state.free == 0 {
                state = self.freed.wait(state).unwrap_or_else(|poisoned| poisoned.into_inner());
            }
            state.claimer_waits = false;
            state.free -= 1;
            drop(state);
            let Some(index) = self.claim() else { break };
            let first = {
                let mut state = self.state();
                state.claimed.push(index);
                state.claimed.len() == 1
            };
            if first {
                self.bell.ring();
            }
        }
        // Stopped: the requests under way end before the worker does.
        let mut state = self.state();
        state.free += 1;
        state.claimer_waits = true;
        while state.free < self.places {
            state = self.freed.wait(state).unwrap_or_else(|poisoned| poisoned.into_inner());
        }
    }
}

#[pymethods]
impl Claims {
    /// The eventfd that is readable when requests were claimed for the loop.
    fn fileno(&self) -> i32 {
        self.shared.bell.as_fd().as_raw_fd()
    }

    /// The requests claimed for the loop, and those it can claim now that it has room for; each
    /// is a channel to serve, then to give back with `done`. `rung`: called because the eventfd
    /// is readable, which this clears (a read the other calls, one a request, do without).
    #[pyo3(signature = (rung=false))]
    fn take(&self, py: Python<'_>, rung: bool) -> PyResult<Vec<Py<Channel>>> {
        let shared = &self.shared;
        if rung {
            shared.bell.drain();
        }
        let indexes = {
            let mut state = shared.state();
            let mut indexes = std::mem::take(&mut state.claimed);
            while state.free > 0 {
                let Some(index) = shared.end.try_claim() else { break };
                state.free -= 1;
                indexes.push(index);
            }
            indexes
        };
        indexes
            .into_iter()
            .map(|index| Py::new(py, Channel::on_loop(Box::new(Exchange::new(shared.end.clone(), index)))))
            .collect()
    }

    /// A request taken with `take` has ended: its place is free.
    fn done(&self) {
        let mut state = self.shared.state();
        state.free += 1;
        if state.claimer_waits {
            self.shared.freed.notify_one();
        }
    }
}
