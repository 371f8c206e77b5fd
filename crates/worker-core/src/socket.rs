//! A non-blocking socket used by a slot thread that holds the interpreter's lock: every operation
//! is tried at once, and only when it would block does the thread let go of the lock and wait in
//! `poll` for the socket to be ready (the other slot threads run the app meanwhile).
//!
//! Releasing the lock around every system call, as Python's own socket module does, costs a
//! hand-over per call; here a request that is already waiting costs none.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use crate::runtime::{unlocked, Runtime};

use crate::http::reader::RECV_BYTES;
use crate::http::source::Source;

/// Waits until `fd` is ready for `events` (or hung up), without the interpreter's lock.
pub fn wait(runtime: &dyn Runtime, fd: RawFd, events: libc::c_short) -> io::Result<()> {
    unlocked(runtime, || poll_one(fd, events))
}

fn poll_one(fd: RawFd, events: libc::c_short) -> io::Result<()> {
    let mut entry = libc::pollfd { fd, events, revents: 0 };
    loop {
        // SAFETY: one valid pollfd, and its count.
        if unsafe { libc::poll(&mut entry, 1, -1) } >= 0 {
            return Ok(());
        }
        let error = io::Error::last_os_error();
        if error.kind() != io::ErrorKind::Interrupted {
            return Err(error);
        }
    }
}

/// Runs a system call until it neither was interrupted nor would block; waits for `events`
/// without the interpreter's lock when it would.
fn retry(
    runtime: &dyn Runtime,
    fd: RawFd,
    events: libc::c_short,
    mut call: impl FnMut() -> isize,
) -> io::Result<usize> {
    loop {
        let result = call();
        if result >= 0 {
            return Ok(result as usize);
        }
        let error = io::Error::last_os_error();
        match error.kind() {
            io::ErrorKind::Interrupted => {}
            io::ErrorKind::WouldBlock => wait(runtime, fd, events)?,
            _ => return Err(error),
        }
    }
}

/// A connected stream socket in non-blocking mode.
pub struct Socket {
    fd: OwnedFd,
}

impl Socket {
    pub fn new(fd: OwnedFd) -> Self {
        Socket { fd }
    }

    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Appends up to [`RECV_BYTES`] to `buf`; 0 once the peer closed.
    pub fn recv(&self, runtime: &dyn Runtime, buf: &mut Vec<u8>) -> io::Result<usize> {
        buf.reserve(RECV_BYTES);
        let spare = buf.spare_capacity_mut();
        let fd = self.fd();
        let received = retry(runtime, fd, libc::POLLIN, || {
            // SAFETY: writes at most `spare.len()` bytes into the vector's spare capacity.
            unsafe { libc::recv(fd, spare.as_mut_ptr().cast(), spare.len(), 0) }
        })?;
        // SAFETY: recv initialised the first `received` bytes of the spare capacity.
        unsafe { buf.set_len(buf.len() + received) };
        Ok(received)
    }

    /// Sends all of `data`.
    pub fn send_all(&self, runtime: &dyn Runtime, mut data: &[u8]) -> io::Result<()> {
        let fd = self.fd();
        while !data.is_empty() {
            let sent = retry(runtime, fd, libc::POLLOUT, || {
                // SAFETY: reads `data.len()` bytes from a live slice. MSG_NOSIGNAL: a peer that
                // went away is an EPIPE error, not a SIGPIPE.
                unsafe { libc::send(fd, data.as_ptr().cast(), data.len(), libc::MSG_NOSIGNAL) }
            })?;
            data = &data[sent..];
        }
        Ok(())
    }

    /// Sends up to `count` bytes of the file `file` from `offset`; returns how many were sent
    /// (fewer if the file ended first).
    pub fn send_file(&self, runtime: &dyn Runtime, file: RawFd, offset: u64, count: u64) -> io::Result<u64> {
        let fd = self.fd();
        let mut position = libc::off_t::try_from(offset).map_err(|_| io::ErrorKind::InvalidInput)?;
        let mut sent = 0;
        while sent < count {
            let chunk = usize::try_from(count - sent).unwrap_or(usize::MAX).min(1 << 30);
            let done = retry(runtime, fd, libc::POLLOUT, || {
                // SAFETY: `position` is a live off_t that sendfile advances.
                unsafe { libc::sendfile(fd, file, &mut position, chunk) }
            })?;
            if done == 0 {
                break;
            }
            sent += done as u64;
        }
        Ok(sent)
    }

    /// The receiving side of a socket as the request reader pulls from it.
    pub fn source<'a>(&'a self, runtime: &'a dyn Runtime) -> SocketSource<'a> {
        SocketSource { socket: self, runtime }
    }
}

pub struct SocketSource<'a> {
    socket: &'a Socket,
    runtime: &'a dyn Runtime,
}

impl Source for SocketSource<'_> {
    fn recv(&mut self, buf: &mut Vec<u8>) -> io::Result<usize> {
        self.socket.recv(self.runtime, buf)
    }
}
