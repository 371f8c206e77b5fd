//! Request heads: parsing and validating one (RFC 9112 sections 3, 6 and 9), and writing one.
//!
//! `httparse` tokenizes; this module applies the rules a server on the open internet needs on
//! top: size limits (414, 431, 413), one and only one way to find where the body ends (a request
//! with both `Content-Length` and `Transfer-Encoding`, or with disagreeing lengths, is refused
//! because two parsers could frame it differently: request smuggling), codings headway cannot
//! decode (501), `Host` rules, `Expect`, and whether the connection may persist.

use std::mem::MaybeUninit;

use bytes::{BufMut, BytesMut};
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Method, StatusCode, Uri, Version};

use crate::body::BodyKind;
use crate::error::HttpError;
use crate::fields::{self, Coding};

/// How many header fields a request may have. Real browsers send well under 50.
pub const MAX_HEADERS: usize = 100;

/// The refusal of bytes whose first line does not look like HTTP at all (a scanner's probe, an
/// HTTP/2 client whose preface is broken): a sender that has not spoken HTTP/1.x on its connection
/// is closed on without an answer it could not read.
pub const NOT_HTTP: HttpError = HttpError::bad_request("not an HTTP/1.x request");

/// Limits a request must keep to.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Largest request head (request line and header fields), in bytes.
    pub max_head: usize,
    /// Largest request body, in bytes, after chunked decoding.
    pub max_body: u64,
}

/// A complete, validated request head.
#[derive(Debug)]
pub struct RequestHead {
    /// `GET`, `POST`...
    pub method: Method,
    /// The request target in origin form (`/path?query`), or `*` for `OPTIONS *`.
    pub target: String,
    /// HTTP/1.0 or HTTP/1.1.
    pub version: Version,
    /// The header fields as received, except that an absolute-form target's authority has
    /// replaced `Host` (RFC 9112 section 3.2.2).
    pub headers: HeaderMap,
    /// Where the body ends: decode it with [`crate::body::BodyDecoder`].
    pub body: BodyKind,
    /// The client allows the connection to carry another request after this one.
    pub keep_alive: bool,
    /// The client waits for `100 Continue` before sending the body.
    pub expect_continue: bool,
}

