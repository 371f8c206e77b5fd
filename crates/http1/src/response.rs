//! Response heads: which responses have a body, parsing one as strictly as a request (a
//! worker's answer to the front, a server's answer to `headway load`), and writing one.
//!
//! A response the front passes on must frame exactly one way: a head whose lines do not all end
//! in CRLF, a body framed both by `Content-Length` and by `Transfer-Encoding`, a `101` nobody
//! asked for, a `204` that announces a body, are refused ([`HttpError::bad_response`], a `502`
//! for the client) rather than guessed at, since a guess that differs from the client's is a
//! desynchronized connection (RFC 9112 sections 6.1 and 6.3).
//!
//! Writing: a response's body framing is decided once ([`body_encoder`]) from its status, the
//! request's method, the client's version and what is known of the body's length, and the head
//! says exactly that ([`put_framing`]).

use std::cell::RefCell;
use std::mem::MaybeUninit;
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::{BufMut, Bytes, BytesMut};
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{StatusCode, Version};

use crate::body::{BodyEncoder, BodyKind};
use crate::error::HttpError;
use crate::fields::{self, Coding};

/// Most header fields a response may have.
pub const MAX_HEADERS: usize = 128;

/// The interim answer to a request that waits with `Expect: 100-continue` before its body.
pub const CONTINUE: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\n";

/// Whether a response to a request (`HEAD` or not) with this status has a body (RFC 9112
/// section 6.3).
pub fn has_body(is_head: bool, status: StatusCode) -> bool {
    !(is_head || status.is_informational() || status == StatusCode::NO_CONTENT || status == StatusCode::NOT_MODIFIED)
}

/// What the request a response answers asked for, as far as framing the response goes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Asked {
    /// The request was `HEAD`: the response has no body, whatever its fields say.
    pub head: bool,
    /// The request asked to switch protocols: a `101` may answer it.
    pub upgrade: bool,
}

/// What a response head says about the message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResponseInfo {
    /// The status code.
    pub status: StatusCode,
    /// HTTP/1.0 or HTTP/1.1.
    pub version: Version,
    /// Where the body ends. An interim (1xx) response other than `101` has none, and is followed
    /// by the real response.
    pub body: BodyKind,
    /// The connection may carry another exchange after this response.
    pub keep_alive: bool,
}

/// A parsed response head with its fields.
#[derive(Debug)]
pub struct ResponseHead {
    /// What the head says about the message.
    pub info: ResponseInfo,
    /// The header fields as received.
    pub headers: HeaderMap,
}

/// Parses the response head at the start of `buf`, handing each field to `field` as it is met
/// (so a caller that needs one field need not build a map), its value without the blanks around
/// it (httparse trims them), which HTTP/2 forbids. `Ok(None)` when more bytes are
/// needed; `Ok(Some((info, len)))` with the head's length once it is complete.
pub fn parse_head_with<'b>(
    buf: &'b [u8],
    asked: Asked,
    max_head: usize,
    mut field: impl FnMut(&'b str, &'b [u8]),
) -> Result<Option<(ResponseInfo, usize)>, HttpError> {
    // Left uninitialised for httparse to fill, as a request's are (`request::parse_head`): every
    // response a `--cmd` worker or `headway load` reads comes through here.
    let mut fields = [const { MaybeUninit::<httparse::Header<'_>>::uninit() }; MAX_HEADERS];
    let mut response = httparse::Response::new(&mut []);
    let parsed = httparse::ParserConfig::default().parse_response_with_uninit_headers(&mut response, buf, &mut fields);
    let head_len = match parsed {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) if buf.len() <= max_head => {
            fields::check_line_ends(buf).map_err(HttpError::bad_response)?;
            return Ok(None);
        }
        Ok(httparse::Status::Partial) => return Err(HttpError::bad_response("response head too large")),
        Err(httparse::Error::TooManyHeaders) => return Err(HttpError::bad_response("too many response header fields")),
        Err(_) => return Err(HttpError::bad_response("malformed response head")),
    };
    if head_len > max_head {
        return Err(HttpError::bad_response("response head too large"));
    }
    fields::check_line_ends(&buf[..head_len]).map_err(HttpError::bad_response)?;
    let status = StatusCode::from_u16(response.code.unwrap_or_default())
        .map_err(|_| HttpError::bad_response("malformed status code"))?;
    let version = match response.version {
        Some(0) => Version::HTTP_10,
        _ => Version::HTTP_11,
    };
    let headers = &*response.headers;
    let named = |wanted: &'static str| {
        headers.iter().filter(move |header| header.name.eq_ignore_ascii_case(wanted)).map(|header| header.value)
    };
    let length = fields::content_length(named("content-length")).map_err(HttpError::bad_response)?;
    let coding = fields::transfer_coding(named("transfer-encoding"));
    if length.is_some() && coding.is_some() {
        return Err(HttpError::bad_response("a response with both Content-Length and Transfer-Encoding"));
    }
    let body = body_kind(status, asked, length, coding)?;
    let keep_alive = fields::persists(version, named("connection"))
        && body != BodyKind::UntilClose
        && status != StatusCode::SWITCHING_PROTOCOLS;
    for header in headers {
        field(header.name, header.value);
    }
    Ok(Some((ResponseInfo { status, version, body, keep_alive }, head_len)))
}

