//! Request bodies handed to the worker as files, not copied through the ring.
//!
//! A large upload is already in a temporary file when its request leaves the queue (the front
//! reads a body whole before it queues). Copying that file through the ring costs the front a
//! read of the file and a copy into the ring, and the worker a copy out of it, all while the app
//! waits. Instead the front passes the file's descriptor over a unix datagram socket the worker
//! inherited (SCM_RIGHTS), and writes a [`crate::message::BODY_FILE`] record naming it by a token
//! and saying which bytes of it are the body: the worker reads them straight from the page cache.
//!
//! The socket is the worker process's, not a slot's, so any of its threads may receive a
//! descriptor meant for another: the [`FileInbox`] keeps those until their thread asks. The front
//! sends the descriptor before it writes the record, so a worker that reads the record always
//! finds its descriptor already in the socket.

use std::collections::HashMap;
use std::io::{self, IoSlice};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::sync::Mutex;

use crate::error::HopError;

/// A datagram socket pair: the front's end and the worker's.
pub(crate) fn pair() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: socketpair writes two descriptors into the array it is given.
    if unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0, fds.as_mut_ptr()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: socketpair succeeded: both descriptors are new and ours.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Sends `data` with the descriptors `fds` (SCM_RIGHTS) in one datagram. `flags` are sendmsg's
/// (`MSG_DONTWAIT` for a sender that must not block).
pub fn send_with_fds(socket: BorrowedFd<'_>, data: &[u8], fds: &[RawFd], flags: libc::c_int) -> io::Result<()> {
    let payload = std::mem::size_of_val(fds) as u32;
    // SAFETY: CMSG_SPACE only computes a size.
    let space = unsafe { libc::CMSG_SPACE(payload) } as usize;
    let mut control = vec![0u8; space];
    let iov = [IoSlice::new(data)];
    // SAFETY: msghdr is plain data; every pointer set below outlives the sendmsg call, and the
    // control buffer is CMSG_SPACE bytes, room for one header and the descriptors.
    unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = iov.as_ptr() as *mut libc::iovec;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = space as _;
        let header = libc::CMSG_FIRSTHDR(&msg);
        (*header).cmsg_level = libc::SOL_SOCKET;
        (*header).cmsg_type = libc::SCM_RIGHTS;
        (*header).cmsg_len = libc::CMSG_LEN(payload) as _;
        std::ptr::copy_nonoverlapping(fds.as_ptr(), libc::CMSG_DATA(header).cast::<RawFd>(), fds.len());
        if libc::sendmsg(socket.as_raw_fd(), &msg, flags | libc::MSG_NOSIGNAL) < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Receives one token and its descriptor, without waiting. `Ok(None)`: nothing is there.
fn receive_one(socket: BorrowedFd<'_>) -> Result<Option<(u64, OwnedFd)>, HopError> {
    let mut data = [0u8; 8];
    // SAFETY: CMSG_SPACE only computes a size.
    let space = unsafe { libc::CMSG_SPACE(std::mem::size_of::<RawFd>() as u32) } as usize;
    let mut control = vec![0u8; space];
    let mut iov = libc::iovec { iov_base: data.as_mut_ptr().cast(), iov_len: data.len() };
    // SAFETY: msghdr is plain data; its buffers outlive the call. The kernel writes at most one
    // descriptor's header into `control` (more would be cut, MSG_CTRUNC, and closed by it).
    let (read, fd) = unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = space as _;
        let read = libc::recvmsg(socket.as_raw_fd(), &mut msg, libc::MSG_DONTWAIT | libc::MSG_CMSG_CLOEXEC);
        if read < 0 {
            let error = io::Error::last_os_error();
            return if error.kind() == io::ErrorKind::WouldBlock { Ok(None) } else { Err(error.into()) };
        }
        let header = libc::CMSG_FIRSTHDR(&msg);
        let fd =
            (!header.is_null() && (*header).cmsg_level == libc::SOL_SOCKET && (*header).cmsg_type == libc::SCM_RIGHTS)
                .then(|| OwnedFd::from_raw_fd(std::ptr::read_unaligned(libc::CMSG_DATA(header).cast::<RawFd>())));
        (read as usize, fd)
    };
    match (read, fd) {
        (8, Some(fd)) => Ok(Some((u64::from_le_bytes(data), fd))),
        _ => Err(HopError::Corrupt("a body file message without its file")),
    }
}