/// Parses the head at the start of `buf`.
///
/// Returns `Ok(None)` when more bytes are needed, and `Ok(Some((head, len)))` with the length of
/// the head in `buf` once it is complete.
///
/// ```
/// use headway_http1::body::BodyKind;
/// use headway_http1::request::{parse_head, Limits};
///
/// let limits = Limits { max_head: 8192, max_body: 1 << 20 };
/// let wire = b"POST /form?x=1 HTTP/1.1\r\nHost: example.com\r\nContent-Length: 5\r\n\r\nhello";
/// assert!(parse_head(&wire[..20], &limits).unwrap().is_none(), "a head not complete yet");
/// let (head, len) = parse_head(wire, &limits).unwrap().expect("a complete head");
/// assert_eq!((head.method.as_str(), head.target.as_str()), ("POST", "/form?x=1"));
/// assert_eq!(head.body, BodyKind::Length(5));
/// assert!(head.keep_alive);
/// assert_eq!(&wire[len..], b"hello");
///
/// // Two ways to frame one body is how requests are smuggled: refused with a 400.
/// let smuggling = b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n";
/// assert_eq!(parse_head(smuggling, &limits).unwrap_err().status, 400);
/// ```
pub fn parse_head(buf: &[u8], limits: &Limits) -> Result<Option<(RequestHead, usize)>, HttpError> {
    // Left uninitialised for httparse to fill: setting 100 empty fields first would be a tenth of a
    // cheap request's parse.
    let mut fields = [const { MaybeUninit::<httparse::Header<'_>>::uninit() }; MAX_HEADERS];
    let mut request = httparse::Request::new(&mut []);
    let head_len = match request.parse_with_uninit_headers(buf, &mut fields) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) => {
            if buf.len() < limits.max_head {
                return Ok(None);
            }
            return Err(too_large(buf, limits.max_head));
        }
        Err(httparse::Error::TooManyHeaders) => {
            return Err(HttpError::new(StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE, "too many header fields"))
        }
        Err(httparse::Error::Version) if names_another_version(buf) => {
            return Err(HttpError::new(
                StatusCode::HTTP_VERSION_NOT_SUPPORTED,
                "only HTTP/1.0 and HTTP/1.1 are supported",
            ))
        }
        Err(_) if !names_http(buf) => return Err(NOT_HTTP),
        Err(_) => return Err(HttpError::bad_request("malformed request head")),
    };
    if head_len > limits.max_head {
        return Err(too_large(buf, limits.max_head));
    }

    // A complete parse always fills these three.
    let method = request.method.unwrap_or_default();
    // Methods are case-sensitive and every one defined is upper case: `get` is no GET, and servers
    // behind the front disagree on it (Node refuses it, Puma never answers it).
    if method.bytes().any(|b| b.is_ascii_lowercase()) {
        return Err(HttpError::new(StatusCode::NOT_IMPLEMENTED, "unknown method (methods are upper case)"));
    }
    let method = Method::from_bytes(method.as_bytes()).map_err(|_| HttpError::bad_request("malformed method"))?;
    let version = match request.version {
        Some(0) => Version::HTTP_10,
        _ => Version::HTTP_11,
    };
    let mut headers = HeaderMap::with_capacity(request.headers.len() + ADDED_ON_THE_WAY);
    let mut noted = Noted::default();
    for field in request.headers.iter() {
        let name = HeaderName::from_bytes(field.name.as_bytes())
            .map_err(|_| HttpError::bad_request("malformed header name"))?;
        let value =
            HeaderValue::from_bytes(field.value).map_err(|_| HttpError::bad_request("malformed header value"))?;
        noted.note(&name);
        headers.append(name, value);
    }
    let target = origin_target(&method, request.path.unwrap_or_default(), &mut headers)?;
    let body = if noted.framing { body_kind(version, &headers, limits)? } else { BodyKind::Empty };
    check_host(version, &headers)?;
    let expect_continue = noted.expect && expects_continue(version, &headers)?;
    let connection = noted.connection.then(|| values(&headers, &header::CONNECTION));
    let keep_alive = fields::persists(version, connection.into_iter().flatten());

    let head = RequestHead { method, target, version, headers, body, keep_alive, expect_continue };
    Ok(Some((head, head_len)))
}

/// Which fields that decide a request's framing and persistence it has, noted while its map is
/// built: most requests have none of them (a GET with a `Host`), and looking each up in the map
/// costs a hash and a probe.
#[derive(Default)]
struct Noted {
    /// `Content-Length` or `Transfer-Encoding`.
    framing: bool,
    expect: bool,
    connection: bool,
}

impl Noted {
    fn note(&mut self, name: &HeaderName) {
        self.framing |= name == header::CONTENT_LENGTH || name == header::TRANSFER_ENCODING;
        self.expect |= name == header::EXPECT;
        self.connection |= name == header::CONNECTION;
    }
}

/// Fields the front adds before a request goes to a worker (`Content-Length`, `X-Request-Start`,
/// `X-Forwarded-For` and `X-Forwarded-Proto`): room for them from the start spares the map two
/// reallocations a request.
const ADDED_ON_THE_WAY: usize = 4;

/// The values of every field named `name`, as bytes.
fn values<'a>(headers: &'a HeaderMap, name: &HeaderName) -> impl Iterator<Item = &'a [u8]> {
    headers.get_all(name).iter().map(HeaderValue::as_bytes)
}

/// The request line, leading empty lines skipped; `None` until all of it is there.
fn request_line(buf: &[u8]) -> Option<&[u8]> {
    let start = buf.iter().position(|&b| b != b'\r' && b != b'\n')?;
    let end = buf[start..].iter().position(|&b| b == b'\n')?;
    let line = &buf[start..start + end];
    Some(line.strip_suffix(b"\r").unwrap_or(line))
}

