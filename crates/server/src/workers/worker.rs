//! A worker: one place in the pool (1..W), the state its supervisor task, its slots and the
//! stats share. Its process comes and goes (crashes, recycles, reloads); the worker stays, and
//! its phase tells the slots when a process is there to serve ([`Phase`]).
//!
//! Any HTTP/1.1 server that can listen on a unix socket can be a worker's process: any command
//! given with `--cmd` (Puma in single mode, a Node program) is reached that way, and the front
//! relies on nothing more. The bundled Python worker is reached through the shared-memory hop
//! instead ([`Transport`]). How a process is started is in [`super::launch`], the running
//! process in [`super::process`].

use std::ops::Deref;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use serde::Serialize;
use tokio::sync::watch;

use super::hop_link::HopLink;
use super::replacement::{Lifetime, Recycles};
use crate::tally::{Hold, Tally};

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
    /// The unix sockets its processes listen on, in turn; as a path, the one serving now.
    pub socket: Sockets,
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
    /// Connections to it closed because it sent bytes no request asked for.
    pub unrequested: AtomicU64,
    /// Replacements of every kind, by cause.
    pub recycles: Recycles,
    /// The current process: what it served, and whether it is due for recycling.
    pub lifetime: Lifetime,
    /// WebSockets open to this worker, each on a connection of its own (never on a slot).
    pub websockets: Arc<Tally>,
    /// Bumped to have every open WebSocket of this worker closed.
    websockets_closing: watch::Sender<u64>,
    /// Its slots, set once its first process says what kind of app it serves.
    slots: AtomicUsize,
    pid: AtomicU32,
    phase: watch::Sender<Phase>,
    /// The latest generation whose process a slot found stuck (0: none). A generation rather
    /// than a signal, so that reports about a process already being replaced (its other stuck
    /// requests timing out in turn) can never be taken for reports about the next one.
    hung: watch::Sender<u64>,
}

impl Worker {
    pub fn new(index: usize, socket: PathBuf, transport: Transport) -> Self {
        Worker {
            index,
            socket: Sockets::new(socket),
            transport,
            busy: Arc::new(Tally::default()),
            served: AtomicU64::new(0),
            busy_micros: AtomicU64::new(0),
            restarts: AtomicU64::new(0),
            unrequested: AtomicU64::new(0),
            recycles: Recycles::default(),
            lifetime: Lifetime::default(),
            websockets: Arc::new(Tally::default()),
            websockets_closing: watch::Sender::new(0),
            slots: AtomicUsize::new(0),
            pid: AtomicU32::new(0),
            phase: watch::Sender::new(Phase::Starting),
            hung: watch::Sender::new(0),
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
        if let Some(link) = self.install_link(None) {
            link.mark_gone();
        }
    }

    /// Makes `link` the hop region slots find from now on (none for an HTTP worker); returns
    /// the one it replaces.
    pub fn install_link(&self, link: Option<Arc<HopLink>>) -> Option<Arc<HopLink>> {
        match &self.transport {
            Transport::Hop(current) => std::mem::replace(&mut *current.lock().unwrap_or_else(|p| p.into_inner()), link),
            Transport::Http => None,
        }
    }

    /// The pid of the current process, 0 when there is none.
    pub fn pid(&self) -> u32 {
        self.pid.load(Ordering::Relaxed)
    }

    pub fn slots(&self) -> usize {
        self.slots.load(Ordering::Relaxed)
    }

    pub fn set_slots(&self, slots: usize) {
        self.slots.store(slots, Ordering::Relaxed);
    }

    pub fn set_pid(&self, pid: u32) {
        self.pid.store(pid, Ordering::Relaxed);
    }

    /// Called by a slot whose request to the process of `generation` outlived the request
    /// timeout, or that broke the hop's rules: that process can no longer be trusted to serve
    /// and will be replaced. A report about an earlier process changes nothing.
    pub fn report_hung_of(&self, generation: u64) {
        self.hung.send_if_modified(|hung| {
            let later = generation > *hung;
            if later {
                *hung = generation;
            }
            later
        });
    }

    /// Resolves once the process of `generation` has been reported stuck.
    pub async fn hung(&self, generation: u64) {
        let _ = self.hung.subscribe().wait_for(|hung| *hung >= generation).await;
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

/// The two unix socket paths a worker's processes take in turn, one generation after the other,
/// so that a replacement listens while the process it replaces still serves (a server cannot
/// bind a path in use, and some remove their socket file as they stop); and a count of the slots
/// linked to each, so the replaced process is stopped only once none is. As a path it is the
/// socket of the process serving now (a WebSocket handshake goes there).
pub struct Sockets {
    paths: [PathBuf; 2],
    linked: [Arc<Tally>; 2],
    /// Which of `paths` new connections go to.
    serving: AtomicUsize,
}

impl Sockets {
    /// `first` is generation 1's; the next one's is beside it, `.next` added to its name.
    fn new(first: PathBuf) -> Sockets {
        let mut next = first.clone().into_os_string();
        next.push(".next");
        Sockets { paths: [first, next.into()], linked: Default::default(), serving: AtomicUsize::new(0) }
    }

    fn place(generation: u64) -> usize {
        (generation.wrapping_sub(1) % 2) as usize
    }

    /// Where the process of `generation` listens.
    pub fn of(&self, generation: u64) -> &Path {
        &self.paths[Sockets::place(generation)]
    }

    /// Has new connections go to the process of `generation`.
    pub fn serve_from(&self, generation: u64) {
        self.serving.store(Sockets::place(generation), Ordering::Relaxed);
    }

    /// Counts a slot as linked to the process of `generation` while the hold lives.
    pub fn link(&self, generation: u64) -> Hold {
        Hold::new(self.linked[Sockets::place(generation)].clone())
    }

    /// Resolves once no slot is linked to the process of `generation`.
    pub async fn unlinked(&self, generation: u64) {
        self.linked[Sockets::place(generation)].zero().await
    }
}

impl Deref for Sockets {
    type Target = Path;

    fn deref(&self) -> &Path {
        &self.paths[self.serving.load(Ordering::Relaxed)]
    }
}

impl AsRef<Path> for Sockets {
    fn as_ref(&self) -> &Path {
        self
    }
}
