//! What a client connection runs on: a TCP or unix socket, or a stream layered over one (TLS,
//! or in tests an in-memory pipe).
//!
//! A connection waits for a keep-alive client's next request without holding a read buffer
//! ([`ClientStream::readable`]). A socket tells readiness itself; a layered stream can only
//! tell by reading, so [`ReadAhead`] reads a byte ahead and hands it out first. It also hands
//! out first the bytes read before the stream was layered: those that followed a PROXY
//! protocol header, which belong to the TLS handshake.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Buf, Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};

/// A stream a [`super::conn::Connection`] can serve.
pub trait ClientStream: AsyncRead + AsyncWrite + Unpin {
    /// Resolves when the stream may have bytes (or an end) to read, without consuming them.
    /// (`&mut`: a layered stream can only tell by reading ahead.) A socket may say so when it
    /// has none, as a fresh one does: [`ClientStream::try_read_buf`] tells.
    fn readable(&mut self) -> impl std::future::Future<Output = io::Result<()>>;

    /// Reads what is there now, without waiting: `WouldBlock` if nothing is.
    fn try_read_buf(&mut self, buf: &mut BytesMut) -> io::Result<usize>;
}

impl ClientStream for tokio::net::TcpStream {
    fn readable(&mut self) -> impl std::future::Future<Output = io::Result<()>> {
        tokio::net::TcpStream::readable(self)
    }

    fn try_read_buf(&mut self, buf: &mut BytesMut) -> io::Result<usize> {
        tokio::net::TcpStream::try_read_buf(self, buf)
    }
}

impl ClientStream for tokio::net::UnixStream {
    fn readable(&mut self) -> impl std::future::Future<Output = io::Result<()>> {
        tokio::net::UnixStream::readable(self)
    }

    fn try_read_buf(&mut self, buf: &mut BytesMut) -> io::Result<usize> {
        tokio::net::UnixStream::try_read_buf(self, buf)
    }
}

/// A stream whose first bytes were already read: they are read again first.
pub struct ReadAhead<S> {
    inner: S,
    ahead: Bytes,
}

impl<S> ReadAhead<S> {
    pub fn new(inner: S, ahead: Bytes) -> ReadAhead<S> {
        ReadAhead { inner, ahead }
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> ReadAhead<S> {
    /// The next byte, left to be read again. `None`: the stream ended.
    pub async fn peek(&mut self) -> io::Result<Option<u8>> {
        if self.ahead.is_empty() {
            let mut byte = [0u8; 1];
            let read = self.inner.read(&mut byte).await?;
            self.ahead = Bytes::copy_from_slice(&byte[..read]);
        }
        Ok(self.ahead.first().copied())
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> ClientStream for ReadAhead<S> {
    async fn readable(&mut self) -> io::Result<()> {
        self.peek().await.map(drop)
    }

    /// What was read ahead; after [`ClientStream::readable`], nothing left means the end.
    fn try_read_buf(&mut self, buf: &mut BytesMut) -> io::Result<usize> {
        let ahead = std::mem::take(&mut self.ahead);
        buf.extend_from_slice(&ahead);
        Ok(ahead.len())
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for ReadAhead<S> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        if !self.ahead.is_empty() {
            let len = self.ahead.len().min(buf.remaining());
            buf.put_slice(&self.ahead[..len]);
            self.ahead.advance(len);
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for ReadAhead<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, data)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::AsyncWriteExt;

    use super::*;

    #[tokio::test]
    async fn bytes_read_ahead_come_first_and_a_peek_consumes_nothing() {
        let (mut client, server) = tokio::io::duplex(64);
        let mut stream = ReadAhead::new(server, Bytes::from_static(b"ab"));
        client.write_all(b"cd").await.unwrap();
        drop(client);
        assert_eq!(stream.peek().await.unwrap(), Some(b'a'));
        let mut all = Vec::new();
        stream.read_to_end(&mut all).await.unwrap();
        assert_eq!(all, b"abcd");
        assert_eq!(stream.peek().await.unwrap(), None);
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