/// Whether the request line (when it is all there) looks like HTTP at all: it names an HTTP version
/// somewhere (`HTTP/1.1 ` with a space after, `http/1.1`: malformed, but HTTP), or it starts like
/// an HTTP/0.9 request (`GET /path`). A line that does neither cannot be answered in a protocol
/// its sender speaks.
fn names_http(buf: &[u8]) -> bool {
    request_line(buf).is_none_or(|line| {
        let names_version = line.windows(5).any(|five| five.eq_ignore_ascii_case(b"HTTP/"));
        let mut words = line.splitn(2, |&b| b == b' ');
        let method = words.next().unwrap_or_default();
        let starts_like_a_request = !method.is_empty()
            && method.iter().all(|&b| b.is_ascii_uppercase() || b == b'-')
            && words.next().is_some_and(|rest| rest.starts_with(b"/"));
        names_version || starts_like_a_request
    })
}

/// Whether the request line ends in a well-formed version other than HTTP/1.x (`HTTP/2.0`):
/// that is 505; anything else in its place is a malformed request.
fn names_another_version(buf: &[u8]) -> bool {
    let line = request_line(buf).unwrap_or_default();
    let version = line.rsplit(|&b| b == b' ').next().unwrap_or_default();
    matches!(version, [b'H', b'T', b'T', b'P', b'/', major, b'.', minor] if major.is_ascii_digit() && minor.is_ascii_digit())
}

/// A head over the limit: 414 if the request line alone does not fit, else 431.
fn too_large(buf: &[u8], max_head: usize) -> HttpError {
    // Leading empty lines are allowed before the request line; skip them first.
    let start = buf.iter().position(|&b| b != b'\r' && b != b'\n').unwrap_or(buf.len());
    match buf[start..].iter().position(|&b| b == b'\n') {
        Some(line_len) if start + line_len < max_head => {
            HttpError::new(StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE, "request header too large")
        }
        _ => HttpError::new(StatusCode::URI_TOO_LONG, "request line too long"),
    }
}

/// Turns the request target into origin form and checks it fits the method (RFC 9112 3.2). A
/// fragment (`#`) is refused: no request target has one (RFC 9112 section 3.2), and `http::Uri`
/// would drop it.
fn origin_target(method: &Method, target: &str, headers: &mut HeaderMap) -> Result<String, HttpError> {
    if method == Method::CONNECT {
        return Err(HttpError::new(StatusCode::NOT_IMPLEMENTED, "CONNECT is not supported"));
    }
    if target.contains('#') {
        return Err(HttpError::bad_request("request target has a fragment"));
    }
    if target.starts_with('/') {
        return Ok(target.to_owned());
    }
    if target == "*" {
        return if method == Method::OPTIONS {
            Ok(target.to_owned())
        } else {
            Err(HttpError::bad_request("'*' is only a target for OPTIONS"))
        };
    }
    // Absolute form: the authority in the target wins over any Host field.
    let uri: Uri = target.parse().map_err(|_| HttpError::bad_request("malformed request target"))?;
    let (Some(scheme), Some(authority)) = (uri.scheme_str(), uri.authority()) else {
        return Err(HttpError::bad_request("malformed request target"));
    };
    if !scheme.eq_ignore_ascii_case("http") && !scheme.eq_ignore_ascii_case("https") {
        return Err(HttpError::bad_request("request target has an unsupported scheme"));
    }
    if has_userinfo(authority.as_str()) {
        return Err(HttpError::bad_request("request target has userinfo"));
    }
    let host =
        HeaderValue::from_str(authority.as_str()).map_err(|_| HttpError::bad_request("malformed request target"))?;
    headers.insert(header::HOST, host);
    // An empty path is `/` in origin form (`http://a?x` asks for `/?x`).
    Ok(match uri.path_and_query().map(|pq| pq.as_str()) {
        Some(pq) if pq.starts_with('/') => pq.to_owned(),
        pq => format!("/{}", pq.unwrap_or_default()),
    })
}

/// Whether an authority (`Host`, an absolute-form target's, HTTP/2's `:authority`) carries
/// userinfo (`user@host`): refused, as RFC 9110 section 4.2.4 says a recipient should, so no
/// app is told a host the client disguised.
fn has_userinfo(authority: &str) -> bool {
    authority.contains('@')
}

