//! HTTP/1.1 as `headway load` speaks it: the bytes of a request (serialized once, before the
//! run) and an incremental response reader fed whatever the socket delivered. The rules (what a
//! response head may look like, where its body ends, chunked decoding) are `headway_http1`'s,
//! the same the front holds its workers' responses to; this file only drives them.
//!
//! Keeping this sans-IO lets the connection loop stay a plain read/parse cycle, and lets the
//! unit tests cut responses at every byte. Bodies are counted, never stored: memory per
//! connection is the read buffer, whatever the response size.

use bytes::BytesMut;
use headway_http1::body::{BodyDecoder, BodyKind};
use headway_http1::response::{self, Asked};
use headway_http1::{request, HttpError};
use thiserror::Error;

/// The largest response head accepted.
const MAX_HEAD: usize = 64 * 1024;

/// Serializes one request. Called once per target before the run, so the hot loop only copies
/// bytes. `Host`, `User-Agent`, `Content-Length` and `Connection` are added unless `headers`
/// already holds them (a `Host` in `headers` is how a Host override arrives).
pub fn encode_request(
    method: &str,
    request_target: &str,
    host: &str,
    headers: &[(String, String)],
    body: &[u8],
    keep_alive: bool,
) -> Vec<u8> {
    let has = |name: &str| headers.iter().any(|(n, _)| n.eq_ignore_ascii_case(name));
    let mut fields: Vec<(&[u8], &[u8])> = Vec::with_capacity(headers.len() + 4);
    if !has("host") {
        fields.push((b"Host", host.as_bytes()));
    }
    if !has("user-agent") {
        fields.push((b"User-Agent", concat!("headway-load/", env!("CARGO_PKG_VERSION")).as_bytes()));
    }
    fields.extend(headers.iter().map(|(name, value)| (name.as_bytes(), value.as_bytes())));
    let method_sends_body = matches!(method, "POST" | "PUT" | "PATCH");
    let length = body.len().to_string();
    if !has("content-length") && !has("transfer-encoding") && (!body.is_empty() || method_sends_body) {
        fields.push((b"Content-Length", length.as_bytes()));
    }
    if !keep_alive && !has("connection") {
        fields.push((b"Connection", b"close"));
    }
    let mut out = BytesMut::with_capacity(128 + body.len());
    request::write_head(&mut out, method, request_target, fields);
    out.extend_from_slice(body);
    out.to_vec()
}

/// Why a response could not be read.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum ProtocolError {
    /// It broke HTTP/1.1: the rule it broke.
    #[error("{0}")]
    Malformed(&'static str),
    #[error("connection closed in the middle of the response")]
    Truncated,
    #[error("response head larger than {0} bytes")]
    HeadTooLarge(usize),
}

impl From<HttpError> for ProtocolError {
    fn from(error: HttpError) -> Self {
        ProtocolError::Malformed(error.reason)
    }
}

/// What the caller needs to know about a complete response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResponseDone {
    pub status: u16,
    /// Body bytes after transfer decoding (what hey calls the response size).
    pub body_bytes: u64,
    /// False when the server said `Connection: close`, spoke HTTP/1.0 without keep-alive, or
    /// delimited the body by closing: the connection must not carry another request.
    pub keep_alive: bool,
}

/// Reads one response at a time. Call [`ResponseParser::begin`] before each response, then
/// [`ResponseParser::advance`] with the unread bytes until it reports the end.
#[derive(Debug)]
pub struct ResponseParser {
    /// The body being read, once the head has been; `None` while waiting for a head.
    body: Option<BodyDecoder>,
    head_request: bool,
    status: u16,
    keep_alive: bool,
    tally_header: Option<String>,
    tally_value: Vec<u8>,
    tally_seen: bool,
}

impl ResponseParser {
    /// `tally_header` names a response header whose value the caller wants per response.
    pub fn new(tally_header: Option<String>) -> Self {
        ResponseParser {
            body: None,
            head_request: false,
            status: 0,
            keep_alive: true,
            tally_header,
            tally_value: Vec::new(),
            tally_seen: false,
        }
    }

    /// Starts a new response. `head_request` is true when it answers a HEAD request, whose
    /// response has no body whatever its Content-Length says.
    pub fn begin(&mut self, head_request: bool) {
        self.body = None;
        self.head_request = head_request;
        self.status = 0;
        self.keep_alive = true;
        self.tally_seen = false;
    }

    /// The value of the tally header in the last response head, if it had one.
    pub fn tally_value(&self) -> Option<&[u8]> {
        self.tally_seen.then_some(&self.tally_value[..])
    }

