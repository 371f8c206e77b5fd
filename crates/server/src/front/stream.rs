//! What a client connection runs on: a TCP or unix socket, or a stream layered over one (TLS,
//! or in tests an in-memory pipe).
//!
//! A connection waits for a keep-alive client's next request without holding a read buffer
//! ([`ClientStream::readable`]). A socket tells readiness itself; a layered stream can only
//! tell by reading, so a [`ReadAhead`] reads a byte ahead and hands it out first.

use std::io;
use std::os::fd::{AsFd, BorrowedFd};

use bytes::BytesMut;
use tokio::io::{AsyncRead, AsyncWrite, Interest};

use super::static_files::send::{sendfile_now, when_writable};

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

impl ClientStream for tokio::net::TcpStream {
    fn readable(&mut self) -> impl std::future::Future<Output = io::Result<()>> {
        tokio::net::TcpStream::readable(self)
    }

    fn try_read_buf(&mut self, buf: &mut BytesMut) -> io::Result<usize> {
        tokio::net::TcpStream::try_read_buf(self, buf)
    }

    fn socket(&self) -> Option<BorrowedFd<'_>> {
        Some(self.as_fd())
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
        tokio::net::UnixStream::try_read_buf(self, buf)
    }

    fn socket(&self) -> Option<BorrowedFd<'_>> {
        Some(self.as_fd())
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

    /// What was read ahead; after [`ClientStream::readable`], nothing left means the end.
    fn try_read_buf(&mut self, buf: &mut BytesMut) -> io::Result<usize> {
        let ahead = self.take_ahead();
        buf.extend_from_slice(&ahead);
        Ok(ahead.len())
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

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
