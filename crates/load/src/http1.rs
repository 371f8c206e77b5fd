//! HTTP/1.1 on the wire, without I/O: the bytes of a request (serialized once, before the run)
//! and an incremental response parser that is fed whatever the socket delivered.
//!
//! Keeping this sans-IO lets the connection loop stay a plain read/parse cycle, lets the unit
//! tests cut responses at every byte, and leaves room for an HTTP/2 module beside it. Bodies are
//! counted, never stored: memory per connection is the read buffer, whatever the response size.

use std::mem::MaybeUninit;

use httparse::Status;
use thiserror::Error;

/// Most header lines a response may carry; more is treated as malformed.
const MAX_HEADERS: usize = 96;
/// Longest chunk-size or trailer line accepted before the response counts as malformed.
const MAX_LINE: usize = 8 * 1024;

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
    let mut out = Vec::with_capacity(128 + body.len());
    out.extend_from_slice(format!("{method} {request_target} HTTP/1.1\r\n").as_bytes());
    if !has("host") {
        out.extend_from_slice(format!("Host: {host}\r\n").as_bytes());
    }
    if !has("user-agent") {
        out.extend_from_slice(concat!("User-Agent: headway-load/", env!("CARGO_PKG_VERSION"), "\r\n").as_bytes());
    }
    for (name, value) in headers {
        out.extend_from_slice(format!("{name}: {value}\r\n").as_bytes());
    }
    let method_sends_body = matches!(method, "POST" | "PUT" | "PATCH");
    if !has("content-length") && !has("transfer-encoding") && (!body.is_empty() || method_sends_body) {
        out.extend_from_slice(format!("Content-Length: {}\r\n", body.len()).as_bytes());
    }
    if !keep_alive && !has("connection") {
        out.extend_from_slice(b"Connection: close\r\n");
    }
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(body);
    out
}

/// Why a response could not be parsed.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum ProtocolError {
    #[error("bad response head: {0}")]
    Head(httparse::Error),
    #[error("bad Content-Length")]
    ContentLength,
    #[error("bad chunk size line")]
    ChunkSize,
    #[error("missing CRLF after chunk data")]
    ChunkEnd,
    #[error("chunk-size or trailer line longer than {MAX_LINE} bytes")]
    LineTooLong,
    #[error("connection closed in the middle of the response")]
    Truncated,
    #[error("response head larger than {0} bytes")]
    HeadTooLarge(usize),
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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Head,
    Fixed { remaining: u64 },
    ChunkSize,
    ChunkData { remaining: u64 },
    ChunkDataEnd,
    Trailers,
    UntilClose,
}

/// Incremental parser of one response at a time. Call [`ResponseParser::begin`] before each
/// response, then [`ResponseParser::advance`] with the unread bytes until it reports the end.
#[derive(Debug)]
pub struct ResponseParser {
    state: State,
    head_request: bool,
    status: u16,
    keep_alive: bool,
    body_bytes: u64,
    tally_header: Option<String>,
    tally_value: Vec<u8>,
    tally_seen: bool,
}

impl ResponseParser {
    /// `tally_header` names a response header whose value the caller wants per response.
    pub fn new(tally_header: Option<String>) -> Self {
        ResponseParser {
            state: State::Head,
            head_request: false,
            status: 0,
            keep_alive: true,
            body_bytes: 0,
            tally_header,
            tally_value: Vec::new(),
            tally_seen: false,
        }
    }

    /// Starts a new response. `head_request` is true when it answers a HEAD request, whose
    /// response has no body whatever its Content-Length says.
    pub fn begin(&mut self, head_request: bool) {
        self.state = State::Head;
        self.head_request = head_request;
        self.status = 0;
        self.keep_alive = true;
        self.body_bytes = 0;
        self.tally_seen = false;
    }

    /// The value of the tally header in the last response head, if it had one.
    pub fn tally_value(&self) -> Option<&[u8]> {
        self.tally_seen.then_some(&self.tally_value[..])
    }