/// Where the body of a response with this status and these framing fields ends.
fn body_kind(
    status: StatusCode,
    asked: Asked,
    length: Option<u64>,
    coding: Option<Coding>,
) -> Result<BodyKind, HttpError> {
    if status == StatusCode::SWITCHING_PROTOCOLS && !asked.upgrade {
        return Err(HttpError::bad_response("a 101 to a request that asked for no upgrade"));
    }
    if status.is_informational() {
        return if length.is_some() || coding.is_some() {
            Err(HttpError::bad_response("an interim response with a body length"))
        } else {
            Ok(BodyKind::Empty)
        };
    }
    if status == StatusCode::NO_CONTENT && (coding.is_some() || length.is_some_and(|length| length > 0)) {
        return Err(HttpError::bad_response("a 204 with a body length"));
    }
    if status == StatusCode::NOT_MODIFIED && coding.is_some() {
        return Err(HttpError::bad_response("a 304 with a transfer-coding"));
    }
    if !has_body(asked.head, status) {
        return Ok(BodyKind::Empty);
    }
    match (coding, length) {
        (Some(Coding::Chunked), _) => Ok(BodyKind::Chunked),
        (Some(_), _) => Err(HttpError::bad_response("a response with a transfer-coding other than chunked")),
        (None, Some(0)) => Ok(BodyKind::Empty),
        (None, Some(length)) => Ok(BodyKind::Length(length)),
        (None, None) => Ok(BodyKind::UntilClose),
    }
}

/// Parses a response head into its fields (see [`parse_head_with`]). Fields that describe the
/// framing of a body that has none (a `204`'s `Content-Length: 0`) are dropped: the head passed
/// on must not announce what is not there.
///
/// ```
/// use headway_http1::body::BodyKind;
/// use headway_http1::response::{parse_head, Asked};
///
/// let wire = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n";
/// let (head, len) = parse_head(wire, Asked::default(), 8192).unwrap().expect("a complete head");
/// assert_eq!((head.info.status.as_u16(), head.info.body), (200, BodyKind::Chunked));
/// assert_eq!(head.headers["content-type"], "text/plain");
/// assert_eq!(len, wire.len());
///
/// // The answer to a HEAD request has no body, whatever its fields say.
/// let asked = Asked { head: true, ..Asked::default() };
/// let (head, _) = parse_head(wire, asked, 8192).unwrap().unwrap();
/// assert_eq!(head.info.body, BodyKind::Empty);
/// ```
pub fn parse_head(buf: &[u8], asked: Asked, max_head: usize) -> Result<Option<(ResponseHead, usize)>, HttpError> {
    let mut headers = HeaderMap::new();
    let mut malformed = false;
    let parsed = parse_head_with(buf, asked, max_head, |name, value| {
        match (HeaderName::from_bytes(name.as_bytes()), HeaderValue::from_bytes(value)) {
            (Ok(name), Ok(value)) => {
                headers.append(name, value);
            }
            _ => malformed = true,
        }
    })?;
    if malformed {
        return Err(HttpError::bad_response("a malformed response header field"));
    }
    Ok(parsed.map(|(info, len)| {
        if info.status == StatusCode::NO_CONTENT || info.status.is_informational() {
            headers.remove(header::CONTENT_LENGTH);
        }
        (ResponseHead { info, headers }, len)
    }))
}

