//! A stream whose first bytes were already read, and are read again first: the bytes that
//! followed a PROXY protocol header (they belong to the TLS handshake), a byte read to see
//! whether a client is still there, what a worker sent after its `101` along with the head.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Buf, Bytes};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};

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

impl<S: AsyncRead + Unpin> ReadAhead<S> {
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
}