    /// True once any byte of the current response has been accepted.
    pub fn started(&self) -> bool {
        self.state != State::Head || self.status != 0
    }

    /// Consumes as much of `input` as it can. Returns the bytes consumed and, when the response
    /// ended inside `input`, its summary. Bytes not consumed (a partial head or chunk line) must
    /// be offered again, followed by more, on the next call.
    pub fn advance(&mut self, input: &[u8]) -> Result<(usize, Option<ResponseDone>), ProtocolError> {
        let mut pos = 0;
        loop {
            let rest = &input[pos..];
            match self.state {
                State::Head => match self.parse_head(rest)? {
                    None => return Ok((pos, None)),
                    Some(used) => pos += used,
                },
                State::Fixed { remaining } => {
                    let take = remaining.min(rest.len() as u64);
                    pos += take as usize;
                    self.body_bytes += take;
                    if take < remaining {
                        self.state = State::Fixed { remaining: remaining - take };
                        return Ok((pos, None));
                    }
                    return Ok((pos, Some(self.done())));
                }
                State::ChunkSize => match httparse::parse_chunk_size(rest) {
                    Ok(Status::Complete((used, 0))) => {
                        pos += used;
                        self.state = State::Trailers;
                    }
                    Ok(Status::Complete((used, size))) => {
                        pos += used;
                        self.state = State::ChunkData { remaining: size };
                    }
                    Ok(Status::Partial) => return self.need_line(pos, rest),
                    Err(_) => return Err(ProtocolError::ChunkSize),
                },
                State::ChunkData { remaining } => {
                    let take = remaining.min(rest.len() as u64);
                    pos += take as usize;
                    self.body_bytes += take;
                    if take < remaining {
                        self.state = State::ChunkData { remaining: remaining - take };
                        return Ok((pos, None));
                    }
                    self.state = State::ChunkDataEnd;
                }
                State::ChunkDataEnd => match rest {
                    [b'\r', b'\n', ..] => {
                        pos += 2;
                        self.state = State::ChunkSize;
                    }
                    [b'\n', ..] => {
                        pos += 1;
                        self.state = State::ChunkSize;
                    }
                    [] | [b'\r'] => return Ok((pos, None)),
                    _ => return Err(ProtocolError::ChunkEnd),
                },
                State::Trailers => match rest.iter().position(|&b| b == b'\n') {
                    None => return self.need_line(pos, rest),
                    Some(end) => {
                        pos += end + 1;
                        if end == 0 || (end == 1 && rest[0] == b'\r') {
                            return Ok((pos, Some(self.done())));
                        }
                    }
                },
                State::UntilClose => {
                    self.body_bytes += rest.len() as u64;
                    return Ok((input.len(), None));
                }
            }
        }
    }

    /// The peer closed the connection. Completes a close-delimited body; anything else was cut
    /// short.
    pub fn finish_at_eof(&mut self) -> Result<ResponseDone, ProtocolError> {
        match self.state {
            State::UntilClose => Ok(self.done()),
            _ => Err(ProtocolError::Truncated),
        }
    }

    fn need_line(&self, pos: usize, rest: &[u8]) -> Result<(usize, Option<ResponseDone>), ProtocolError> {
        if rest.len() > MAX_LINE {
            return Err(ProtocolError::LineTooLong);
        }
        Ok((pos, None))
    }

    fn done(&mut self) -> ResponseDone {
        self.state = State::Head;
        ResponseDone { status: self.status, body_bytes: self.body_bytes, keep_alive: self.keep_alive }
    }

