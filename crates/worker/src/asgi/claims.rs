//! Requests from the hop for the asyncio loop to serve itself, so that a request never crosses a
//! thread: the loop claims a published request, builds its scope, runs the app and writes the
//! response, all on its own thread, as uvicorn's loop does with a socket.
//!
//! The loop cannot sleep on the hop's futexes, so it watches the hop's work bell (`add_reader`),
//! an eventfd the front rings when it publishes a request while the loop waits for one
//! ([`WorkerEnd::arm_loop`]), when a ring moves that a request of the loop's waits on, and when a
//! client leaves. Each ring, and each request that ends, is a [`Claims::turn`]: the requests
//! under way are poked ([`HttpCycle::poke`]), those that are over give their place back, and
//! published requests are claimed while there is a free place; only when there is room and
//! nothing is published does the loop ask to be rung. It takes a free place before claiming, so
//! the worker never has more than T requests in the app at once, and the front's queue keeps
//! the rest in its order.
//!
//! A claimed request's app runs in a task of its own, each in a context of its own (a copy of the
//! loop's, so that no request sees another's context variables); where Python can (3.12+), the
//! task starts eagerly, so an app that needs to wait for nothing is done before the turn goes
//! on, with no trip through the loop.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};

use headway_hop::worker::WorkerEnd;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyWeakrefReference};

use super::cycle::HttpCycle;
use super::loop_side::LoopSide;
use super::ready::Ready;
use super::scope::{Head, ScopeMaker};
use crate::log::{log, print_traceback, Gil};
use headway_worker_core::hop::Exchange;

#[pyclass(module = "headway._native", name = "Claims", frozen, weakref)]
pub struct Claims {
    shared: Arc<Shared>,
    /// The request under way on each hop slot.
    live: Mutex<Vec<Option<Py<HttpCycle>>>>,
    /// A turn is running: one asked for meanwhile (a request ended inside it) runs after it.
    turning: AtomicBool,
    again: AtomicBool,
    /// Set by `begin`, on the loop's thread.
    serving: OnceLock<Serving>,
}

/// What the Python side gives for serving requests.
struct Serving {
    /// `serve(scope, cycle)`: the coroutine that runs the app for one request.
    serve: Py<PyAny>,
    /// `start(coroutine)`: starts it as a task (eagerly where Python can) and returns the task.
    start: Py<PyAny>,
    /// The loop's `call_soon`.
    call_soon: Py<PyAny>,
    scopes: ScopeMaker,
    /// What each request's cycle needs of the loop.
    side: Arc<LoopSide>,
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
        end.serve_from_loop();
        let slots = end.slots();
        let shared = Arc::new(Shared { end, places, free: Mutex::new(places), freed: Condvar::new() });
        let drained = shared.clone();
        let handle = std::thread::Builder::new().name("headway-asgi-drain".into()).spawn(move || drained.drain())?;
        let claims = Claims {
            shared,
            live: Mutex::new((0..slots).map(|_| None).collect()),
            turning: AtomicBool::new(false),
            again: AtomicBool::new(false),
            serving: OnceLock::new(),
        };
        Ok((claims, handle))
    }

    fn serving(&self) -> &Serving {
        self.serving.get().expect("begin runs before the first turn")
    }

    fn live(&self) -> MutexGuard<'_, Vec<Option<Py<HttpCycle>>>> {
        self.live.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Has the loop run a turn once it has done what else is ready.
    fn turn_later(slf: &Bound<'_, Self>) {
        let py = slf.py();
        let scheduled =
            slf.getattr(intern!(py, "turn")).and_then(|turn| slf.get().serving().call_soon.call1(py, (turn,)));
        if let Err(error) = scheduled {
            log(py, "cannot schedule the loop's next turn:");
            print_traceback(py, &error);
        }
    }

    fn poke(&self, py: Python<'_>) {
        let cycles: Vec<(usize, Py<HttpCycle>)> = self
            .live()
            .iter()
            .enumerate()
            .filter_map(|(index, cycle)| Some((index, cycle.as_ref()?.clone_ref(py))))
            .collect();
        for (index, cycle) in cycles {
            // A cycle borrowed now is the one whose app called in here: it is poked next time.
            let over = cycle.bind(py).try_borrow_mut().is_ok_and(|mut cycle| cycle.poke(py));
            if over {
                self.live()[index] = None;
                *self.shared.free() += 1;
                self.shared.freed.notify_one();
            }
        }
    }

    /// Claims and starts published requests while there are free places and `budget` lasts;
    /// asks to be rung if there is room left and nothing published. Returns false if the budget
    /// ran out first (the loop must come back without being rung).
    fn claim(&self, py: Python<'_>, budget: &mut usize) -> bool {
        let mut armed = false;
        loop {
            let mut free = self.shared.free();
            if *free == 0 {
                return true;
            }
            if *budget == 0 {
                return false;
            }
            match self.shared.end.try_claim() {
                Some(index) => {
                    *free -= 1;
                    *budget -= 1;
                    drop(free);
                    self.begin_cycle(py, index);
                }
                // Then one more look: a request published before the front could see the flag.
                None if !armed => {
                    self.shared.end.arm_loop();
                    armed = true;
                }
                None => return true,
            }
        }
    }

    /// Reads the head of the request claimed on slot `index` and starts its app.
    fn begin_cycle(&self, py: Python<'_>, index: usize) {
        let serving = self.serving();
        let mut exchange = Exchange::on_loop(self.shared.end.clone(), index);
        let scope = match exchange.read_head_record(&Gil(py)) {
            Ok(head) => serving.scopes.make(py, &Head::from_hop(&head)),
            Err(error) => Err(error.into()),
        };
        let cycle = match Py::new(py, HttpCycle::new(exchange, serving.side.clone())) {
            Ok(cycle) => cycle,
            Err(error) => {
                log(py, "cannot make a request's objects:");
                print_traceback(py, &error);
                self.release(index);
                return;
            }
        };
        self.live()[index] = Some(cycle.clone_ref(py));
        let started = scope.and_then(|scope| {
            let coroutine = serving.serve.call1(py, (scope, cycle.clone_ref(py)))?;
            serving.start.call1(py, (coroutine,))
        });
        match started {
            // asyncio holds a task only weakly: the cycle holds it until the app is done.
            Ok(task) => cycle.borrow_mut(py).hold(task),
            // The app never ran: the request gets its 500, and the place comes back once the
            // exchange has ended.
            Err(error) => {
                let _ = HttpCycle::finish(cycle.bind(py), Some(error.value(py).as_any()));
            }
        }
    }

    fn release(&self, index: usize) {
        self.live()[index] = None;
        *self.shared.free() += 1;
        self.shared.freed.notify_one();
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
}

