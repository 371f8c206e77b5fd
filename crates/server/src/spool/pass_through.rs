//! Passing through: while the client's connection waits with nothing buffered, the writer writes
//! the body to the client's socket itself, as much as the socket takes at once, and what it does
//! not take goes through the spool behind it (see the module comment of [`super`]). Here is the
//! client's socket as the spool holds it ([`PassThrough`]) and the send on it; the reader sets it
//! up ([`Reader::pass_through`](super::Reader::pass_through)) and the writer writes to it
//! ([`Writer::pass_through`](super::Writer::pass_through)).

use std::io::{self, IoSlice};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use socket2::SockRef;

/// A client's socket the writer may write the body to.
pub(super) struct PassThrough {
    socket: OwnedFd,
    /// Bytes the body may still put on the wire (the rest of its `Content-Length`).
    allowance: u64,
}

impl PassThrough {
    /// `socket`, to take at most `allowance` bytes in all.
    pub(super) fn new(socket: OwnedFd, allowance: u64) -> PassThrough {
        PassThrough { socket, allowance }
    }

    /// Sends the start of `parts`, as much as the socket takes now and the allowance leaves,
    /// without waiting; returns how many bytes went. A socket that fails or is full takes
    /// nothing: the reader, writing the rest itself, sees the same and deals with it.
    pub(super) fn send(&mut self, parts: &[IoSlice<'_>]) -> usize {
        let sent = send_within(self.socket.as_fd(), parts, self.allowance).unwrap_or(0);
        self.allowance -= sent as u64;
        sent
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
