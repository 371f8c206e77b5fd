//! Passing through: while the client's connection waits with nothing buffered, the writer writes
//! the body to the client's socket itself, as much as the socket takes at once, and what it does
//! not take goes through the spool behind it (see the module comment of [`super`]).

use std::io::{self, IoSlice};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use socket2::SockRef;

use super::{unread_in_file, wake_writer, Reader, Shared, Writer};

/// A client's socket the writer may write the body to ([`Reader::pass_through`]).
pub(super) struct PassThrough {
    socket: OwnedFd,
    /// Bytes the body may still put on the wire (the rest of its `Content-Length`).
    allowance: u64,
}

impl Writer {
    /// Waits, if the body passes through ([`Writer::pass_through`]), until the reader waits with
    /// nothing buffered again, so that what comes next can pass; as [`Writer::room`], no longer
    /// than a client keeping pace would need to take what it was given.
    pub async fn passing(&self) {
        self.keep_pace(|state| {
            let passing = state.through.is_none() || (state.reader_waits && state.memory.is_empty());
            (!passing).then_some(state.written)
        })
        .await;
    }

    /// Writes the start of `parts` to the client's socket itself, if the reader waits with
    /// nothing buffered and passing through was set up ([`Reader::pass_through`]): as much as the
    /// socket takes now, without waiting. Returns how many bytes went; the rest must go through
    /// [`Writer::write`], behind them.
    pub fn pass_through(&self, parts: &[IoSlice<'_>]) -> usize {
        let mut state = self.shared.lock();
        // (The body has not ended: its writer is here.)
        let idle = state.reader_waits && state.memory.is_empty() && !unread_in_file(&state) && !state.reader_gone;
        let Some(through) = state.through.as_mut().filter(|_| idle) else { return 0 };
        // A socket that fails or is full takes nothing: the reader, writing the rest itself, sees
        // the same and deals with it.
        let sent = send_within(through.socket.as_fd(), parts, through.allowance).unwrap_or(0);
        through.allowance -= sent as u64;
        state.passed += sent as u64;
        state.written += sent as u64;
        sent
    }
}

impl Reader {
    /// Lets the writer write the body's next bytes to `socket` itself (the client's own socket,
    /// the body unframed on it), at most `allowance` bytes in all, whenever this reader waits in
    /// [`Reader::next`] with nothing buffered. [`Reader::passed`] says how many it wrote.
    pub fn pass_through(&mut self, socket: OwnedFd, allowance: u64) {
        self.shared.lock().through = Some(PassThrough { socket, allowance });
    }

    /// Bytes the writer wrote to the socket itself since the last call: they went out before
    /// whatever [`Reader::next`] returns next.
    pub fn passed(&mut self) -> u64 {
        std::mem::take(&mut self.shared.lock().passed)
    }
}

/// Sends what of `parts` the socket takes now, at most `allowance` bytes.
fn send_within(socket: BorrowedFd<'_>, parts: &[IoSlice<'_>], allowance: u64) -> io::Result<usize> {
    let mut left = usize::try_from(allowance).unwrap_or(usize::MAX);
    let within: Vec<IoSlice<'_>> = parts
        .iter()
        .map(|part| {
            let take = part.len().min(left);
            left -= take;
            IoSlice::new(&part[..take])
        })
        .collect();
    if within.iter().all(|part| part.is_empty()) {
        return Ok(0);
    }
    SockRef::from(&socket).send_vectored_with_flags(&within, libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL)
}

/// Marks the reader as waiting for as long as it is alive: the writer may pass bytes through
/// only then, when nothing the reader took is still on its way to the socket.
pub(super) struct ReaderWaits<'a>(&'a Shared);

impl ReaderWaits<'_> {
    pub(super) fn start(shared: &Shared) -> ReaderWaits<'_> {
        let mut state = shared.lock();
        state.reader_waits = true;
        wake_writer(shared, &mut state);
        drop(state);
        ReaderWaits(shared)
    }
}

impl Drop for ReaderWaits<'_> {
    fn drop(&mut self) {
        self.0.lock().reader_waits = false;
    }
}
