//! A body on its way between the front and a worker, held so neither side waits for the other
//! more than it must: a response from a slot to a slow client, a request body from a client to
//! the queue.
//!
//! A slot must be free as soon as its worker has finished a response, however slowly the
//! client reads: otherwise one slow reader holds a slot, and everyone queued behind it waits.
//! So the slot writes the body here as fast as the worker produces it, and the client's
//! connection reads it out at the client's pace. Memory is bounded per body: past the limit,
//! the rest goes to an unlinked temporary file (what nginx does with `proxy_buffering`), so a
//! thousand slow readers of large responses cost disk, not RAM.
//!
//! Disk is bounded too, as nginx bounds it with `proxy_max_temp_file_size`: a response's file
//! holds at most `--max-temp-file-size`, and every spool's file together at most
//! `--max-temp-disk` ([`DiskBudget`]). A response that reaches either is held back: the slot stops
//! reading the worker until its client has caught up (back-pressure, which then holds the slot,
//! the price of a client that far behind), rather than spooling without end. A file read to its
//! end is emptied, and its disk given back, so a client reading along costs no more than how far
//! it is behind. A request body that finds no room is refused (`front::read`): it cannot queue
//! half-read.
//!
//! A client that reads as fast as the worker writes should not pay for the disk: every byte past
//! the memory limit would be written to the file and read back, two more copies and the page
//! cache's churn for a body that never needed to wait. So a slot asks for room first
//! ([`Writer::room`]): while the body is in memory and the memory is full, it waits for the
//! client to take some, as long as the client keeps to the schedule of one reading at
//! [`KEEPS_PACE`] since the slot first waited, give or take [`BEHIND`] (a client on a busy
//! machine may not run for a while). A client that falls behind it is slow: the rest of its body
//! goes to the file at once, and the slot waits on it again only when the disk limits are met.
//!
//! A client that keeps pace need not be copied to either: while its connection waits for the next
//! piece with nothing buffered, the writer may write the body to the client's socket itself
//! ([`Reader::pass_through`], [`Writer::pass_through`]), straight from where the worker put it,
//! as much as the socket takes at once and never waiting for it; what it does not take goes
//! through the spool behind it, as before.
//!
//! File writes and reads are plain positioned I/O on a page-cache-backed file; they take
//! microseconds, so they run inline rather than on a blocking thread.
//!
//! The parts: [`channel`] makes a spool, a [`Writer`] and a [`Reader`] on shared state; the
//! [`DiskBudget`] is every spool's disk together; `spill` is the temporary file a body goes to
//! past its memory; `pass_through` is the writer writing to the client's socket itself.

mod disk_budget;
mod pass_through;
mod reader;
mod spill;
#[cfg(test)]
mod tests;
mod writer;

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::Notify;

pub use disk_budget::DiskBudget;
use pass_through::PassThrough;
pub use reader::Reader;
use spill::Spill;
pub use writer::{WriteError, Writer};

/// A client that reads at least this fast (bytes a second) keeps pace with the worker: the slot
/// waits for it to make room in memory rather than spilling its body to disk. Any client on the
/// same host or a LAN does; one that does not is slow, and costs disk, not the slot's time.
pub const KEEPS_PACE: u64 = 64 << 20;
/// How far behind that schedule a client may fall before it counts as slow.
pub const BEHIND: Duration = Duration::from_millis(50);

/// The body could not be delivered whole: the worker failed mid-body, or the spill file failed.
#[derive(Debug, thiserror::Error)]
#[error("response body was cut short")]
pub struct Truncated;

/// Where a spool may hold a body, and how much.
#[derive(Debug, Clone)]
pub struct SpoolLimits {
    /// Bytes held in memory before the rest goes to a file.
    pub memory: usize,
    /// The most its file holds at once; 0: no file, the memory alone. (A single piece larger
    /// than either still goes where it is alone.)
    pub file: u64,
    pub disk: Arc<DiskBudget>,
}

#[cfg(test)]
impl SpoolLimits {
    /// `memory` bytes in memory, and any file on any disk.
    pub fn unbounded(memory: usize) -> SpoolLimits {
        SpoolLimits { memory, file: u64::MAX, disk: DiskBudget::new(u64::MAX) }
    }
}

/// Makes a spool within `limits`.
pub fn channel(limits: &SpoolLimits) -> (Writer, Reader) {
    let shared = Arc::new(Shared {
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
    });
    (Writer { shared: shared.clone() }, Reader { shared, file: None, handed_on: 0 })
}

struct Shared {
    state: Mutex<State>,
    readable: Notify,
    /// Notified when the reader is dropped (its client has gone).
    left: Notify,
    /// Notified when the reader makes room a waiting writer may use, or leaves.
    room: Notify,
    limits: SpoolLimits,
}

struct State {
    memory: VecDeque<Bytes>,
    memory_bytes: usize,
    /// Bytes go to the file while it holds any not yet read, so order is kept: memory first,
    /// then the file.
    spill: Option<Spill>,
    end: Option<End>,
    reader_gone: bool,
    /// The writer found no room and waits for the reader to make some.
    writer_waits: bool,
    /// Bytes given to the client so far: written to memory, or passed through.
    written: u64,
    /// When the slot first waited for room in memory: the start of the schedule a client keeping
    /// pace keeps.
    waiting_since: Option<tokio::time::Instant>,
    /// The client's socket, when the writer may write to it itself.
    through: Option<PassThrough>,
    /// The reader waits in [`Reader::next`]: nothing it was given is still being written.
    reader_waits: bool,
    /// Bytes the writer wrote to the socket itself, not yet counted by the reader.
    passed: u64,
}

#[derive(Clone, Copy)]
enum End {
    Complete,
    Truncated,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Whether the file holds bytes the reader has not read.
fn unread_in_file(state: &State) -> bool {
    state.spill.as_ref().is_some_and(|spill| spill.read < spill.written)
}

/// Tells a writer waiting for room that the reader made some.
fn wake_writer(shared: &Shared, state: &mut State) {
    if std::mem::take(&mut state.writer_waits) {
        shared.room.notify_waiters();
    }
}