    /// Parses a response head if `input` holds all of it; returns the bytes it used and sets the
    /// body state. An interim (1xx) response is skipped: the caller keeps advancing.
    fn parse_head(&mut self, input: &[u8]) -> Result<Option<usize>, ProtocolError> {
        // Uninitialized header slots: this runs once per response, and zeroing 96 slots would
        // cost more than parsing a small head.
        let mut headers = [const { MaybeUninit::<httparse::Header<'_>>::uninit() }; MAX_HEADERS];
        let mut response = httparse::Response::new(&mut []);
        let parsed =
            httparse::ParserConfig::default().parse_response_with_uninit_headers(&mut response, input, &mut headers);
        let used = match parsed.map_err(ProtocolError::Head)? {
            Status::Partial => return Ok(None),
            Status::Complete(used) => used,
        };
        let status = response.code.unwrap_or_default();
        if (100..200).contains(&status) && status != 101 {
            return Ok(Some(used));
        }
        let mut framing = Framing::default();
        let mut keep_alive = response.version == Some(1);
        for header in response.headers.iter() {
            let name = header.name;
            if name.eq_ignore_ascii_case("content-length") {
                let length = parse_content_length(header.value)?;
                if framing.content_length.is_some_and(|seen| seen != length) {
                    return Err(ProtocolError::ContentLength);
                }
                framing.content_length = Some(length);
            } else if name.eq_ignore_ascii_case("transfer-encoding") {
                framing.chunked = last_token_is(header.value, b"chunked");
                framing.transfer_encoding = true;
            } else if name.eq_ignore_ascii_case("connection") {
                if has_token(header.value, b"close") {
                    keep_alive = false;
                } else if has_token(header.value, b"keep-alive") {
                    keep_alive = true;
                }
            }
            if self.tally_header.as_deref().is_some_and(|tally| name.eq_ignore_ascii_case(tally)) {
                self.tally_value.clear();
                self.tally_value.extend_from_slice(header.value);
                self.tally_seen = true;
            }
        }
        self.status = status;
        self.keep_alive = keep_alive;
        self.state = if self.head_request || status == 204 || status == 304 || status == 101 {
            if status == 101 {
                self.keep_alive = false;
            }
            State::Fixed { remaining: 0 }
        } else if framing.transfer_encoding {
            // RFC 9112 6.3: with Transfer-Encoding, Content-Length is ignored; a final coding
            // other than chunked means the body runs to the end of the connection.
            if framing.chunked {
                State::ChunkSize
            } else {
                self.keep_alive = false;
                State::UntilClose
            }
        } else if let Some(length) = framing.content_length {
            State::Fixed { remaining: length }
        } else {
            self.keep_alive = false;
            State::UntilClose
        };
        Ok(Some(used))
    }
}

#[derive(Default)]
struct Framing {
    content_length: Option<u64>,
    transfer_encoding: bool,
    chunked: bool,
}

fn parse_content_length(value: &[u8]) -> Result<u64, ProtocolError> {
    let digits = value.trim_ascii();
    if digits.is_empty() || digits.len() > 19 || !digits.iter().all(u8::is_ascii_digit) {
        return Err(ProtocolError::ContentLength);
    }
    Ok(digits.iter().fold(0u64, |n, d| n * 10 + u64::from(d - b'0')))
}

fn tokens(value: &[u8]) -> impl Iterator<Item = &[u8]> {
    value.split(|&b| b == b',').map(<[u8]>::trim_ascii)
}

fn has_token(value: &[u8], token: &[u8]) -> bool {
    tokens(value).any(|t| t.eq_ignore_ascii_case(token))
}

fn last_token_is(value: &[u8], token: &[u8]) -> bool {
    tokens(value).last().is_some_and(|t| t.eq_ignore_ascii_case(token))
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
        assert!(matches!(parse_in_steps(b"HTTP/9 200 OK\r\n\r\n", 64, false), Err(ProtocolError::Head(_))));
        assert_eq!(
            parse_in_steps(b"HTTP/1.1 200 OK\r\nContent-Length: 12x\r\n\r\n", 64, false),
            Err(ProtocolError::ContentLength)
        );
        assert_eq!(
            parse_in_steps(b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", 64, false),
            Err(ProtocolError::ContentLength)
        );
        assert_eq!(
            parse_in_steps(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 64, false),
            Err(ProtocolError::ChunkSize)
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