    /// True once any byte of the current response has been accepted.
    pub fn started(&self) -> bool {
        self.body.is_some() || self.status != 0
    }

    /// Consumes as much of `input` as it can. Returns the bytes consumed and, when the response
    /// ended inside `input`, its summary. Bytes not consumed (a partial head or chunk line) must
    /// be offered again, followed by more, on the next call.
    pub fn advance(&mut self, input: &[u8]) -> Result<(usize, Option<ResponseDone>), ProtocolError> {
        let mut pos = 0;
        loop {
            let Some(body) = &mut self.body else {
                match self.parse_head(&input[pos..])? {
                    None => return Ok((pos, None)),
                    Some(used) => pos += used,
                }
                continue;
            };
            if body.is_done() {
                return Ok((pos, Some(self.done())));
            }
            let decoded = body.decode(&input[pos..])?;
            pos += decoded.consumed;
            if decoded.consumed == 0 {
                return Ok((pos, None));
            }
        }
    }

    /// The peer closed the connection. Completes a close-delimited body; anything else was cut
    /// short.
    pub fn finish_at_eof(&mut self) -> Result<ResponseDone, ProtocolError> {
        match self.body.as_mut().map(BodyDecoder::finish_at_close) {
            Some(Ok(())) => Ok(self.done()),
            _ => Err(ProtocolError::Truncated),
        }
    }

    fn done(&mut self) -> ResponseDone {
        let body_bytes = self.body.take().map_or(0, |body| body.decoded());
        ResponseDone { status: self.status, body_bytes, keep_alive: self.keep_alive }
    }

