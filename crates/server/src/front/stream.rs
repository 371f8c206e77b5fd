//! What a client connection runs on: a TCP or unix socket, or a stream layered over one (TLS,
//! or in tests an in-memory pipe).
//!
//! A connection waits for a keep-alive client's next request without holding a read buffer
//! ([`ClientStream::readable`]). A socket tells readiness itself; a layered stream can only
//! tell by reading, so a [`ReadAhead`] reads a byte ahead and hands it out first.

use std::future::Future;
use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::task::{Context, Poll, Waker};

use bytes::BytesMut;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, Interest};

use super::static_files::file_io::{sendfile_now, when_writable};

pub use crate::read_ahead::ReadAhead;

/// A stream a [`super::conn::Connection`] can serve.
pub trait ClientStream: AsyncRead + AsyncWrite + Unpin {
    /// Resolves when the stream may have bytes (or an end) to read, without consuming them.
    /// (`&mut`: a layered stream can only tell by reading ahead.) A socket may say so when it
    /// has none, as a fresh one does: [`ClientStream::try_read_buf`] tells.
    fn readable(&mut self) -> impl std::future::Future<Output = io::Result<()>>;

    /// Reads what is there now, without waiting: `WouldBlock` if nothing is.
    fn try_read_buf(&mut self, buf: &mut BytesMut) -> io::Result<usize>;

    /// The socket itself, when the stream is one: bytes written to it reach the client as they
    /// are. `None` for a layered stream.
    fn socket(&self) -> Option<BorrowedFd<'_>> {
        None
    }

    /// Whether the client is on this host (over loopback, the host's own address or a unix
    /// socket): there its reads, not a network card, take the bytes out of the socket.
    fn peer_on_this_host(&self) -> bool {
        false
    }

    /// Has the stream tell room for writing only while less than `bytes` of what was written
    /// waits unsent (`TCP_NOTSENT_LOWAT`), so that a writer that always finds room does not run
    /// on while the others wait. Returns the limit the stream had, for the writer to give back
    /// when it is done (the connection's next responses are not such writers). Only a TCP socket
    /// can; any other stream takes no such limit, and had none.
    fn limit_unsent(&self, _bytes: u32) -> io::Result<u32> {
        Ok(u32::MAX)
    }

    /// Sends up to `count` bytes of `file` from `offset` by `sendfile(2)`, waiting for room on
    /// the socket: the file goes from the page cache to the socket without passing through the
    /// front. A stream with no [`ClientStream::socket`] cannot: it takes the file in pieces.
    fn send_file(
        &mut self,
        _file: BorrowedFd<'_>,
        _offset: u64,
        _count: usize,
    ) -> impl std::future::Future<Output = io::Result<usize>> {
        std::future::ready(Err(io::ErrorKind::Unsupported.into()))
    }
}

/// A socket's read of what is there now, through tokio's `poll_read` rather than its `try_read`:
/// a read that leaves room in `buf` shows the socket drained, and `poll_read` then forgets the
/// socket's readiness, so the wait for the next request goes straight to the kernel's event
/// queue. `try_read` keeps the readiness, which costs each keep-alive request one more `recv`
/// that finds nothing.
fn read_now<S: AsyncRead + Unpin>(socket: &mut S, buf: &mut BytesMut) -> io::Result<usize> {
    let read = std::pin::pin!(socket.read_buf(buf));
    match read.poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(read) => read,
        Poll::Pending => Err(io::ErrorKind::WouldBlock.into()),
    }
}

impl ClientStream for tokio::net::TcpStream {
    fn readable(&mut self) -> impl std::future::Future<Output = io::Result<()>> {
        tokio::net::TcpStream::readable(self)
    }

    fn try_read_buf(&mut self, buf: &mut BytesMut) -> io::Result<usize> {
        read_now(self, buf)
    }

    fn socket(&self) -> Option<BorrowedFd<'_>> {
        Some(self.as_fd())
    }

    fn peer_on_this_host(&self) -> bool {
        match (self.peer_addr(), self.local_addr()) {
            (Ok(peer), Ok(local)) => {
                let peer = peer.ip().to_canonical();
                peer.is_loopback() || peer == local.ip().to_canonical()
            }
            _ => false,
        }
    }

    fn limit_unsent(&self, bytes: u32) -> io::Result<u32> {
        let socket = socket2::SockRef::from(self);
        let before = socket.tcp_notsent_lowat()?;
        socket.set_tcp_notsent_lowat(bytes)?;
        Ok(before)
    }

    async fn send_file(&mut self, file: BorrowedFd<'_>, offset: u64, count: usize) -> io::Result<usize> {
        let send = || sendfile_now(self.as_fd(), file, offset, count);
        when_writable(|| self.writable(), || self.try_io(Interest::WRITABLE, send)).await
    }
}

impl ClientStream for tokio::net::UnixStream {
    fn readable(&mut self) -> impl std::future::Future<Output = io::Result<()>> {
        tokio::net::UnixStream::readable(self)
    }

    fn try_read_buf(&mut self, buf: &mut BytesMut) -> io::Result<usize> {
        read_now(self, buf)
    }

