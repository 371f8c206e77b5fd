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
//! The parts: [`channel`] makes a spool, a [`Writer`] and a [`Reader`] on the state they share
//! (`shared`), within its [`SpoolLimits`]; the [`DiskBudget`] is every spool's disk together;
//! `pace` is when a client keeps pace; `spill` is the temporary file a body goes to past its
//! memory; `pass_through` is the client's socket the writer writes to itself.

mod disk_budget;
mod limits;
mod pace;
mod pass_through;
mod reader;
mod shared;
mod spill;
#[cfg(test)]
mod tests;
mod writer;

use std::sync::Arc;

pub use disk_budget::DiskBudget;
pub use limits::SpoolLimits;
pub use pace::{BEHIND, KEEPS_PACE};
pub use reader::{Reader, Truncated};
use shared::Shared;
pub use writer::{WriteError, Writer};

/// Makes a spool within `limits`.
pub fn channel(limits: &SpoolLimits) -> (Writer, Reader) {
    let shared = Arc::new(Shared::new(limits));
    (Writer { shared: shared.clone() }, Reader { shared, file: None, handed_on: 0 })
}
