//! The bytes of one connection as the request parser and the body decoder consume them.
//!
//! The reader owns what was received and not consumed yet, so a pipelined request or the
//! bytes after a chunked body are never lost. It pulls more through a [`Source`] only when it
//! needs them; the socket side (and when it may block) is the source's business.

use std::io;

use headway_http1::request::{parse_head, Limits, RequestHead};

use super::source::Source;
use super::HttpError;

/// A head larger than this gets 431. The headway front's own limit is smaller.
pub const MAX_HEAD_BYTES: usize = 64 * 1024;
/// How much one receive asks for.
pub const RECV_BYTES: usize = 64 * 1024;

/// Why a read stopped short.
#[derive(Debug)]
pub enum ReadError {
    /// The request is malformed: answer it with this error.
    Http(HttpError),
    /// The peer closed the connection in the middle of a request.
    PeerClosed,
    /// The socket failed.
    Io(io::Error),
}

impl From<HttpError> for ReadError {
    fn from(error: HttpError) -> Self {
        ReadError::Http(error)
    }
}

impl From<io::Error> for ReadError {
    fn from(error: io::Error) -> Self {
        ReadError::Io(error)
    }
}

#[derive(Debug, Default)]
pub struct Reader {
    buf: Vec<u8>,
    start: usize,
}

impl Reader {
    pub fn new() -> Self {
        Reader::default()
    }

    /// What was received and not consumed yet.
    pub fn pending(&self) -> &[u8] {
        &self.buf[self.start..]
    }

    /// Marks bytes as consumed; they stay in place (and borrowable) until the next fill.
    pub fn consume(&mut self, count: usize) {
        self.start += count;
    }

    /// Receives more; false once the peer closed.
    pub fn fill(&mut self, source: &mut impl Source) -> io::Result<bool> {
        if self.start > 0 {
            self.buf.drain(..self.start);
            self.start = 0;
        }
        Ok(source.recv(&mut self.buf)? > 0)
    }

    /// The next request head; None on a clean close before one. Empty lines before a request
    /// are skipped (RFC 9112 2.2).
    pub fn read_head(&mut self, source: &mut impl Source) -> Result<Option<RequestHead>, ReadError> {
        // The body's size is the app's business: it reads as much as it wants.
        let limits = Limits { max_head: MAX_HEAD_BYTES, max_body: u64::MAX };
        loop {
            if let Some((head, len)) = parse_head(self.pending(), &limits)? {
                self.consume(len);
                return Ok(Some(head));
            }
            let had = self.pending().iter().any(|&b| b != b'\r' && b != b'\n');
            if !self.fill(source)? {
                return if had { Err(ReadError::PeerClosed) } else { Ok(None) };
            }
        }
    }

    /// Up to `limit` bytes (at least one), or none if the peer closed.
    pub fn read_some(&mut self, source: &mut impl Source, limit: usize) -> io::Result<&[u8]> {
        if self.pending().is_empty() && !self.fill(source)? {
            return Ok(&[]);
        }
        let start = self.start;
        let count = self.pending().len().min(limit);
        self.consume(count);
        Ok(&self.buf[start..start + count])
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::http::feeder::{feeder, Feeder};

    /// Everything the reader still has, up to the peer's close.
    pub fn rest(reader: &mut Reader, source: &mut Feeder) -> Vec<u8> {
        let mut all = Vec::new();
        loop {
            let data = reader.read_some(source, 100).unwrap();
            if data.is_empty() {
                return all;
            }
            all.extend_from_slice(data);
        }
    }

    fn head(reader: &mut Reader, source: &mut Feeder) -> Option<RequestHead> {
        reader.read_head(source).unwrap()
    }

    #[test]
    fn read_head_byte_by_byte_with_pipelining() {
        let wire = b"\r\nGET /1 HTTP/1.1\r\nHost: b\r\n\r\n\r\nGET /2 HTTP/1.1\r\nHost: c\r\n\r\nrest";
        let mut source = feeder(wire, 1);
        let mut reader = Reader::new();
        assert_eq!(head(&mut reader, &mut source).unwrap().target, "/1");
        assert_eq!(head(&mut reader, &mut source).unwrap().target, "/2");
        assert_eq!(rest(&mut reader, &mut source), b"rest");
        assert!(head(&mut reader, &mut source).is_none());
    }

    #[test]
    fn read_head_skips_empty_lines_between_requests() {
        for step in [1, 1000] {
            let wire = b"GET /1 HTTP/1.0\r\n\r\n\r\n\r\n\r\nGET /2 HTTP/1.0\r\n\r\n\r\n";
            let mut source = feeder(wire, step);
            let mut reader = Reader::new();
            let heads: Vec<_> = (0..3).map(|_| head(&mut reader, &mut source).map(|head| head.target)).collect();
            assert_eq!(heads, [Some("/1".to_owned()), Some("/2".to_owned()), None], "step {step}");
        }
    }

    #[test]
    fn read_head_peer_closed_mid_head() {
        let result = Reader::new().read_head(&mut feeder(b"GET / HTTP/1.1\r\nHost: a\r\n", 1));
        assert!(matches!(result, Err(ReadError::PeerClosed)));
    }

    #[test]
    fn read_head_too_large() {
        let mut data = b"GET / HTTP/1.1\r\nA: ".to_vec();
        data.extend(std::iter::repeat_n(b'x', 70000));
        let result = Reader::new().read_head(&mut feeder(&data, 4096));
        assert!(matches!(result, Err(ReadError::Http(error)) if error.status == 431));
    }
}