/// How the connection continues after a response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Persistence {
    /// The connection may carry another exchange.
    KeepAlive,
    /// The connection closes after this response.
    Close,
}

/// How a response's body goes on the wire: nothing for a response without a body (`declared`
/// and `known` lengths notwithstanding: a `HEAD` response's length is the sender's to state),
/// the declared `Content-Length`, else the length when the whole body is `known`, else chunked
/// for HTTP/1.1, else until the connection closes.
pub fn body_encoder(
    is_head: bool,
    status: StatusCode,
    version: Version,
    declared: Option<u64>,
    known: Option<u64>,
) -> BodyEncoder {
    if !has_body(is_head, status) {
        BodyEncoder::NoBody
    } else if let Some(length) = declared.or(known) {
        BodyEncoder::length(length)
    } else if version == Version::HTTP_11 {
        BodyEncoder::Chunked
    } else {
        BodyEncoder::UntilClose
    }
}

/// Ends a response head whose status line and own fields are written: `Date` unless `has_date`,
/// the framing fields `encoder` needs (a `Content-Length` unless `declared` one is among the
/// fields already; `Transfer-Encoding: chunked`), the `Connection` field `persistence` calls for
/// in `version` (a body until the close never persists), and the blank line. Returns whether the
/// connection persists.
pub fn put_framing(
    out: &mut BytesMut,
    version: Version,
    encoder: &BodyEncoder,
    declared: bool,
    has_date: bool,
    persistence: Persistence,
) -> Persistence {
    // Spelt as most servers spell them; a field's name is case-insensitive (RFC 9110 5.1).
    if !has_date {
        with_http_date(|date| put_field(out, b"Date", date.as_bytes()));
    }
    match encoder {
        BodyEncoder::Length { promised, .. } if !declared => {
            put_field(out, b"Content-Length", itoa::Buffer::new().format(*promised).as_bytes())
        }
        BodyEncoder::Chunked => put_field(out, b"Transfer-Encoding", b"chunked"),
        _ => {}
    }
    let persistence = if *encoder == BodyEncoder::UntilClose { Persistence::Close } else { persistence };
    match (persistence, version) {
        (Persistence::Close, _) => put_field(out, b"Connection", b"close"),
        (Persistence::KeepAlive, Version::HTTP_10) => put_field(out, b"Connection", b"keep-alive"),
        (Persistence::KeepAlive, _) => {}
    }
    out.put_slice(b"\r\n");
    persistence
}

/// Appends a status line: `version` as the client speaks it, the code, and `reason`.
pub fn put_status_line(out: &mut BytesMut, version: Version, code: &[u8], reason: &[u8]) {
    out.put_slice(if version == Version::HTTP_10 { b"HTTP/1.0 " } else { b"HTTP/1.1 " });
    out.put_slice(code);
    out.put_u8(b' ');
    out.put_slice(reason);
    out.put_slice(b"\r\n");
}

/// Appends a response head: the status line, `headers` (the message's own fields, connection-specific ones
/// removed), and the framing [`put_framing`] adds for `encoder`. Returns whether the connection
/// persists.
pub fn write_head(
    out: &mut BytesMut,
    version: Version,
    status: StatusCode,
    headers: &HeaderMap,
    encoder: &BodyEncoder,
    persistence: Persistence,
) -> Persistence {
    out.reserve(256);
    let reason = status.canonical_reason().unwrap_or("Unknown");
    put_status_line(out, version, status.as_str().as_bytes(), reason.as_bytes());
    // Whether the fields declare a length or a date, noted as they are written rather than
    // looked up after.
    let (mut declared, mut dated) = (false, false);
    for (name, value) in headers {
        declared |= name == header::CONTENT_LENGTH;
        dated |= name == header::DATE;
        put_field(out, name.as_str().as_bytes(), value.as_bytes());
    }
    put_framing(out, version, encoder, declared, dated, persistence)
}

