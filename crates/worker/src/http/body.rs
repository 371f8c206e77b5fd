//! Request bodies as the app reads them: exactly `Content-Length` bytes, or a chunked body
//! decoded as it arrives (trailers are read and dropped). Either can be drained after the
//! response when the app left part of it unread, so the connection can carry the next request.

use super::reader::{ReadError, Reader, Source, RECV_BYTES};
use super::request::MAX_HEADERS;
use super::{trim_blanks, HttpError};

/// An unread body up to this size is read and dropped after the response so the connection
/// can be kept; a larger one costs more than reconnecting, so the connection is closed.
pub const DRAIN_LIMIT: u64 = 1024 * 1024;

#[derive(Debug)]
pub enum Body {
    /// A body of exactly this many bytes still to read.
    Fixed { remaining: u64 },
    /// A chunked body: bytes left in the current chunk, and whether the last chunk was read.
    Chunked { chunk_left: u64, done: bool },
}

impl Body {
    pub fn fixed(length: u64) -> Self {
        Body::Fixed { remaining: length }
    }

    pub fn chunked() -> Self {
        Body::Chunked { chunk_left: 0, done: false }
    }

    /// Appends up to `limit` bytes of the body (at least one) to `out` and returns how many;
    /// 0 at its end.
    pub fn read_some(
        &mut self,
        reader: &mut Reader,
        source: &mut impl Source,
        limit: usize,
        out: &mut Vec<u8>,
    ) -> Result<usize, ReadError> {
        match self {
            Body::Fixed { remaining } => {
                if *remaining == 0 {
                    return Ok(0);
                }
                let data = reader.read_some(source, clamp(limit, *remaining))?;
                if data.is_empty() {
                    return Err(ReadError::PeerClosed);
                }
                out.extend_from_slice(data);
                *remaining -= data.len() as u64;
                Ok(data.len())
            }
            Body::Chunked { chunk_left, done } => {
                while !*done {
                    if *chunk_left > 0 {
                        let data = reader.read_some(source, clamp(limit, *chunk_left))?;
                        if data.is_empty() {
                            return Err(ReadError::PeerClosed);
                        }
                        out.extend_from_slice(data);
                        let got = data.len();
                        *chunk_left -= got as u64;
                        if *chunk_left == 0 && !reader.read_line(source)?.is_empty() {
                            return Err(HttpError::bad_request("bad chunk: data longer than its size").into());
                        }
                        return Ok(got);
                    }
                    let line = reader.read_line(source)?;
                    let size = trim_blanks(line.split(|&b| b == b';').next().unwrap_or_default());
                    if size.is_empty() || size.len() > 15 || !size.iter().all(u8::is_ascii_hexdigit) {
                        return Err(HttpError::bad_request("bad chunk size").into());
                    }
                    let size = std::str::from_utf8(size).ok().and_then(|hex| u64::from_str_radix(hex, 16).ok());
                    *chunk_left = size.ok_or(HttpError::bad_request("bad chunk size"))?;
                    if *chunk_left == 0 {
                        skip_trailers(reader, source)?;
                        *done = true;
                    }
                }
                Ok(0)
            }
        }
    }

    /// Whether draining after the response is hopeless from the start (a known remainder over
    /// the limit); a chunked body's size is found out by draining it.
    pub fn too_large_to_drain(&self, limit: u64) -> bool {
        matches!(self, Body::Fixed { remaining } if *remaining > limit)
    }

    /// Reads and drops the rest if it is at most `limit` bytes; true if the body is done.
    pub fn drain(&mut self, reader: &mut Reader, source: &mut impl Source, limit: u64) -> Result<bool, ReadError> {
        if self.too_large_to_drain(limit) {
            return Ok(false);
        }
        let mut left = i128::from(limit);
        let mut scratch = Vec::with_capacity(RECV_BYTES.min(limit as usize));
        while left >= 0 {
            scratch.clear();
            let got = self.read_some(reader, source, RECV_BYTES, &mut scratch)?;
            if got == 0 {
                return Ok(true);
            }
            if matches!(self, Body::Chunked { .. }) {
                left -= got as i128;
            }
        }
        Ok(false)
    }
}