/// HTTP/1.1 requires exactly one Host field; any request may have at most one (RFC 9112 3.2). It
/// is `host[:port]`, without userinfo ([`has_userinfo`]).
pub fn check_host(version: Version, headers: &HeaderMap) -> Result<(), HttpError> {
    let mut hosts = headers.get_all(header::HOST).iter();
    match (hosts.next(), hosts.next()) {
        (None, _) if version == Version::HTTP_11 => Err(HttpError::bad_request("missing Host header")),
        (Some(_), Some(_)) => Err(HttpError::bad_request("more than one Host header")),
        (Some(host), None) if !host.is_empty() && !is_plain_host(host.as_bytes()) => host
            .to_str()
            .ok()
            .filter(|host| !has_userinfo(host))
            .and_then(|h| h.parse::<http::uri::Authority>().ok())
            .map(|_| ())
            .ok_or(HttpError::bad_request("malformed Host header")),
        _ => Ok(()),
    }
}

/// A name of letters, digits, dots and hyphens with a port of digits or none: the `Host` of
/// nearly every request, valid on sight. Anything else is judged by http's `Authority` parse,
/// which copies the value into an allocation of its own first (0.6k instructions a request).
fn is_plain_host(host: &[u8]) -> bool {
    let (name, port) = match host.iter().position(|&byte| byte == b':') {
        Some(colon) => (&host[..colon], &host[colon + 1..]),
        None => (host, &[][..]),
    };
    !name.is_empty()
        && name.iter().all(|&byte| byte.is_ascii_alphanumeric() || byte == b'.' || byte == b'-')
        && port.iter().all(u8::is_ascii_digit)
}

/// Decides where the body ends (RFC 9112 section 6), refusing anything two parsers could read
/// differently.
fn body_kind(version: Version, headers: &HeaderMap, limits: &Limits) -> Result<BodyKind, HttpError> {
    if let Some(coding) = fields::transfer_coding(values(headers, &header::TRANSFER_ENCODING)) {
        if headers.contains_key(header::CONTENT_LENGTH) {
            return Err(HttpError::bad_request("both Content-Length and Transfer-Encoding"));
        }
        if version == Version::HTTP_10 {
            return Err(HttpError::bad_request("Transfer-Encoding in an HTTP/1.0 request"));
        }
        return match coding {
            Coding::Chunked => Ok(BodyKind::Chunked),
            Coding::Unsupported => Err(HttpError::new(StatusCode::NOT_IMPLEMENTED, "unsupported transfer-coding")),
            Coding::Repeated => Err(HttpError::bad_request("chunked applied more than once")),
        };
    }
    match fields::content_length(values(headers, &header::CONTENT_LENGTH)).map_err(HttpError::bad_request)? {
        Some(0) | None => Ok(BodyKind::Empty),
        Some(n) if n > limits.max_body => Err(HttpError::new(StatusCode::PAYLOAD_TOO_LARGE, "request body too large")),
        Some(n) => Ok(BodyKind::Length(n)),
    }
}

/// `Expect: 100-continue` is the only expectation defined; HTTP/1.0 clients cannot use it
/// (RFC 9110 section 10.1.1).
fn expects_continue(version: Version, headers: &HeaderMap) -> Result<bool, HttpError> {
    let mut expect = false;
    for token in fields::comma_tokens(headers, &header::EXPECT) {
        if !token.eq_ignore_ascii_case(b"100-continue") {
            return Err(HttpError::new(StatusCode::EXPECTATION_FAILED, "unsupported expectation"));
        }
        expect = true;
    }
    Ok(expect && version == Version::HTTP_11)
}