/// Appends one header field line.
pub fn put_field(out: &mut BytesMut, name: &[u8], value: &[u8]) {
    out.put_slice(name);
    out.put_slice(b": ");
    out.put_slice(value);
    out.put_slice(b"\r\n");
}

/// A complete response headway makes itself: plain text, one line, with `extra` fields (such as
/// `Retry-After`). `with_body` is false to answer a `HEAD` request.
pub fn plain_response(
    version: Version,
    status: StatusCode,
    message: &str,
    extra: &[(HeaderName, HeaderValue)],
    persistence: Persistence,
) -> Bytes {
    let body = format!("{message}\n");
    let mut headers = HeaderMap::with_capacity(3 + extra.len());
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    headers.insert(header::CONTENT_LENGTH, HeaderValue::from(body.len()));
    for (name, value) in extra {
        headers.insert(name.clone(), value.clone());
    }
    let mut out = BytesMut::with_capacity(256 + body.len());
    write_head(&mut out, version, status, &headers, &BodyEncoder::length(body.len() as u64), persistence);
    out.put_slice(body.as_bytes());
    out.freeze()
}

/// Runs `f` with the current date in IMF-fixdate form. Formatting a date for every response
/// is measurable at tens of thousands of responses a second, so each thread keeps the string
/// for the second it was made in.
pub fn with_http_date<R>(f: impl FnOnce(&str) -> R) -> R {
    thread_local! {
        static CACHE: RefCell<(u64, String)> = const { RefCell::new((u64::MAX, String::new())) };
    }
    let now = SystemTime::now();
    let second = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    CACHE.with(|cache| {
        let mut cache = cache.borrow_mut();
        if cache.0 != second {
            *cache = (second, httpdate::fmt_http_date(now));
        }
        f(&cache.1)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(bytes: &[u8]) -> String {
        String::from_utf8(bytes.to_vec()).unwrap()
    }

    const GET: Asked = Asked { head: false, upgrade: false };

    fn parse(raw: &[u8], asked: Asked) -> Result<ResponseHead, HttpError> {
        parse_head(raw, asked, 8192).map(|parsed| parsed.expect("complete").0)
    }

    fn refused(raw: &[u8]) -> &'static str {
        let error = parse(raw, GET).expect_err(&String::from_utf8_lossy(raw));
        assert_eq!(error.status, StatusCode::BAD_GATEWAY);
        error.reason
    }

    #[test]
    fn field_values_lose_the_blanks_around_them() {
        let head =
            parse(b"HTTP/1.1 200 OK\r\nSet-Cookie:  a=b \r\nX-Spaced:\t1 2 \t\r\nX-Blank: \r\n\r\n", GET).unwrap();
        assert_eq!(head.headers["set-cookie"], "a=b");
        assert_eq!(head.headers["x-spaced"], "1 2");
        assert_eq!(head.headers["x-blank"], "");
    }

    #[test]
    fn fields_up_to_the_limit_and_no_more() {
        let head = |fields: usize| {
            let lines: String = (0..fields).map(|i| format!("X-{i}: v\r\n")).collect();
            format!("HTTP/1.1 200 OK\r\n{lines}\r\n").into_bytes()
        };
        let parsed = parse(&head(MAX_HEADERS), GET).unwrap();
        assert_eq!(parsed.headers.len(), MAX_HEADERS);
        assert_eq!(parsed.headers["x-0"], "v");
        assert_eq!(refused(&head(MAX_HEADERS + 1)), "too many response header fields");
    }

    #[test]
    fn framing_of_good_responses() {
        let kind = |raw: &[u8], asked| parse(raw, asked).unwrap().info.body;
        assert_eq!(kind(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n", GET), BodyKind::Length(5));
        assert_eq!(kind(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", GET), BodyKind::Chunked);
        assert_eq!(kind(b"HTTP/1.1 200 OK\r\n\r\n", GET), BodyKind::UntilClose);
        assert_eq!(kind(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", GET), BodyKind::Empty);
        let head = Asked { head: true, upgrade: false };
        assert_eq!(kind(b"HTTP/1.1 200 OK\r\nContent-Length: 99\r\n\r\n", head), BodyKind::Empty);
        assert_eq!(kind(b"HTTP/1.1 304 Not Modified\r\nContent-Length: 99\r\n\r\n", GET), BodyKind::Empty);
        assert_eq!(kind(b"HTTP/1.1 100 Continue\r\n\r\n", GET), BodyKind::Empty);
        let upgrade = Asked { head: false, upgrade: true };
        assert_eq!(kind(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n", upgrade), BodyKind::Empty);
    }

    #[test]
    fn persistence_of_responses() {
        let keeps = |raw: &[u8]| parse(raw, GET).unwrap().info.keep_alive;
        assert!(keeps(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"));
        assert!(!keeps(b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"));
        assert!(!keeps(b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n"));
        assert!(keeps(b"HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 0\r\n\r\n"));
        assert!(!keeps(b"HTTP/1.1 200 OK\r\n\r\n"), "a body until the close");
    }

    #[test]
    fn responses_that_could_frame_two_ways_are_refused() {
        assert!(refused(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\nTransfer-Encoding: chunked\r\n\r\n")
            .contains("both Content-Length and Transfer-Encoding"));
        assert!(
            refused(b"HTTP/1.1 200 OK\r\nX: a\nSet-Cookie: evil=1\r\nContent-Length: 0\r\n\r\n").contains("CR or LF")
        );
        assert!(refused(b"HTTP/1.1 200 OK\nContent-Length: 0\n\n").contains("CR or LF"));
        assert!(refused(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n").contains("101"));
        assert!(refused(b"HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n").contains("204"));
        assert!(refused(b"HTTP/1.1 204 No Content\r\nTransfer-Encoding: chunked\r\n\r\n").contains("204"));
        assert!(refused(b"HTTP/1.1 304 Not Modified\r\nTransfer-Encoding: chunked\r\n\r\n").contains("304"));
        assert!(refused(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n").contains("transfer-coding"));
        assert!(
            refused(b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n").contains("Content-Length")
        );
        assert!(refused(b"HTTP/1.1 200 OK\r\nContent-Length: 12x\r\n\r\n").contains("Content-Length"));
        assert!(refused(b"HTTP/1.1 200 OK\r\nX: a\r\n folded\r\n\r\n").contains("malformed"));
        assert!(refused(b"HTTP/9 200 OK\r\n\r\n").contains("malformed"));
        refused(b"HTTP/1.1 200 OK\r\nX: a\0b\r\n\r\n");
    }

    #[test]
    fn a_partial_head_waits_unless_it_is_already_wrong_or_too_large() {
        assert!(parse_head(b"HTTP/1.1 200 OK\r\nX: y\r", GET, 100).unwrap().is_none());
        assert!(parse_head(b"HTTP/1.1 200 OK\r\nX: y\nZ", GET, 100).is_err());
        assert!(parse_head(&[b'x'; 101], GET, 100).is_err());
    }

    #[test]
    fn a_204s_zero_length_is_dropped_and_a_304s_length_kept() {
        let no_content = parse(b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n", GET).unwrap();
        assert!(!no_content.headers.contains_key(header::CONTENT_LENGTH));
        let not_modified = parse(b"HTTP/1.1 304 Not Modified\r\nContent-Length: 42\r\n\r\n", GET).unwrap();
        assert_eq!(not_modified.headers[header::CONTENT_LENGTH], "42");
    }

    #[test]
    fn body_encoders_follow_the_status_the_method_and_the_version() {
        const HTTP_10: Version = Version::HTTP_10;
        const HTTP_11: Version = Version::HTTP_11;
        let ok = StatusCode::OK;
        assert_eq!(body_encoder(false, ok, HTTP_11, Some(5), Some(3)), BodyEncoder::length(5));
        assert_eq!(body_encoder(false, ok, HTTP_11, None, Some(3)), BodyEncoder::length(3));
        assert_eq!(body_encoder(false, ok, HTTP_11, None, None), BodyEncoder::Chunked);
        assert_eq!(body_encoder(false, ok, HTTP_10, None, None), BodyEncoder::UntilClose);
        assert_eq!(body_encoder(true, ok, HTTP_11, None, Some(0)), BodyEncoder::NoBody);
        assert_eq!(body_encoder(false, StatusCode::NO_CONTENT, HTTP_11, None, Some(0)), BodyEncoder::NoBody);
        assert_eq!(body_encoder(false, StatusCode::NOT_MODIFIED, HTTP_11, None, Some(0)), BodyEncoder::NoBody);
    }

    #[test]
    fn heads_say_their_framing_and_nothing_a_bodiless_response_lacks() {
        let head = |status, encoder: BodyEncoder, version, persistence| {
            let mut out = BytesMut::new();
            write_head(&mut out, version, status, &HeaderMap::new(), &encoder, persistence);
            text(&out)
        };
        let ok = head(StatusCode::OK, BodyEncoder::length(5), Version::HTTP_11, Persistence::KeepAlive);
        assert!(
            ok.starts_with("HTTP/1.1 200 OK\r\nDate: ") && ok.ends_with(" GMT\r\nContent-Length: 5\r\n\r\n"),
            "{ok}"
        );
        let no_content = head(StatusCode::NO_CONTENT, BodyEncoder::NoBody, Version::HTTP_11, Persistence::KeepAlive);
        assert!(!no_content.contains("Content-Length") && !no_content.contains("Connection"), "{no_content}");
        let chunked = head(StatusCode::OK, BodyEncoder::Chunked, Version::HTTP_11, Persistence::Close);
        assert!(chunked.ends_with("Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"));
        let old = head(StatusCode::NOT_FOUND, BodyEncoder::length(0), Version::HTTP_10, Persistence::KeepAlive);
        assert!(old.starts_with("HTTP/1.0 404 Not Found\r\n") && old.contains("Connection: keep-alive\r\n"));
        let until_close = head(StatusCode::OK, BodyEncoder::UntilClose, Version::HTTP_10, Persistence::KeepAlive);
        assert!(until_close.contains("Connection: close\r\n"), "a body until the close ends the connection");
    }

    #[test]
    fn a_length_or_date_the_app_declared_is_kept_and_not_said_twice() {
        let written = |fields: &[(HeaderName, &'static str)]| {
            let headers: HeaderMap =
                fields.iter().map(|(name, value)| (name.clone(), HeaderValue::from_static(value))).collect();
            let mut out = BytesMut::new();
            write_head(
                &mut out,
                Version::HTTP_11,
                StatusCode::OK,
                &headers,
                &BodyEncoder::length(5),
                Persistence::KeepAlive,
            );
            text(&out).to_lowercase()
        };
        let declared = written(&[(header::CONTENT_LENGTH, "5")]);
        assert_eq!(declared.matches("content-length").count(), 1, "{declared}");
        let dated = written(&[(header::CONTENT_TYPE, "text/plain"), (header::DATE, "Sun, 06 Nov 1994 08:49:37 GMT")]);
        assert_eq!(dated.matches("date:").count(), 1, "{dated}");
        assert!(dated.contains("date: sun, 06 nov 1994 08:49:37 gmt\r\n"), "{dated}");
        assert_eq!(written(&[]).matches("date: ").count(), 1, "the front's own date when the app gave none");
    }

    #[test]
    fn plain_response_is_complete() {
        let retry = [(header::RETRY_AFTER, HeaderValue::from(1))];
        let out =
            plain_response(Version::HTTP_11, StatusCode::SERVICE_UNAVAILABLE, "queue full", &retry, Persistence::Close);
        let text = text(&out);
        assert!(text.starts_with("HTTP/1.1 503 Service Unavailable\r\n"));
        assert!(text.contains("content-length: 11\r\n"));
        assert!(text.contains("retry-after: 1\r\n"));
        assert!(text.contains("Connection: close\r\n"));
        assert!(text.ends_with("\r\n\r\nqueue full\n"));
    }
}
