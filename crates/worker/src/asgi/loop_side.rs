//! What a request's cycle ([`super::cycle`]) needs of the loop that serves it ([`super::claims`]),
//! and nothing more: a way to make a future, the awaitable a `send` gives when it is done, the
//! coroutine that sends a file, and a way to ask the claims for a turn when its app has ended.
//!
//! Why a handle of its own: the claims hold every request under way, and a cycle that held the
//! claims back made a loop of references through native objects, which Python's garbage
//! collector cannot see (and the claims held themselves, to hand to each cycle). Here every cycle
//! shares this handle, which holds the claims only weakly: references run one way, claims to
//! cycle to handle, and a cycle is freed when the claims give its place back, with nothing left
//! for the collector. Taking part in collection instead (`__traverse__` and `__clear__` on both
//! types) would mean walking a mutex of cycles and clearing objects the loop still calls, for
//! objects that have nothing to collect: the claims live as long as the worker, and a cycle's
//! references all end with its request. The one loop left through a cycle is its app's task,
//! whose frame holds the cycle while the cycle holds the task; `HttpCycle::finish` breaks it.

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::PyWeakrefReference;

pub struct LoopSide {
    /// The loop's `create_future`.
    create_future: Py<PyAny>,
    /// What a `send` that needed no waiting returns.
    done: Py<PyAny>,
    /// `send_file(cycle, path)`: the coroutine that sends a file (`http.response.pathsend`).
    send_file: Py<PyAny>,
    /// The claims, whose `turn` gives back the places of requests that are over.
    claims: Py<PyWeakrefReference>,
}

impl LoopSide {
    pub fn new(
        create_future: Py<PyAny>,
        done: Py<PyAny>,
        send_file: Py<PyAny>,
        claims: Py<PyWeakrefReference>,
    ) -> LoopSide {
        LoopSide { create_future, done, send_file, claims }
    }

    /// A new asyncio future on the loop.
    pub fn new_future(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.create_future.call0(py)
    }

    /// What a `send` that needed no waiting returns.
    pub fn done(&self, py: Python<'_>) -> Py<PyAny> {
        self.done.clone_ref(py)
    }

    pub fn send_file<'py>(&self, py: Python<'py>) -> Bound<'py, PyAny> {
        self.send_file.bind(py).clone()
    }

    /// A request's app has ended: the claims take a turn, which frees its place once its exchange
    /// has ended and claims the next request. Claims that are gone (the worker is ending) have no
    /// place to give back.
    pub fn turn(&self, py: Python<'_>) -> PyResult<()> {
        if let Some(claims) = self.claims.bind(py).upgrade() {
            claims.call_method0(intern!(py, "turn"))?;
        }
        Ok(())
    }
}
