//! One client connection: a TCP or unix stream (TLS over it for `https://`), its read buffer,
//! and the two operations the load loop needs, "write these request bytes" and "read the next
//! response". (The WebSocket mode opens the same streams and hands them to its WebSocket client.)
//!
//! The buffer is fixed-size unless a response head does not fit, so memory per connection stays
//! small however large the bodies are (bodies are counted by the parser and dropped).

use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpStream, UnixStream};

use crate::http1::{ProtocolError, ResponseDone, ResponseParser};

/// Where connections go: the socket address of one URL's host, or the `--unix-socket` path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    Tcp(SocketAddr),
    Unix(PathBuf),
}

impl std::fmt::Display for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Endpoint::Tcp(addr) => write!(f, "{addr}"),
            Endpoint::Unix(path) => write!(f, "unix:{}", path.display()),
        }
    }
}

impl Endpoint {
    /// Opens a connection to the endpoint.
    pub async fn connect(&self) -> io::Result<Stream> {
        match self {
            Endpoint::Tcp(addr) => {
                let stream = TcpStream::connect(addr).await?;
                // Requests are written whole; waiting for an ACK before the next one only adds
                // latency that belongs to the client.
                stream.set_nodelay(true)?;
                Ok(Stream::Tcp(stream))
            }
            Endpoint::Unix(path) => Ok(Stream::Unix(UnixStream::connect(path).await?)),
        }
    }
}

const READ_BUFFER: usize = 16 * 1024;
/// A response head larger than this is refused rather than buffered without bound.
const MAX_HEAD_BUFFER: usize = 1024 * 1024;

/// A TCP or unix connection, or TLS over one, read and written alike.
pub enum Stream {
    Tcp(TcpStream),
    Unix(UnixStream),
    Tls(Box<tokio_rustls::client::TlsStream<Stream>>),
}

impl AsyncRead for Stream {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Tcp(stream) => Pin::new(stream).poll_read(cx, buf),
            Stream::Unix(stream) => Pin::new(stream).poll_read(cx, buf),
            Stream::Tls(stream) => Pin::new(stream).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Tcp(stream) => Pin::new(stream).poll_write(cx, data),
            Stream::Unix(stream) => Pin::new(stream).poll_write(cx, data),
            Stream::Tls(stream) => Pin::new(stream).poll_write(cx, data),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Tcp(stream) => Pin::new(stream).poll_flush(cx),
            Stream::Unix(stream) => Pin::new(stream).poll_flush(cx),
            Stream::Tls(stream) => Pin::new(stream).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Tcp(stream) => Pin::new(stream).poll_shutdown(cx),
            Stream::Unix(stream) => Pin::new(stream).poll_shutdown(cx),
            Stream::Tls(stream) => Pin::new(stream).poll_shutdown(cx),
        }
    }
}

/// How reading a response failed.
#[derive(Debug)]
pub enum ReadError {
    /// The peer closed before sending any byte of this response. On a connection that already
    /// carried responses this is usually an idle keep-alive connection the server let go.
    ClosedBeforeResponse,
    Protocol(ProtocolError),
    /// `before_response`: no byte of this response had arrived when the error came.
    Io {
        error: io::Error,
        before_response: bool,
    },
}

/// A response as the connection saw it: the parser's summary and when its first byte arrived.
#[derive(Debug, Clone, Copy)]
pub struct Response {
    pub done: ResponseDone,
    pub first_byte_at: Instant,
}

pub struct Connection {
    stream: Stream,
    buf: Vec<u8>,
    start: usize,
    end: usize,
    /// When the bytes now in `buf[start..end]` arrived (all come from the latest read).
    last_read_at: Instant,
    responses_read: u64,
}

impl Connection {
    pub fn new(stream: Stream) -> Connection {
        Connection {
            stream,
            buf: vec![0; READ_BUFFER],
            start: 0,
            end: 0,
            last_read_at: Instant::now(),
            responses_read: 0,
        }
    }

    /// True once the connection has carried a complete response (so a close before the next
    /// response is the classic stale keep-alive race, not a server failure).
    pub fn reused(&self) -> bool {
        self.responses_read > 0
    }

    pub async fn write_all(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.stream.write_all(bytes).await
    }

    /// Reads until `parser` (already told about the request with `begin`) completes a response.
    pub async fn read_response(&mut self, parser: &mut ResponseParser) -> Result<Response, ReadError> {
        let mut first_byte_at = (self.start < self.end).then_some(self.last_read_at);
        loop {
            if self.start < self.end {
                let (used, done) = parser.advance(&self.buf[self.start..self.end]).map_err(ReadError::Protocol)?;
                self.start += used;
                if self.start == self.end {
                    self.start = 0;
                    self.end = 0;
                }
                if let Some(done) = done {
                    self.responses_read += 1;
                    let first_byte_at = first_byte_at.unwrap_or(self.last_read_at);
                    return Ok(Response { done, first_byte_at });
                }
            }
            self.make_room()?;
            let before_response = self.start == self.end && !parser.started();
            let n = self.read_more().await.map_err(|error| ReadError::Io { error, before_response })?;
            if n == 0 {
                return self.at_eof(parser, first_byte_at);
            }
            self.last_read_at = Instant::now();
            first_byte_at.get_or_insert(self.last_read_at);
        }
    }

    fn at_eof(&mut self, parser: &mut ResponseParser, first_byte_at: Option<Instant>) -> Result<Response, ReadError> {
        if self.start == self.end && !parser.started() {
            return Err(ReadError::ClosedBeforeResponse);
        }
        let done = parser.finish_at_eof().map_err(ReadError::Protocol)?;
        self.responses_read += 1;
        Ok(Response { done, first_byte_at: first_byte_at.unwrap_or(self.last_read_at) })
    }

    async fn read_more(&mut self) -> io::Result<usize> {
        let n = self.stream.read(&mut self.buf[self.end..]).await?;
        self.end += n;
        Ok(n)
    }

    /// Makes space after `end`: moves unparsed bytes to the front, or grows the buffer when a
    /// single head or line fills it.
    fn make_room(&mut self) -> Result<(), ReadError> {
        if self.end < self.buf.len() {
            return Ok(());
        }
        if self.start > 0 {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
            return Ok(());
        }
        if self.buf.len() >= MAX_HEAD_BUFFER {
            return Err(ReadError::Protocol(ProtocolError::HeadTooLarge(MAX_HEAD_BUFFER)));
        }
        self.buf.resize(self.buf.len() * 2, 0);
        Ok(())
    }
}