/// Reads up to `max` bytes of `file` at `offset` onto the end of `out`, straight into its spare
/// capacity (zeroing it first, as a safe read needs, would cost as much again as the read).
/// Returns how many: 0 at the end of the file.
pub fn read_at(file: BorrowedFd<'_>, offset: u64, max: usize, out: &mut Vec<u8>) -> io::Result<usize> {
    out.reserve(max);
    loop {
        let spare = &mut out.spare_capacity_mut()[..max];
        // SAFETY: the kernel writes at most `max` bytes into the spare capacity reserved for them.
        let read = unsafe { libc::pread(file.as_raw_fd(), spare.as_mut_ptr().cast(), max, offset as libc::off_t) };
        if read >= 0 {
            // SAFETY: `read` more bytes are initialised.
            unsafe { out.set_len(out.len() + read as usize) };
            return Ok(read as usize);
        }
        let error = io::Error::last_os_error();
        if error.kind() != io::ErrorKind::Interrupted {
            return Err(error);
        }
    }
}

/// The front's end: sends a body's file, named by a token the worker will ask for.
pub(crate) struct FileSender(OwnedFd);

impl FileSender {
    pub(crate) fn new(socket: OwnedFd) -> FileSender {
        FileSender(socket)
    }

    /// Sends `file` as `token`. Never blocks: a full socket is an error, and the body goes
    /// through the ring instead.
    pub(crate) fn send(&self, token: u64, file: BorrowedFd<'_>) -> io::Result<()> {
        send_with_fds(self.0.as_fd(), &token.to_le_bytes(), &[file.as_raw_fd()], libc::MSG_DONTWAIT)
    }
}

/// The worker's end: the descriptors the front sent, kept by token until asked for.
pub(crate) struct FileInbox {
    socket: OwnedFd,
    /// Descriptors received while looking for another's.
    kept: Mutex<HashMap<u64, OwnedFd>>,
}

impl FileInbox {
    pub(crate) fn new(socket: OwnedFd) -> FileInbox {
        FileInbox { socket, kept: Mutex::default() }
    }

    /// The descriptor sent as `token`. It was sent before the record that names it, so it is
    /// here by now; if it is not, the front is broken.
    pub(crate) fn take(&self, token: u64) -> Result<OwnedFd, HopError> {
        let mut kept = self.kept.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(fd) = kept.remove(&token) {
            return Ok(fd);
        }
        loop {
            match receive_one(self.socket.as_fd())? {
                None => return Err(HopError::Corrupt("a body file the front did not send")),
                Some((received, fd)) if received == token => return Ok(fd),
                Some((received, fd)) => {
                    kept.insert(received, fd);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Seek, Write};

    fn file_with(text: &[u8]) -> std::fs::File {
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(text).unwrap();
        file
    }

    fn read_all(fd: OwnedFd) -> Vec<u8> {
        let mut file = std::fs::File::from(fd);
        file.rewind().unwrap();
        let mut text = Vec::new();
        file.read_to_end(&mut text).unwrap();
        text
    }

    #[test]
    fn files_are_found_by_token_whatever_order_they_are_asked_for_in() {
        let (front, worker) = pair().unwrap();
        let (sender, inbox) = (FileSender::new(front), FileInbox::new(worker));
        let (first, second) = (file_with(b"first"), file_with(b"second"));
        sender.send(1, first.as_fd()).unwrap();
        sender.send(2, second.as_fd()).unwrap();
        assert_eq!(read_all(inbox.take(2).unwrap()), b"second");
        assert_eq!(read_all(inbox.take(1).unwrap()), b"first");
    }

    #[test]
    fn reads_at_an_offset_append_and_stop_at_the_end() {
        let file = file_with(b"0123456789");
        let mut out = b"got ".to_vec();
        assert_eq!(read_at(file.as_fd(), 7, 100, &mut out).unwrap(), 3);
        assert_eq!(read_at(file.as_fd(), 2, 2, &mut out).unwrap(), 2);
        assert_eq!(read_at(file.as_fd(), 10, 5, &mut out).unwrap(), 0);
        assert_eq!(out, b"got 78923");
    }

    #[test]
    fn a_token_never_sent_is_refused_not_waited_for() {
        let (front, worker) = pair().unwrap();
        let (_sender, inbox) = (FileSender::new(front), FileInbox::new(worker));
        assert!(matches!(inbox.take(7), Err(HopError::Corrupt(_))));
    }
}
