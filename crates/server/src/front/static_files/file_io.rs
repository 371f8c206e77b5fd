//! The system calls that move a file's bytes: `sendfile(2)` from the page cache to a socket,
//! waiting for room on the socket's readiness, and a piece read for a stream that must see the
//! bytes (TLS, HTTP/2).

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::os::unix::fs::FileExt;

use bytes::BytesMut;

/// The piece of a file read at a time when it cannot go by `sendfile`.
pub const PIECE: usize = 64 * 1024;

/// Reads `len` bytes of `file` from `offset` onto the end of `out` (fewer only at its end), and
/// says how many: a small file goes straight into the buffer its head is written from.
pub fn read_into(file: &File, offset: u64, len: usize, out: &mut BytesMut) -> io::Result<usize> {
    let start = out.len();
    out.resize(start + len, 0);
    let mut read = 0;
    while read < len {
        match file.read_at(&mut out[start + read..], offset + read as u64) {
            Ok(0) => break,
            Ok(n) => read += n,
            Err(err) => {
                out.truncate(start);
                return Err(err);
            }
        }
    }
    out.truncate(start + read);
    Ok(read)
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_are_read_from_their_offset_and_stop_at_the_end() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, b"0123456789").unwrap();
        let file = File::open(&path).unwrap();
        let mut out = BytesMut::from("head:");
        assert_eq!(read_into(&file, 2, 3, &mut out).unwrap(), 3);
        assert_eq!(read_into(&file, 8, 5, &mut out).unwrap(), 2);
        assert_eq!(read_into(&file, 10, 5, &mut out).unwrap(), 0);
        assert_eq!(out, "head:23489");
    }
}
