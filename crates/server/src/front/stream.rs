//! What a client connection runs on: a TCP or unix socket, or a stream layered over one (TLS,
//! or in tests an in-memory pipe).
//!
//! A connection waits for a keep-alive client's next request without holding a read buffer
//! ([`ClientStream::readable`]). A socket tells readiness itself; a layered stream can only
//! tell by reading, so a [`ReadAhead`] reads a byte ahead and hands it out first.

use std::io;

use tokio::io::{AsyncRead, AsyncWrite};

pub use crate::read_ahead::ReadAhead;

/// A stream a [`super::conn::Connection`] can serve.
pub trait ClientStream: AsyncRead + AsyncWrite + Unpin {
    /// Resolves when the stream has bytes (or an end) to read, without consuming them.
    /// (`&mut`: a layered stream can only tell by reading ahead.)
    fn readable(&mut self) -> impl std::future::Future<Output = io::Result<()>>;
}

impl ClientStream for tokio::net::TcpStream {
    fn readable(&mut self) -> impl std::future::Future<Output = io::Result<()>> {
        tokio::net::TcpStream::readable(self)
    }
}

impl ClientStream for tokio::net::UnixStream {
    fn readable(&mut self) -> impl std::future::Future<Output = io::Result<()>> {
        tokio::net::UnixStream::readable(self)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> ClientStream for ReadAhead<S> {
    async fn readable(&mut self) -> io::Result<()> {
        self.peek().await.map(drop)
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