#[pymethods]
impl Claims {
    /// Called once, on the loop's thread, before the first turn: `serve(scope, cycle)` makes the
    /// coroutine that runs the app, `start(coroutine)` starts it as a task and returns the task,
    /// `send_file(cycle, path)` makes the coroutine that sends a file; `event_loop` is the loop,
    /// `state` the lifespan state and `root_path` the prefix the app is mounted under.
    fn begin(
        slf: &Bound<'_, Self>,
        serve: Py<PyAny>,
        start: Py<PyAny>,
        send_file: Py<PyAny>,
        event_loop: &Bound<'_, PyAny>,
        state: Py<PyDict>,
        root_path: String,
    ) -> PyResult<()> {
        let py = slf.py();
        let done = Py::new(py, Ready::new(None))?.into_any();
        let scopes = ScopeMaker::new(py, false, state, root_path)?;
        let create_future = event_loop.getattr(intern!(py, "create_future"))?.unbind();
        let call_soon = event_loop.getattr(intern!(py, "call_soon"))?.unbind();
        // The cycles hold the claims weakly, so that no reference runs back up (see loop_side.rs).
        let claims = PyWeakrefReference::new(slf.as_any())?.unbind();
        let side = Arc::new(LoopSide::new(create_future, done, send_file, claims));
        let serving = Serving { serve, start, call_soon, scopes, side };
        slf.get().serving.set(serving).map_err(|_| pyo3::exceptions::PyRuntimeError::new_err("begun already"))
    }

    /// The work bell: readable when the front has news for the loop.
    fn fileno(&self) -> i32 {
        use std::os::fd::{AsFd, AsRawFd};
        self.shared.end.work_bell().as_fd().as_raw_fd()
    }

    /// Pokes the requests under way, gives back the places of those that are over, and claims
    /// published requests while there is room. A turn asked for while one runs (a request that
    /// ends inside it) makes that one go round again instead. `rung`: called because the work
    /// bell is readable, which this clears.
    #[pyo3(signature = (rung=false))]
    fn turn(slf: &Bound<'_, Self>, rung: bool) {
        let (this, py) = (slf.get(), slf.py());
        if rung {
            this.shared.end.work_bell().drain();
        }
        if this.turning.swap(true, Ordering::SeqCst) {
            this.again.store(true, Ordering::SeqCst);
            return;
        }
        // A turn starts at most T requests: on Python 3.12+ an app that waits for nothing is done
        // inside the turn and its place is free again, and a turn that went on for as long as
        // the front publishes would keep the loop from everything else it does (WebSockets,
        // timers). The rest waits for a turn of its own, after the loop's other work.
        let mut budget = this.shared.places;
        loop {
            this.again.store(false, Ordering::SeqCst);
            this.poke(py);
            if !this.claim(py, &mut budget) {
                Claims::turn_later(slf);
                break;
            }
            if !this.again.load(Ordering::SeqCst) {
                break;
            }
        }
        this.turning.store(false, Ordering::SeqCst);
    }
}
