//! What a spool's writer and reader share: the body's state under one lock ([`State`]), and the
//! notifications by which each tells the other it has moved ([`Shared`]).

use std::collections::VecDeque;
use std::sync::{Mutex, MutexGuard};

use bytes::Bytes;
use tokio::sync::Notify;

use super::limits::SpoolLimits;
use super::pass_through::PassThrough;
use super::spill::Spill;

pub(super) struct Shared {
    state: Mutex<State>,
    pub(super) readable: Notify,
    /// Notified when the reader is dropped (its client has gone).
    pub(super) left: Notify,
    /// Notified when the reader makes room a waiting writer may use, or leaves.
    pub(super) room: Notify,
    pub(super) limits: SpoolLimits,
}

pub(super) struct State {
    pub(super) memory: VecDeque<Bytes>,
    pub(super) memory_bytes: usize,
    /// Bytes go to the file while it holds any not yet read, so order is kept: memory first,
    /// then the file.
    pub(super) spill: Option<Spill>,
    pub(super) end: Option<End>,
    pub(super) reader_gone: bool,
    /// The writer found no room and waits for the reader to make some.
    pub(super) writer_waits: bool,
    /// Bytes given to the client so far: written to memory, or passed through.
    pub(super) written: u64,
    /// When the slot first waited for room in memory: the start of the schedule a client keeping
    /// pace keeps.
    pub(super) waiting_since: Option<tokio::time::Instant>,
    /// The client's socket, when the writer may write to it itself.
    pub(super) through: Option<PassThrough>,
    /// The reader waits in [`Reader::next`](super::Reader::next): nothing it was given is still
    /// being written.
    pub(super) reader_waits: bool,
    /// Bytes the writer wrote to the socket itself, not yet counted by the reader.
    pub(super) passed: u64,
}

#[derive(Clone, Copy)]
pub(super) enum End {
    Complete,
    Truncated,
}

impl Shared {
    /// An empty body's state, within `limits`.
    pub(super) fn new(limits: &SpoolLimits) -> Shared {
        Shared {
            state: Mutex::new(State {
                memory: VecDeque::new(),
                memory_bytes: 0,
                spill: None,
                end: None,
                reader_gone: false,
                writer_waits: false,
                written: 0,
                waiting_since: None,
                through: None,
                reader_waits: false,
                passed: 0,
            }),
            readable: Notify::new(),
            left: Notify::new(),
            room: Notify::new(),
            limits: limits.clone(),
        }
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Whether the file holds bytes the reader has not read.
pub(super) fn unread_in_file(state: &State) -> bool {
    state.spill.as_ref().is_some_and(|spill| spill.read < spill.written)
}

/// Tells a writer waiting for room that the reader made some.
pub(super) fn wake_writer(shared: &Shared, state: &mut State) {
    if std::mem::take(&mut state.writer_waits) {
        shared.room.notify_waiters();
    }
}