    fn socket(&self) -> Option<BorrowedFd<'_>> {
        Some(self.as_fd())
    }

    fn peer_on_this_host(&self) -> bool {
        true
    }

    async fn send_file(&mut self, file: BorrowedFd<'_>, offset: u64, count: usize) -> io::Result<usize> {
        let send = || sendfile_now(self.as_fd(), file, offset, count);
        when_writable(|| self.writable(), || self.try_io(Interest::WRITABLE, send)).await
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> ClientStream for ReadAhead<S> {
    async fn readable(&mut self) -> io::Result<()> {
        self.peek().await.map(drop)
    }

    /// What was read ahead, and what the stream has behind it now: a TLS stream holds the rest
    /// of the record it decrypted for the byte read ahead, so a head that came in one record is
    /// whole after one call, and the connection neither waits again nor grows its buffer for
    /// the rest. After [`ClientStream::readable`], nothing read ahead means the end.
    fn try_read_buf(&mut self, buf: &mut BytesMut) -> io::Result<usize> {
        let ahead = self.take_ahead();
        if ahead.is_empty() {
            return Ok(0);
        }
        buf.extend_from_slice(&ahead);
        match read_now(self, buf) {
            Ok(behind) => Ok(ahead.len() + behind),
            Err(err) if err.kind() == io::ErrorKind::WouldBlock => Ok(ahead.len()),
            Err(err) => Err(err),
        }
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    #[tokio::test]
    async fn only_a_tcp_socket_limits_what_waits_unsent() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = tokio::net::TcpStream::connect(listener.local_addr().unwrap()).await.unwrap();
        let lowat = || socket2::SockRef::from(&client).tcp_notsent_lowat().unwrap();
        let before = lowat();
        assert_eq!(client.limit_unsent(128 * 1024).unwrap(), before);
        assert_eq!(lowat(), 128 * 1024);
        assert_eq!(client.limit_unsent(before).unwrap(), 128 * 1024, "given back");
        assert_eq!(lowat(), before);
        let (near, _far) = tokio::net::UnixStream::pair().unwrap();
        assert_eq!(near.limit_unsent(128 * 1024).unwrap(), u32::MAX);
    }

    #[tokio::test]
    async fn sendfile_puts_the_range_on_the_socket() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, b"0123456789").unwrap();
        let file = std::fs::File::open(&path).unwrap();
        let (mut near, far) = tokio::net::UnixStream::pair().unwrap();
        let sent = near.send_file(file.as_fd(), 3, 4).await.unwrap();
        assert_eq!(sent, 4);
        drop(near);
        let mut got = Vec::new();
        tokio::io::AsyncReadExt::read_to_end(&mut { far }, &mut got).await.unwrap();
        assert_eq!(got, b"3456");
    }

    #[tokio::test]
    async fn a_socket_read_that_drains_it_leaves_nothing_to_read_in_vain() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let mut client = tokio::net::TcpStream::connect(listener.local_addr().unwrap()).await.unwrap();
        let (mut server, _) = listener.accept().await.unwrap();
        client.write_all(b"GET / HTTP/1.1\r\n\r\n").await.unwrap();
        ClientStream::readable(&mut server).await.unwrap();
        let mut buf = BytesMut::with_capacity(4096);
        assert_eq!(ClientStream::try_read_buf(&mut server, &mut buf).unwrap(), 18);
        // The next wait is the kernel's: the socket is not said to be readable again at once.
        {
            let waiting = std::pin::pin!(ClientStream::readable(&mut server));
            assert!(waiting.poll(&mut Context::from_waker(Waker::noop())).is_pending());
        }
        client.write_all(b"more").await.unwrap();
        ClientStream::readable(&mut server).await.unwrap();
        assert_eq!(ClientStream::try_read_buf(&mut server, &mut buf).unwrap(), 4);
    }

    #[tokio::test]
    async fn a_layered_stream_gives_what_came_behind_the_byte_read_ahead() {
        let (mut client, server) = tokio::io::duplex(64);
        let mut stream = ReadAhead::new(server, Bytes::new());
        client.write_all(b"GET / HTTP/1.1\r\n\r\n").await.unwrap();
        stream.readable().await.unwrap();
        let mut buf = BytesMut::with_capacity(64);
        assert_eq!(stream.try_read_buf(&mut buf).unwrap(), 18, "the whole head in one call");
        assert_eq!(&buf[..], b"GET / HTTP/1.1\r\n\r\n");
        // Nothing more has come: the next call waits for it, and then an end reads as one.
        {
            let waiting = std::pin::pin!(stream.readable());
            assert!(waiting.poll(&mut Context::from_waker(Waker::noop())).is_pending());
        }
        drop(client);
        stream.readable().await.unwrap();
        assert_eq!(stream.try_read_buf(&mut buf).unwrap(), 0);
    }

    #[tokio::test]
    async fn readable_keeps_the_byte_it_waited_for() {
        let (mut client, server) = tokio::io::duplex(64);
        let mut stream = ReadAhead::new(server, Bytes::new());
        client.write_all(b"x").await.unwrap();
        stream.readable().await.unwrap();
        let mut byte = [0u8; 1];
        stream.read_exact(&mut byte).await.unwrap();
        assert_eq!(&byte, b"x");
    }
}
