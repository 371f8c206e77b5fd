//! What the clients of one thread share, whatever they speak (HTTP/1.1, HTTP/2 streams,
//! WebSockets): the plan, the demand they take requests from, and the pacing of their sends.

use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::plan::{LoadModel, Plan};
use crate::record::{LiveCounters, Recorder};
use crate::schedule::{Demand, Picker};

/// What the clients of one thread share. Single-threaded: plain cells, no locks.
pub struct ThreadCtx {
    pub plan: Arc<Plan>,
    pub state: RefCell<ThreadState>,
    /// Set when the run must end early (every connection refused before any answer).
    pub stop: Arc<AtomicBool>,
    pub live: Arc<[LiveCounters]>,
    pub clients: usize,
    /// Requests sent and not yet recorded, reported as aborted if the hard stop cuts them off.
    pub in_flight: Cell<u64>,
    connect_failures: Cell<usize>,
}

pub struct ThreadState {
    pub demand: Demand,
    pub picker: Picker,
    pub recorder: Recorder,
}

impl ThreadCtx {
    pub fn new(
        plan: Arc<Plan>,
        state: ThreadState,
        stop: Arc<AtomicBool>,
        live: Arc<[LiveCounters]>,
        clients: usize,
    ) -> ThreadCtx {
        ThreadCtx {
            plan,
            state: RefCell::new(state),
            stop,
            live,
            clients,
            in_flight: Cell::new(0),
            connect_failures: Cell::new(0),
        }
    }

    fn any_response(&self) -> bool {
        self.live.iter().any(|c| c.responses.load(Ordering::Relaxed) > 0)
    }

    /// A connect failed. If nothing has ever answered and this thread's clients have each
    /// failed about once, the target is unreachable: stop instead of spinning until the end.
    pub(crate) fn connect_failed(&self) {
        if self.any_response() {
            return;
        }
        self.connect_failures.set(self.connect_failures.get() + 1);
        if self.connect_failures.get() >= self.clients {
            self.stop.store(true, Ordering::Relaxed);
        }
    }

    /// Takes up to `count` requests from the thread's demand into `batch`, all for one origin,
    /// which it returns; `None` when the run is stopped or the demand is used up.
    pub(crate) fn take(&self, count: usize, batch: &mut Vec<Pending>) -> Option<usize> {
        if self.stop.load(Ordering::Relaxed) {
            return None;
        }
        let mut state = self.state.borrow_mut();
        let state = &mut *state;
        let now = Instant::now();
        let origin = state.picker.origin();
        for _ in 0..count {
            let Some(intended) = state.demand.next(now) else { break };
            let target = state.picker.target(origin);
            batch.push(Pending { target, intended, retried: false });
        }
        (!batch.is_empty()).then_some(origin)
    }
}

/// A request taken from the demand and not yet answered.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Pending {
    pub target: usize,
    /// The open loop's intended send time.
    pub intended: Option<Instant>,
    /// Already resent once after its keep-alive connection turned out to be closed.
    pub(crate) retried: bool,
}

/// When a client may send: in the open loop at the intended times, with `-q` at its next turn.
#[derive(Debug, Default)]
pub(crate) struct Pacing {
    /// Closed loop with `-q`: no send before this.
    next_allowed: Option<Instant>,
}

impl Pacing {
    /// Waits until `batch` may go: the open loop until the last intended time of the batch (so
    /// no request leaves early), `-q` until the connection's next turn.
    pub(crate) async fn wait(&mut self, model: LoadModel, batch: &[Pending]) {
        let not_before = match model {
            LoadModel::Open { .. } => batch.iter().filter_map(|p| p.intended).max(),
            LoadModel::Closed { connection_rate: Some(rate) } => {
                let now = Instant::now();
                let at = self.next_allowed.unwrap_or(now).max(now);
                self.next_allowed = Some(at + Duration::from_secs_f64(1.0 / rate));
                Some(at)
            }
            LoadModel::Closed { connection_rate: None } => None,
        };
        if let Some(at) = not_before {
            if at > Instant::now() {
                tokio::time::sleep_until(at.into()).await;
            }
        }
    }
}
