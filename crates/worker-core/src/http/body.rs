//! Request bodies as the app reads them: exactly `Content-Length` bytes, or a chunked body
//! decoded as it arrives (trailers are read and dropped), by `headway_http1`'s decoder. Either
//! can be drained after the response when the app left part of it unread, so the connection can
//! carry the next request.

use headway_http1::body::{BodyDecoder, BodyKind};

use super::reader::{ReadError, Reader, RECV_BYTES};
use super::source::Source;

/// An unread body up to this size is read and dropped after the response so the connection
/// can be kept; a larger one costs more than reconnecting, so the connection is closed.
pub const DRAIN_LIMIT: u64 = 1024 * 1024;

#[derive(Debug)]
pub struct Body {
    kind: BodyKind,
    decoder: BodyDecoder,
}

impl Body {
    /// The body of a request framed as `kind`; `None` for a request without one.
    pub fn of(kind: BodyKind) -> Option<Body> {
        let decoder = BodyDecoder::new(kind, u64::MAX);
        (!decoder.is_done()).then_some(Body { kind, decoder })
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
        while !self.decoder.is_done() {
            let pending = reader.pending();
            let decoded = self.decoder.decode(&pending[..pending.len().min(limit)])?;
            out.extend_from_slice(&pending[decoded.data.clone()]);
            reader.consume(decoded.consumed);
            if !decoded.data.is_empty() {
                return Ok(decoded.data.len());
            }
            if decoded.consumed == 0 && !reader.fill(source)? {
                return Err(ReadError::PeerClosed);
            }
        }
        Ok(0)
    }

    /// Whether draining after the response is hopeless from the start (a known remainder over
    /// the limit); a chunked body's size is found out by draining it.
    pub fn too_large_to_drain(&self, limit: u64) -> bool {
        matches!(self.kind, BodyKind::Length(length) if length - self.decoder.decoded() > limit)
    }

    /// Reads and drops the rest if it is at most `limit` bytes; true if the body is done.
    pub fn drain(&mut self, reader: &mut Reader, source: &mut impl Source, limit: u64) -> Result<bool, ReadError> {
        if self.too_large_to_drain(limit) {
            return Ok(false);
        }
        let start = self.decoder.decoded();
        let mut scratch = Vec::with_capacity(RECV_BYTES.min(limit as usize));
        while self.decoder.decoded() - start <= limit {
            scratch.clear();
            if self.read_some(reader, source, RECV_BYTES, &mut scratch)? == 0 {
                return Ok(true);
            }
        }
        Ok(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::feeder::{feeder, Feeder};
    use crate::http::reader::tests::rest;

    /// The whole body, read `limit` bytes at a time (no read may return more).
    fn fixed(length: u64) -> Body {
        Body::of(BodyKind::Length(length)).unwrap()
    }

    fn chunked() -> Body {
        Body::of(BodyKind::Chunked).unwrap()
    }

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
        assert_eq!(read_all(&mut fixed(10), &mut reader, &mut source, 3).unwrap(), b"0123456789");
        assert_eq!(rest(&mut reader, &mut source), b"NEXT");
    }

    #[test]
    fn fixed_body_cut_short() {
        let result = read_all(&mut fixed(10), &mut Reader::new(), &mut feeder(b"abc", 1), 3);
        assert!(matches!(result, Err(ReadError::PeerClosed)));
    }

    #[test]
    fn chunked_body_in_any_pieces() {
        let wire = b"4;name=value\r\nWiki\r\n5\r\npedia\r\nE\r\n in\r\n\r\nchunks.\r\n0\r\nA: b\r\nC: d\r\n\r\nNEXT";
        for step in [1, 2, 7, 1000] {
            let (mut reader, mut source) = (Reader::new(), feeder(wire, step));
            let body = read_all(&mut chunked(), &mut reader, &mut source, 3).unwrap();
            assert_eq!(body, b"Wikipedia in\r\n\r\nchunks.", "step {step}");
            assert_eq!(rest(&mut reader, &mut source), b"NEXT");
        }
    }

    #[test]
    fn chunked_body_errors() {
        for wire in [&b"g\r\n"[..], b"-1\r\n", b"\r\n", b"12345678901234567\r\n", b"3\r\nabcd\r\n"] {
            let wire = [wire, b"0\r\n\r\n"].concat();
            let result = read_all(&mut chunked(), &mut Reader::new(), &mut feeder(&wire, 1), 3);
            assert!(matches!(result, Err(ReadError::Http(_))), "{}", String::from_utf8_lossy(&wire));
        }
    }

    #[test]
    fn chunked_body_cut_short() {
        let result = read_all(&mut chunked(), &mut Reader::new(), &mut feeder(b"5\r\nab", 1), 3);
        assert!(matches!(result, Err(ReadError::PeerClosed)));
    }

    #[test]
    fn drain_respects_its_limit() {
        let drain = |mut body: Body, wire: &[u8]| body.drain(&mut Reader::new(), &mut feeder(wire, 1), 10).unwrap();
        assert!(drain(fixed(10), &[b'x'; 10]));
        assert!(!drain(fixed(11), &[b'x'; 11]));
        assert!(drain(chunked(), b"5\r\nxxxxx\r\n0\r\n\r\n"));
        assert!(!drain(chunked(), b"9\r\nxxxxxxxxx\r\n9\r\nxxxxxxxxx\r\n0\r\n\r\n"));
    }
}
