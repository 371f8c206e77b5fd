//! Where a reader's bytes come from: a socket (`socket.rs`) or memory ([`super::feeder`]).

use std::io;

/// Where the bytes come from: `recv` appends what is available to `buf` (at most
/// [`super::reader::RECV_BYTES`]), waiting if there is nothing yet; 0 means the peer closed.
pub trait Source {
    fn recv(&mut self, buf: &mut Vec<u8>) -> io::Result<usize>;
}