    /// Parses a response head if `input` holds all of it; returns the bytes it used and starts
    /// the body. An interim (1xx) response is skipped: the caller keeps advancing.
    fn parse_head(&mut self, input: &[u8]) -> Result<Option<usize>, ProtocolError> {
        let asked = Asked { head: self.head_request, upgrade: true };
        let tally = self.tally_header.as_deref();
        let mut tally_value = None;
        let parsed = response::parse_head_with(input, asked, MAX_HEAD, |name, value| {
            if tally.is_some_and(|tally| name.eq_ignore_ascii_case(tally)) {
                tally_value = Some(value);
            }
        });
        let (info, used) = match parsed {
            Ok(Some(parsed)) => parsed,
            Ok(None) => return Ok(None),
            Err(_) if input.len() > MAX_HEAD => return Err(ProtocolError::HeadTooLarge(MAX_HEAD)),
            Err(error) => return Err(error.into()),
        };
        if info.status.is_informational() && info.status != http::StatusCode::SWITCHING_PROTOCOLS {
            return Ok(Some(used));
        }
        if let Some(value) = tally_value {
            self.tally_value.clear();
            self.tally_value.extend_from_slice(value);
            self.tally_seen = true;
        }
        self.status = info.status.as_u16();
        self.keep_alive = info.keep_alive;
        // A 101 ends HTTP on the connection: the response is its head.
        let kind = if info.status == http::StatusCode::SWITCHING_PROTOCOLS { BodyKind::Empty } else { info.body };
        self.body = Some(BodyDecoder::new(kind, u64::MAX));
        Ok(Some(used))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `wire` to a fresh parser in pieces of `step` bytes, the way a socket might deliver
    /// it, and returns every response it completed.
    fn parse_in_steps(wire: &[u8], step: usize, head_request: bool) -> Result<Vec<ResponseDone>, ProtocolError> {
        let mut parser = ResponseParser::new(None);
        parser.begin(head_request);
        let mut pending: Vec<u8> = Vec::new();
        let mut done = Vec::new();
        for piece in wire.chunks(step) {
            pending.extend_from_slice(piece);
            loop {
                let (used, finished) = parser.advance(&pending)?;
                pending.drain(..used);
                match finished {
                    Some(response) => {
                        done.push(response);
                        parser.begin(head_request);
                    }
                    None => break,
                }
            }
        }
        if parser.started() {
            done.push(parser.finish_at_eof()?);
        }
        Ok(done)
    }

    fn every_split(wire: &[u8], head_request: bool) -> Vec<ResponseDone> {
        let whole = parse_in_steps(wire, wire.len(), head_request).unwrap();
        for step in 1..wire.len() {
            assert_eq!(parse_in_steps(wire, step, head_request).unwrap(), whole, "step {step}");
        }
        whole
    }

    #[test]
    fn content_length_body() {
        let done = every_split(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", false);
        assert_eq!(done, vec![ResponseDone { status: 200, body_bytes: 5, keep_alive: true }]);
    }

    #[test]
    fn chunked_body_with_extension_and_trailer() {
        let wire =
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4;x=y\r\nWiki\r\n5\r\npedia\r\n0\r\nX-T: 1\r\n\r\n";
        let done = every_split(wire, false);
        assert_eq!(done, vec![ResponseDone { status: 200, body_bytes: 9, keep_alive: true }]);
    }

    #[test]
    fn pipelined_responses_in_one_buffer_keep_their_order() {
        let wire = b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\na\
HTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n\
HTTP/1.1 204 No Content\r\n\r\n";
        let done = every_split(wire, false);
        let statuses: Vec<(u16, u64)> = done.iter().map(|d| (d.status, d.body_bytes)).collect();
        assert_eq!(statuses, vec![(200, 1), (404, 3), (204, 0)]);
    }

    #[test]
    fn head_and_304_have_no_body() {
        let head = every_split(b"HTTP/1.1 200 OK\r\nContent-Length: 99\r\n\r\n", true);
        assert_eq!(head[0].body_bytes, 0);
        let not_modified = every_split(b"HTTP/1.1 304 Not Modified\r\nContent-Length: 99\r\n\r\n", false);
        assert_eq!(not_modified[0].status, 304);
    }

    #[test]
    fn close_delimited_body_ends_at_eof_and_closes() {
        let done = every_split(b"HTTP/1.1 200 OK\r\n\r\nuntil the end", false);
        assert_eq!(done, vec![ResponseDone { status: 200, body_bytes: 13, keep_alive: false }]);
    }

    #[test]
    fn connection_close_and_http10_end_keep_alive() {
        let close = every_split(b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n", false);
        assert!(!close[0].keep_alive);
        let old = every_split(b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n", false);
        assert!(!old[0].keep_alive);
        let old_kept = every_split(b"HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 0\r\n\r\n", false);
        assert!(old_kept[0].keep_alive);
    }

    #[test]
    fn interim_response_is_skipped() {
        let done =
            every_split(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok", false);
        assert_eq!(done, vec![ResponseDone { status: 201, body_bytes: 2, keep_alive: true }]);
    }

    #[test]
    fn malformed_responses_are_errors() {
        assert!(matches!(parse_in_steps(b"HTTP/9 200 OK\r\n\r\n", 64, false), Err(ProtocolError::Malformed(_))));
        assert_eq!(
            parse_in_steps(b"HTTP/1.1 200 OK\r\nContent-Length: 12x\r\n\r\n", 64, false),
            Err(ProtocolError::Malformed("bad Content-Length"))
        );
        assert_eq!(
            parse_in_steps(b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", 64, false),
            Err(ProtocolError::Malformed("conflicting Content-Length values"))
        );
        assert_eq!(
            parse_in_steps(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 64, false),
            Err(ProtocolError::Malformed("bad chunk size"))
        );
        assert_eq!(
            parse_in_steps(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort", 64, false),
            Err(ProtocolError::Truncated)
        );
    }

    #[test]
    fn tally_header_value_is_captured_case_insensitively() {
        let mut parser = ResponseParser::new(Some("X-Worker-Pid".into()));
        parser.begin(false);
        let wire = b"HTTP/1.1 200 OK\r\nx-worker-pid: 4242\r\nContent-Length: 0\r\n\r\n";
        let (used, done) = parser.advance(wire).unwrap();
        assert_eq!(used, wire.len());
        assert!(done.is_some());
        assert_eq!(parser.tally_value(), Some(&b"4242"[..]));
        parser.begin(false);
        parser.advance(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n").unwrap();
        assert_eq!(parser.tally_value(), None, "a response without the header has no tally value");
    }

    #[test]
    fn request_bytes_carry_defaults_and_overrides() {
        let plain = encode_request("GET", "/a?b=1", "example.test:8080", &[], b"", true);
        let text = String::from_utf8(plain).unwrap();
        assert!(text.starts_with("GET /a?b=1 HTTP/1.1\r\nHost: example.test:8080\r\nUser-Agent: headway-load/"));
        assert!(text.ends_with("\r\n\r\n"));
        assert!(!text.contains("Content-Length"));

        let headers = vec![("Host".to_string(), "override.test".to_string())];
        let post = encode_request("POST", "/", "example.test", &headers, b"abc", false);
        let text = String::from_utf8(post).unwrap();
        assert!(!text.contains("example.test\r\n"));
        assert!(text.contains("Host: override.test\r\n"));
        assert!(text.contains("Content-Length: 3\r\nConnection: close\r\n\r\nabc"));
    }
}
