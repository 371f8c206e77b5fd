//! Moving a file's bytes to a socket: `sendfile(2)` from the page cache, waiting for room on the
//! socket's readiness, and the piece read at a time where the bytes pass through the front.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

/// The piece of a file read at a time when it does not go by `sendfile`.
pub const PIECE: usize = 64 * 1024;

/// One `sendfile(2)` of up to `count` bytes of `file` from `offset` to `socket`, now: a full
/// socket is `WouldBlock`.
pub fn sendfile_now(socket: BorrowedFd<'_>, file: BorrowedFd<'_>, offset: u64, count: usize) -> io::Result<usize> {
    let mut offset = libc::off_t::try_from(offset).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: both descriptors are open for the call (borrowed), and `offset` is ours.
    let sent = unsafe { libc::sendfile(socket.as_raw_fd(), file.as_raw_fd(), &mut offset, count) };
    if sent < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(sent as usize)
}

/// Runs `send` once `ready` says the socket has room, until it does not find it full.
pub async fn when_writable<R>(
    mut ready: impl FnMut() -> R,
    mut send: impl FnMut() -> io::Result<usize>,
) -> io::Result<usize>
where
    R: std::future::Future<Output = io::Result<()>>,
{
    loop {
        ready().await?;
        match send() {
            Err(err) if err.kind() == io::ErrorKind::WouldBlock => continue,
            sent => return sent,
        }
    }
}