/// Appends an HTTP/1.1 request head: the request line and `fields` as given (the caller has
/// decided the framing fields), then the blank line.
pub fn write_head<'a>(
    out: &mut BytesMut,
    method: &str,
    target: &str,
    fields: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
) {
    out.reserve(128);
    out.put_slice(method.as_bytes());
    out.put_u8(b' ');
    out.put_slice(target.as_bytes());
    out.put_slice(b" HTTP/1.1\r\n");
    for (name, value) in fields {
        crate::response::put_field(out, name, value);
    }
    out.put_slice(b"\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: Limits = Limits { max_head: 1024, max_body: 1000 };

    fn parse(raw: &str) -> Result<Option<(RequestHead, usize)>, HttpError> {
        parse_head(raw.as_bytes(), &LIMITS)
    }

    fn head(raw: &str) -> RequestHead {
        parse(raw).expect("valid").expect("complete").0
    }

    fn status(raw: &str) -> StatusCode {
        parse(raw).expect_err("should be refused").status
    }

    #[test]
    fn simple_get() {
        let raw = "GET /hello?x=1 HTTP/1.1\r\nHost: a.example\r\n\r\nrest";
        let (head, len) = parse(raw).unwrap().unwrap();
        assert_eq!(len, raw.len() - 4);
        assert_eq!(head.method, Method::GET);
        assert_eq!(head.target, "/hello?x=1");
        assert_eq!(head.version, Version::HTTP_11);
        assert_eq!(head.body, BodyKind::Empty);
        assert!(head.keep_alive);
        assert!(!head.expect_continue);
    }

    #[test]
    fn partial_head_needs_more() {
        assert!(parse("GET / HTTP/1.1\r\nHost: a\r\n").unwrap().is_none());
        assert!(parse("").unwrap().is_none());
    }

    #[test]
    fn leading_empty_lines_are_ignored() {
        assert_eq!(head("\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n").target, "/");
    }

    #[test]
    fn oversized_heads_get_431_or_414() {
        let long_field = format!("GET / HTTP/1.1\r\nHost: a\r\nX: {}\r\n\r\n", "v".repeat(2000));
        assert_eq!(status(&long_field), StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE);
        let partial_field = format!("GET / HTTP/1.1\r\nX: {}", "v".repeat(2000));
        assert_eq!(status(&partial_field), StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE);
        let long_line = format!("GET /{} HTTP/1.1", "a".repeat(2000));
        assert_eq!(status(&long_line), StatusCode::URI_TOO_LONG);
        let long_complete_line = format!("GET /{} HTTP/1.1\r\nHost: a\r\n\r\n", "a".repeat(2000));
        assert_eq!(status(&long_complete_line), StatusCode::URI_TOO_LONG);
        let many: String = (0..=MAX_HEADERS).map(|i| format!("X-{i}: v\r\n")).collect();
        let big = Limits { max_head: 1 << 20, max_body: 0 };
        let raw = format!("GET / HTTP/1.1\r\nHost: a\r\n{many}\r\n");
        assert_eq!(parse_head(raw.as_bytes(), &big).unwrap_err().status, StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE);
    }

    #[test]
    fn malformed_heads_get_400() {
        assert_eq!(status("GET / HTTP/1.1\r\nBad Header: x\r\n\r\n"), StatusCode::BAD_REQUEST);
        assert_eq!(status("G(T / HTTP/1.1\r\nHost: a\r\n\r\n"), StatusCode::BAD_REQUEST);
        assert_eq!(status("GET / HTTP/1.1\r\nHost: a\r\n folded\r\n\r\n"), StatusCode::BAD_REQUEST);
        assert_eq!(status("GET / HTTP/1.1\r\nHost: a\nb\r\n\r\n"), StatusCode::BAD_REQUEST);
        assert_eq!(status("GET / HTTP/1.1\r\nHost: a\r\nX: b\rc\r\n\r\n"), StatusCode::BAD_REQUEST);
        assert_eq!(status("GET / HTTP/1.1\r\nHost: a\r\nX: b\0c\r\n\r\n"), StatusCode::BAD_REQUEST);
        assert_eq!(status("GET / HTTP/2.0\r\nHost: a\r\n\r\n"), StatusCode::HTTP_VERSION_NOT_SUPPORTED);
        assert_eq!(status("GET / HTTX/1.1\r\nHost: a\r\n\r\n"), StatusCode::BAD_REQUEST);
        assert_eq!(status("GET / HTTP/1.12\r\nHost: a\r\n\r\n"), StatusCode::BAD_REQUEST);
        for not_http in ["INVALID CONNECTION PREFACE\r\n\r\n", "GARBAGE\r\n\r\n", "\x16\x03\x01 x\r\n\r\n"] {
            assert_eq!(parse(not_http).unwrap_err(), NOT_HTTP, "{not_http:?}");
        }
        for malformed_http in
            ["GET / HTTP/1.1 \r\nHost: a\r\n\r\n", "GET / http/1.1\r\nHost: a\r\n\r\n", "GET /\r\n\r\n"]
        {
            assert_eq!(status(malformed_http), StatusCode::BAD_REQUEST, "{malformed_http:?}");
            assert_ne!(parse(malformed_http).unwrap_err(), NOT_HTTP, "{malformed_http:?}");
        }
        assert_ne!(parse("G(T / HTTP/1.1\r\nHost: a\r\n\r\n").unwrap_err(), NOT_HTTP);
    }

    #[test]
    fn host_rules() {
        assert_eq!(status("GET / HTTP/1.1\r\n\r\n"), StatusCode::BAD_REQUEST);
        assert_eq!(status("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"), StatusCode::BAD_REQUEST);
        assert_eq!(status("GET / HTTP/1.1\r\nHost: a b\r\n\r\n"), StatusCode::BAD_REQUEST);
        assert_eq!(status("GET / HTTP/1.1\r\nHost: user@a.example\r\n\r\n"), StatusCode::BAD_REQUEST);
        assert_eq!(status("GET / HTTP/1.1\r\nHost: user:pw@a.example:80\r\n\r\n"), StatusCode::BAD_REQUEST);
        assert_eq!(head("GET / HTTP/1.0\r\n\r\n").version, Version::HTTP_10);
        assert_eq!(head("GET / HTTP/1.1\r\nHost: [::1]:8080\r\n\r\n").headers[header::HOST], "[::1]:8080");
    }

    /// The plain hosts passed on sight are a part of what http's parse accepts: every string of up
    /// to five bytes from the letters such hosts are made of, with the separators around them.
    #[test]
    fn a_plain_host_is_one_the_authority_parse_accepts() {
        let alphabet = b"a9.-:@[]% ";
        let mut hosts = vec![Vec::new()];
        let mut plain = 0;
        for _ in 0..5 {
            hosts =
                hosts.iter().flat_map(|host| alphabet.iter().map(move |&byte| [&host[..], &[byte]].concat())).collect();
            for host in &hosts {
                if is_plain_host(host) {
                    plain += 1;
                    let text = std::str::from_utf8(host).unwrap();
                    assert!(
                        text.parse::<http::uri::Authority>().is_ok(),
                        "{text:?} passed on sight, refused by the parse"
                    );
                }
            }
        }
        assert!(plain > 1000, "only {plain} hosts were plain: the test no longer covers the fast path");
        for refused in ["a:b", "a:1:2", ":80", "a b", "a@b", "[::1"] {
            assert!(!is_plain_host(refused.as_bytes()), "{refused:?}");
        }
    }

    #[test]
    fn absolute_form_becomes_origin_form_and_sets_host() {
        let h = head("GET http://b.example:8080/p?q HTTP/1.1\r\nHost: a.example\r\n\r\n");
        assert_eq!(h.target, "/p?q");
        assert_eq!(h.headers[header::HOST], "b.example:8080");
        assert_eq!(status("GET ftp://x/ HTTP/1.1\r\nHost: a\r\n\r\n"), StatusCode::BAD_REQUEST);
        assert_eq!(status("GET http://u@b.example/ HTTP/1.1\r\nHost: a\r\n\r\n"), StatusCode::BAD_REQUEST);
        for (target, origin) in [("http://b?x", "/?x"), ("http://b", "/"), ("https://b:8443?", "/?")] {
            let h = head(&format!("GET {target} HTTP/1.1\r\nHost: a\r\n\r\n"));
            assert_eq!(h.target, origin, "{target}: an empty path is /");
            assert_ne!(h.headers[header::HOST], "a", "{target}");
        }
    }

    #[test]
    fn a_fragment_is_no_part_of_a_target() {
        for target in ["/a#b", "/a?q=1#b", "/#", "http://b/a#b", "http://b#b"] {
            let raw = format!("GET {target} HTTP/1.1\r\nHost: a\r\n\r\n");
            assert_eq!(status(&raw), StatusCode::BAD_REQUEST, "{target}");
        }
    }

    #[test]
    fn lowercase_methods_are_unknown() {
        assert_eq!(status("get / HTTP/1.1\r\nHost: a\r\n\r\n"), StatusCode::NOT_IMPLEMENTED);
        assert_eq!(status("Post / HTTP/1.1\r\nHost: a\r\n\r\n"), StatusCode::NOT_IMPLEMENTED);
        assert_eq!(head("M-SEARCH / HTTP/1.1\r\nHost: a\r\n\r\n").method.as_str(), "M-SEARCH");
    }

    #[test]
    fn asterisk_and_connect() {
        assert_eq!(head("OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n").target, "*");
        assert_eq!(status("GET * HTTP/1.1\r\nHost: a\r\n\r\n"), StatusCode::BAD_REQUEST);
        assert_eq!(status("CONNECT a:443 HTTP/1.1\r\nHost: a\r\n\r\n"), StatusCode::NOT_IMPLEMENTED);
    }

    #[test]
    fn content_length_framing() {
        let h = head("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\n");
        assert_eq!(h.body, BodyKind::Length(5));
        let same = head("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5, 5\r\nContent-Length: 5\r\n\r\n");
        assert_eq!(same.body, BodyKind::Length(5));
        assert_eq!(head("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n").body, BodyKind::Empty);
    }

    #[test]
    fn bad_content_lengths_are_refused() {
        for cl in ["5, 6", "-1", "+5", "0x10", "", "5 5", "99999999999999999999"] {
            let raw = format!("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: {cl}\r\n\r\n");
            assert_eq!(status(&raw), StatusCode::BAD_REQUEST, "Content-Length: {cl}");
        }
        let two = "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n";
        assert_eq!(status(two), StatusCode::BAD_REQUEST);
    }

    #[test]
    fn body_over_limit_gets_413() {
        let raw = "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1001\r\n\r\n";
        assert_eq!(status(raw), StatusCode::PAYLOAD_TOO_LARGE);
    }

    #[test]
    fn transfer_encoding_rules() {
        let chunked = head("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: Chunked\r\n\r\n");
        assert_eq!(chunked.body, BodyKind::Chunked);
        let both = "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n";
        assert_eq!(status(both), StatusCode::BAD_REQUEST);
        let gzip = "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n";
        assert_eq!(status(gzip), StatusCode::NOT_IMPLEMENTED);
        let unknown = "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: foo\r\n\r\n";
        assert_eq!(status(unknown), StatusCode::NOT_IMPLEMENTED);
        let twice = "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n";
        assert_eq!(status(twice), StatusCode::BAD_REQUEST);
        let old = "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n";
        assert_eq!(status(old), StatusCode::BAD_REQUEST);
    }

    #[test]
    fn keep_alive_rules() {
        assert!(head("GET / HTTP/1.1\r\nHost: a\r\n\r\n").keep_alive);
        assert!(!head("GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n").keep_alive);
        assert!(!head("GET / HTTP/1.0\r\n\r\n").keep_alive);
        assert!(head("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n").keep_alive);
        assert!(!head("GET / HTTP/1.1\r\nHost: a\r\nConnection: keep-alive, close\r\n\r\n").keep_alive);
    }

    #[test]
    fn expect_rules() {
        let raw = "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nExpect: 100-Continue\r\n\r\n";
        assert!(head(raw).expect_continue);
        let old = "POST / HTTP/1.0\r\nContent-Length: 3\r\nExpect: 100-continue\r\n\r\n";
        assert!(!head(old).expect_continue);
        let other = "POST / HTTP/1.1\r\nHost: a\r\nExpect: tea\r\n\r\n";
        assert_eq!(status(other), StatusCode::EXPECTATION_FAILED);
    }

    #[test]
    fn written_heads_parse_back() {
        let mut out = BytesMut::new();
        write_head(&mut out, "POST", "/p?q", [(&b"host"[..], &b"a"[..]), (b"content-length", b"0")]);
        assert_eq!(&out[..], b"POST /p?q HTTP/1.1\r\nhost: a\r\ncontent-length: 0\r\n\r\n");
        let (parsed, len) = parse_head(&out, &LIMITS).unwrap().unwrap();
        assert_eq!((parsed.method, parsed.target.as_str(), len), (Method::POST, "/p?q", out.len()));
    }
}
