//! A worker: one place in the pool (1..W), the state its supervisor task, its slots and the
//! stats share. Its process comes and goes (crashes, recycles, reloads); the worker stays, and
//! its phase tells the slots when a process is there to serve ([`Phase`]).
//!
//! Any HTTP/1.1 server that can listen on a unix socket can be a worker's process: any command
//! given with `--cmd` (Puma in single mode, a Node program) is reached that way, and the front
//! relies on nothing more. The bundled Python worker is reached through the shared-memory hop
//! instead ([`Transport`]). How a process is started is in [`super::launch`], the running
//! process in [`super::process`].

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde::Serialize;
use tokio::sync::{watch, Notify};

use super::lifetime::{Lifetime, Recycles};
use super::region::HopLink;
use crate::tally::Tally;

/// Where a worker is in its life. Slots connect only while it is `Ready`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "state")]
pub enum Phase {
    /// Being started, or restarted after an exit.
    Starting,
    /// Listening; `generation` changes with every new process, so a slot can tell its
    /// connection belongs to a process that is gone.
    Ready { generation: u64 },
    /// Taking no new requests until its running ones finish, then to be replaced.
    Draining,
    /// Shut down for good.
    Stopped,
}

/// How the front's slots reach a worker.
pub enum Transport {
    /// HTTP/1.1 over the worker's unix socket, a keep-alive connection per slot.
    Http,
    /// The shared-memory hop. Holds the link to the current process's region, set before the
    /// process is announced ready.
    Hop(Mutex<Option<Arc<HopLink>>>),
}

/// The state of one worker, shared by its supervisor task, its slots and the stats.
pub struct Worker {
    /// 1-based, stable across restarts.
    pub index: usize,
    /// The unix socket an HTTP worker listens on.
    pub socket: PathBuf,
    pub transport: Transport,
    /// Slots of this worker that are running a request now. The queue reads it to pick the
    /// least busy worker; a drain waits for it to reach zero.
    pub busy: Arc<Tally>,
    pub served: AtomicU64,
    /// Total time its slots spent running requests, in microseconds. Against the worker's CPU
    /// time it tells how CPU-bound the app is (`headway lab recommend` uses it).
    pub busy_micros: AtomicU64,
    /// Replacements after a crash or a timeout.
    pub restarts: AtomicU64,
    /// Replacements of every kind, by cause.
    pub recycles: Recycles,
    /// The current process: what it served, and whether it is due for recycling.
    pub lifetime: Lifetime,
    /// WebSockets open to this worker, each on a connection of its own (never on a slot).
    pub websockets: Arc<Tally>,
    /// Bumped to have every open WebSocket of this worker closed.
    websockets_closing: watch::Sender<u64>,
    pid: AtomicU32,
    phase: watch::Sender<Phase>,
    /// A slot saw a request run past the request timeout.
    hung: Notify,
}

impl Worker {
    pub fn new(index: usize, socket: PathBuf, transport: Transport) -> Self {
        Worker {
            index,
            socket,
            transport,
            busy: Arc::new(Tally::default()),
            served: AtomicU64::new(0),
            busy_micros: AtomicU64::new(0),
            restarts: AtomicU64::new(0),
            recycles: Recycles::default(),
            lifetime: Lifetime::default(),
            websockets: Arc::new(Tally::default()),
            websockets_closing: watch::Sender::new(0),
            pid: AtomicU32::new(0),
            phase: watch::Sender::new(Phase::Starting),
            hung: Notify::new(),
        }
    }

    pub fn phase(&self) -> Phase {
        *self.phase.borrow()
    }

    pub fn set_phase(&self, phase: Phase) {
        self.phase.send_replace(phase);
    }

    pub fn watch_phase(&self) -> watch::Receiver<Phase> {
        self.phase.subscribe()
    }

    /// The process has exited: exchanges still waiting on it over the hop fail (a socket
    /// connection sees its end by itself).
    pub fn process_gone(&self) {
        if let Transport::Hop(link) = &self.transport {
            if let Some(link) = link.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).take() {
                link.mark_gone();
            }
        }
    }

    /// The pid of the current process, 0 when there is none.
    pub fn pid(&self) -> u32 {
        self.pid.load(Ordering::Relaxed)
    }

    pub fn set_pid(&self, pid: u32) {
        self.pid.store(pid, Ordering::Relaxed);
    }

    /// Called by a slot whose request outlived the request timeout, or that the worker broke
    /// the hop's rules: the process can no longer be trusted to serve and will be replaced.
    pub fn report_hung(&self) {
        self.hung.notify_one();
    }

    pub async fn hung(&self) {
        self.hung.notified().await
    }

    /// What an open WebSocket watches to learn that it must close.
    pub fn watch_websockets_closing(&self) -> watch::Receiver<u64> {
        self.websockets_closing.subscribe()
    }

    /// Has every open WebSocket of this worker closed (a close frame to both sides, see
    /// `front::websocket`); `websockets` reaches zero once they are gone.
    pub fn close_websockets(&self) {
        self.websockets_closing.send_modify(|closings| *closings += 1);
    }
}