fn clamp(limit: usize, left: u64) -> usize {
    usize::try_from(left).map_or(limit, |left| left.min(limit))
}

fn skip_trailers(reader: &mut Reader, source: &mut impl Source) -> Result<(), ReadError> {
    for _ in 0..=MAX_HEADERS {
        if reader.read_line(source)?.is_empty() {
            return Ok(());
        }
    }
    Err(HttpError::new(431, "too many trailers").into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::reader::tests::{feeder, rest, Feeder};

    /// The whole body, read `limit` bytes at a time (no read may return more).
    fn read_all(body: &mut Body, reader: &mut Reader, source: &mut Feeder, limit: usize) -> Result<Vec<u8>, ReadError> {
        let mut all = Vec::new();
        loop {
            let before = all.len();
            let got = body.read_some(reader, source, limit, &mut all)?;
            assert!(got <= limit && all.len() == before + got);
            if got == 0 {
                return Ok(all);
            }
        }
    }

    #[test]
    fn fixed_body_stops_at_its_length() {
        let (mut reader, mut source) = (Reader::new(), feeder(b"0123456789NEXT", 4));
        assert_eq!(read_all(&mut Body::fixed(10), &mut reader, &mut source, 3).unwrap(), b"0123456789");
        assert_eq!(rest(&mut reader, &mut source), b"NEXT");
    }

    #[test]
    fn fixed_body_cut_short() {
        let result = read_all(&mut Body::fixed(10), &mut Reader::new(), &mut feeder(b"abc", 1), 3);
        assert!(matches!(result, Err(ReadError::PeerClosed)));
    }

    #[test]
    fn chunked_body_in_any_pieces() {
        let wire = b"4;name=value\r\nWiki\r\n5\r\npedia\r\nE\r\n in\r\n\r\nchunks.\r\n0\r\nA: b\r\nC: d\r\n\r\nNEXT";
        for step in [1, 2, 7, 1000] {
            let (mut reader, mut source) = (Reader::new(), feeder(wire, step));
            let body = read_all(&mut Body::chunked(), &mut reader, &mut source, 3).unwrap();
            assert_eq!(body, b"Wikipedia in\r\n\r\nchunks.", "step {step}");
            assert_eq!(rest(&mut reader, &mut source), b"NEXT");
        }
    }

    #[test]
    fn chunked_body_errors() {
        for wire in [&b"g\r\n"[..], b"-1\r\n", b"\r\n", b"1234567890123456\r\n", b"3\r\nabcd\r\n"] {
            let wire = [wire, b"0\r\n\r\n"].concat();
            let result = read_all(&mut Body::chunked(), &mut Reader::new(), &mut feeder(&wire, 1), 3);
            assert!(matches!(result, Err(ReadError::Http(_))), "{}", String::from_utf8_lossy(&wire));
        }
    }

    #[test]
    fn chunked_body_cut_short() {
        let result = read_all(&mut Body::chunked(), &mut Reader::new(), &mut feeder(b"5\r\nab", 1), 3);
        assert!(matches!(result, Err(ReadError::PeerClosed)));
    }

    #[test]
    fn drain_respects_its_limit() {
        let drain = |mut body: Body, wire: &[u8]| body.drain(&mut Reader::new(), &mut feeder(wire, 1), 10).unwrap();
        assert!(drain(Body::fixed(10), &[b'x'; 10]));
        assert!(!drain(Body::fixed(11), &[b'x'; 11]));
        assert!(drain(Body::chunked(), b"5\r\nxxxxx\r\n0\r\n\r\n"));
        assert!(!drain(Body::chunked(), b"9\r\nxxxxxxxxx\r\n9\r\nxxxxxxxxx\r\n0\r\n\r\n"));
    }
}
