//! The bytes of one connection as the request parser and the body decoders consume them.
//!
//! The reader owns what was received and not consumed yet, so a pipelined request or the
//! bytes after a chunked body are never lost. It pulls more through a [`Source`] only when it
//! needs them; the socket side (and when it may block) is the source's business.

use std::io;

use super::HttpError;

/// A head larger than this gets 431. The headway front's own limit is smaller.
pub const MAX_HEAD_BYTES: usize = 64 * 1024;
/// A chunk-size line or trailer line longer than this gets 400.
pub const MAX_LINE_BYTES: usize = 8 * 1024;
/// How much one receive asks for.
pub const RECV_BYTES: usize = 64 * 1024;

/// Where the bytes come from: `recv` appends what is available to `buf` (at most
/// `RECV_BYTES`), waiting if there is nothing yet; 0 means the peer closed.
pub trait Source {
    fn recv(&mut self, buf: &mut Vec<u8>) -> io::Result<usize>;
}

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
    fn consume(&mut self, count: usize) {
        self.start += count;
    }

    /// Receives more; false once the peer closed.
    fn fill(&mut self, source: &mut impl Source) -> io::Result<bool> {
        if self.start > 0 {
            self.buf.drain(..self.start);
            self.start = 0;
        }
        Ok(source.recv(&mut self.buf)? > 0)
    }

    /// The next request head without its blank line; None on a clean close before one.
    /// Empty lines before a request are skipped (RFC 9112 2.2).
    pub fn read_head(&mut self, source: &mut impl Source) -> Result<Option<Vec<u8>>, ReadError> {
        let mut searched = 0;
        loop {
            let data = self.pending();
            if data.starts_with(b"\r\n") {
                let skip = data.iter().position(|&b| b != b'\r' && b != b'\n').unwrap_or(data.len());
                self.consume(skip);
                searched = 0;
                continue;
            }
            if let Some(end) = memchr::memmem::find(&data[searched..], b"\r\n\r\n").map(|at| at + searched) {
                if end > MAX_HEAD_BYTES {
                    return Err(HttpError::new(431, "request head too large").into());
                }
                let head = data[..end].to_vec();
                self.consume(end + 4);
                return Ok(Some(head));
            }
            if data.len() > MAX_HEAD_BYTES {
                return Err(HttpError::new(431, "request head too large").into());
            }
            searched = data.len().saturating_sub(3);
            let had = !data.is_empty();
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

    /// One CRLF-terminated line without its CRLF.
    pub fn read_line(&mut self, source: &mut impl Source) -> Result<Vec<u8>, ReadError> {
        let mut searched = 0;
        loop {
            let data = self.pending();
            if let Some(end) = memchr::memmem::find(&data[searched..], b"\r\n").map(|at| at + searched) {
                let line = data[..end].to_vec();
                self.consume(end + 2);
                return Ok(line);
            }
            if data.len() > MAX_LINE_BYTES {
                return Err(HttpError::bad_request("line too long in chunked body").into());
            }
            searched = data.len().saturating_sub(1);
            if !self.fill(source)? {
                return Err(ReadError::PeerClosed);
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A source handing out `data` `step` bytes at a time, then end-of-file (peer closed).
    pub struct Feeder {
        data: Vec<u8>,
        at: usize,
        step: usize,
    }

    pub fn feeder(data: &[u8], step: usize) -> Feeder {
        Feeder { data: data.to_vec(), at: 0, step }
    }

    impl Source for Feeder {
        fn recv(&mut self, buf: &mut Vec<u8>) -> io::Result<usize> {
            let end = (self.at + self.step).min(self.data.len());
            buf.extend_from_slice(&self.data[self.at..end]);
            let count = end - self.at;
            self.at = end;
            Ok(count)
        }
    }

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

    fn head(reader: &mut Reader, source: &mut Feeder) -> Option<Vec<u8>> {
        reader.read_head(source).unwrap()
    }

    #[test]
    fn read_head_byte_by_byte_with_pipelining() {
        let mut source = feeder(b"\r\nGET /1 HTTP/1.1\r\nA: b\r\n\r\n\r\nGET /2 HTTP/1.1\r\n\r\nrest", 1);
        let mut reader = Reader::new();
        assert_eq!(head(&mut reader, &mut source).unwrap(), b"GET /1 HTTP/1.1\r\nA: b");
        assert_eq!(head(&mut reader, &mut source).unwrap(), b"GET /2 HTTP/1.1");
        assert_eq!(rest(&mut reader, &mut source), b"rest");
        assert_eq!(head(&mut reader, &mut source), None);
    }

    #[test]
    fn read_head_skips_empty_lines_between_requests() {
        for step in [1, 1000] {
            let mut source = feeder(b"GET /1 HTTP/1.1\r\n\r\n\r\n\r\n\r\nGET /2 HTTP/1.1\r\n\r\n\r\n", step);
            let mut reader = Reader::new();
            let heads: Vec<_> = (0..3).map(|_| head(&mut reader, &mut source)).collect();
            assert_eq!(
                heads,
                [Some(b"GET /1 HTTP/1.1".to_vec()), Some(b"GET /2 HTTP/1.1".to_vec()), None],
                "step {step}"
            );
        }
    }

    #[test]
    fn read_head_peer_closed_mid_head() {
        let result = Reader::new().read_head(&mut feeder(b"GET / HTTP/1.1\r\n", 1));
        assert!(matches!(result, Err(ReadError::PeerClosed)));
    }

    #[test]
    fn read_head_too_large() {
        let mut data = b"GET / HTTP/1.1\r\nA: ".to_vec();
        data.extend(std::iter::repeat_n(b'x', 70000));
        let result = Reader::new().read_head(&mut feeder(&data, 4096));
        assert!(matches!(result, Err(ReadError::Http(HttpError { status: 431, .. }))));
    }
}
