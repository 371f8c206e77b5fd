//! Parsing a request head into what the WSGI environ needs, and deciding keep-alive, body
//! framing and `Expect: 100-continue`.
//!
//! The request line is split by hand (the worker's messages name which part is wrong);
//! `httparse` tokenizes the header fields. Before either, any CR or LF that is not part of a
//! CRLF, and any NUL, refuses the whole head: two parsers could disagree on where it ends.

use std::borrow::Cow;

use super::{is_token, trim_blanks, HttpError};

/// More header fields than this get 431. The headway front allows as many.
pub const MAX_HEADERS: usize = 100;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    Http10,
    Http11,
    /// Only through the hop, from an HTTP/2 client of the front.
    Http2,
}

impl Version {
    pub fn as_str(self) -> &'static str {
        match self {
            Version::Http10 => "HTTP/1.0",
            Version::Http11 => "HTTP/1.1",
            Version::Http2 => "HTTP/2",
        }
    }
}

/// The parsed head of one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub method: String,
    /// The path as sent (still percent-encoded); empty for `*`.
    pub path: String,
    pub query: String,
    pub version: Version,
    /// CGI environ keys (`HTTP_HOST`, `CONTENT_TYPE`, ...) and their values, read as latin-1,
    /// in the order first seen; a repeated field is joined to the first (`; ` for cookies).
    pub headers: Vec<(Cow<'static, str>, String)>,
    pub content_length: Option<u64>,
    pub chunked: bool,
    pub keep_alive: bool,
    pub expect_continue: bool,
    /// The client's address as the front judged it from the peer and trusted proxies' word;
    /// only the hop carries it.
    pub front_client: Option<String>,
}

impl Request {
    /// The value of the header with this environ key.
    pub fn header(&self, key: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }

    pub fn is_head(&self) -> bool {
        self.method == "HEAD"
    }

    /// The client's address: as the front judged it, else (over a socket, where nobody says)
    /// the last X-Forwarded-For entry, the address the last proxy received the request from.
    pub fn client(&self) -> Option<&str> {
        let forwarded_for = || self.header("HTTP_X_FORWARDED_FOR").filter(|v| !v.is_empty()).map(last_item);
        self.front_client.as_deref().or_else(forwarded_for)
    }

    /// Whether the client came over TLS, as the last proxy says in X-Forwarded-Proto.
    pub fn is_https(&self) -> bool {
        self.header("HTTP_X_FORWARDED_PROTO")
            .is_some_and(|proto| proto != "http" && last_item(proto).eq_ignore_ascii_case("https"))
    }
}

/// Parses a request head: the bytes up to, and without, the blank line that ends it.
pub fn parse_request(head: &[u8]) -> Result<Request, HttpError> {
    let lines = check_characters(head)?;
    let line_end = memchr::memmem::find(head, b"\r\n").unwrap_or(head.len());
    let (method, target, version) = request_line(&head[..line_end])?;
    let (path, query) = split_target(target)?;
    if lines > MAX_HEADERS + 1 {
        return Err(HttpError::new(431, "too many headers"));
    }
    let mut request = Request {
        method: latin1(method),
        path,
        query,
        version,
        headers: Vec::with_capacity(lines - 1),
        content_length: None,
        chunked: false,
        keep_alive: version == Version::Http11,
        expect_continue: false,
        front_client: None,
    };
    if line_end < head.len() {
        read_fields(&head[line_end + 2..], &mut request)?;
    }
    decide(&mut request)?;
    Ok(request)
}

/// Refuses a CR or LF outside a CRLF, and NUL; returns the number of lines.
fn check_characters(head: &[u8]) -> Result<usize, HttpError> {
    const BAD: HttpError = HttpError::bad_request("bad characters in request head");
    let mut lines = 1;
    for position in memchr::memchr3_iter(b'\r', b'\n', 0, head) {
        match head[position] {
            b'\r' if head.get(position + 1) == Some(&b'\n') => lines += 1,
            b'\n' if position > 0 && head[position - 1] == b'\r' => {}
            _ => return Err(BAD),
        }
    }
    Ok(lines)
}

fn request_line(line: &[u8]) -> Result<(&[u8], &[u8], Version), HttpError> {
    const BAD_LINE: HttpError = HttpError::bad_request("bad request line");
    let mut parts = line.split(|&b| b == b' ');
    let (Some(method), Some(target), Some(version), None) = (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(BAD_LINE);
    };
    if !is_token(method) {
        return Err(HttpError::bad_request("bad method"));
    }
    let version = match version {
        b"HTTP/1.1" => Version::Http11,
        b"HTTP/1.0" => Version::Http10,
        [b'H', b'T', b'T', b'P', b'/', major, b'.', minor] if major.is_ascii_digit() && minor.is_ascii_digit() => {
            return Err(HttpError::new(505, "HTTP version not supported"))
        }
        _ => return Err(BAD_LINE),
    };
    Ok((method, target, version))
}

/// (path, query) of the request target: origin form, `*`, or absolute form (RFC 9112 3.2).
fn split_target(target: &[u8]) -> Result<(String, String), HttpError> {
    const BAD_TARGET: HttpError = HttpError::bad_request("bad request target");
    let origin = match target {
        [] => return Err(BAD_TARGET),
        [b'/', ..] => target,
        b"*" => return Ok((String::new(), String::new())),
        _ => {
            let sep = memchr::memmem::find(target, b"://").ok_or(BAD_TARGET)?;
            if !is_token(&target[..sep]) {
                return Err(BAD_TARGET);
            }
            let rest = &target[sep + 3..];
            // No path after the authority: "/" (and what followed the authority is dropped).
            rest.iter().position(|&b| b == b'/').map_or(&b"/"[..], |slash| &rest[slash..])
        }
    };
    Ok(match origin.iter().position(|&b| b == b'?') {
        Some(mark) => (latin1(&origin[..mark]), latin1(&origin[mark + 1..])),
        None => (latin1(origin), String::new()),
    })
}

/// The header fields (`fields` is what follows the request line's CRLF).
fn read_fields(fields: &[u8], request: &mut Request) -> Result<(), HttpError> {
    let mut parsed = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut terminated = Vec::with_capacity(fields.len() + 4);
    terminated.extend_from_slice(fields);
    terminated.extend_from_slice(b"\r\n\r\n");
    let parsed = match httparse::parse_headers(&terminated, &mut parsed) {
        Ok(httparse::Status::Complete((_, parsed))) => parsed,
        Ok(httparse::Status::Partial) | Err(_) => return Err(field_error(fields)),
    };
    for field in parsed {
        add_field(request, field.name, field.value)?;
    }
    Ok(())
}

/// Adds one header field to the request's environ keys: a repeated field joins the first (`; `
/// for cookies), a name with `_` is dropped.
fn add_field(request: &mut Request, name: &str, value: &[u8]) -> Result<(), HttpError> {
    let Some(key) = environ_key(name) else { return Ok(()) };
    let value = latin1(trim_blanks(value));
    if key == "CONTENT_LENGTH" {
        let length = content_length(&value)?;
        if request.content_length.is_some_and(|seen| seen != length) {
            return Err(HttpError::bad_request("conflicting Content-Length headers"));
        }
        request.content_length = Some(length);
        match request.headers.iter_mut().find(|(k, _)| *k == key) {
            Some(entry) => entry.1 = value,
            None => request.headers.push((key, value)),
        }
    } else if let Some(entry) = request.headers.iter_mut().find(|(k, _)| *k == key) {
        entry.1.push_str(if key == "HTTP_COOKIE" { "; " } else { ", " });
        entry.1.push_str(&value);
    } else {
        request.headers.push((key, value));
    }
    Ok(())
}

/// A request from fields already split and checked (by the headway front, over the hop): the
/// same rules as [`parse_request`] from there on.
pub fn from_fields<'a>(
    method: &[u8],
    target: &[u8],
    version: Version,
    fields: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
) -> Result<Request, HttpError> {
    let (path, query) = split_target(target)?;
    let mut request = Request {
        method: latin1(method),
        path,
        query,
        version,
        headers: Vec::new(),
        content_length: None,
        chunked: false,
        keep_alive: version == Version::Http11,
        expect_continue: false,
        front_client: None,
    };
    for (name, value) in fields {
        let name = std::str::from_utf8(name).map_err(|_| HttpError::bad_request("bad header name"))?;
        add_field(&mut request, name, value)?;
    }
    decide(&mut request)?;
    Ok(request)
}

/// Why httparse refused the fields, in the words of the line that is wrong.
fn field_error(fields: &[u8]) -> HttpError {
    for line in fields.split(|&b| b == b'\n') {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let Some(colon) = line.iter().position(|&b| b == b':') else {
            return HttpError::bad_request("bad header line");
        };
        if !is_token(&line[..colon]) {
            return HttpError::bad_request("bad header name");
        }
    }
    HttpError::bad_request("bad header value")
}

fn content_length(value: &str) -> Result<u64, HttpError> {
    if value.is_empty() || value.len() > 18 || !value.bytes().all(|b| b.is_ascii_digit()) {
        return Err(HttpError::bad_request("bad Content-Length"));
    }
    value.parse().map_err(|_| HttpError::bad_request("bad Content-Length"))
}

/// Keep-alive, chunked framing and `Expect`, from the fields read.
fn decide(request: &mut Request) -> Result<(), HttpError> {
    if let Some(connection) = request.header("HTTP_CONNECTION") {
        let connection = connection.to_ascii_lowercase();
        let has = |token: &str| connection.split(',').any(|t| t.trim_matches([' ', '\t']) == token);
        if has("close") {
            request.keep_alive = false;
        } else if !request.keep_alive && has("keep-alive") {
            request.keep_alive = true;
        }
    }
    if let Some(coding) = request.header("HTTP_TRANSFER_ENCODING") {
        if !coding.eq_ignore_ascii_case("chunked") {
            return Err(HttpError::new(501, "unsupported Transfer-Encoding"));
        }
        if request.content_length.is_some() {
            return Err(HttpError::bad_request("both Content-Length and Transfer-Encoding"));
        }
        request.chunked = true;
    }
    if let Some(expect) = request.header("HTTP_EXPECT") {
        if !expect.eq_ignore_ascii_case("100-continue") {
            return Err(HttpError::new(417, "unsupported Expect"));
        }
        request.expect_continue = request.version == Version::Http11;
    }
    Ok(())
}

/// The CGI environ key of a header name; None for a name with `_`, which could impersonate
/// one with `-` (such as X-Forwarded-For). The common names cost no allocation.
pub fn environ_key(name: &str) -> Option<Cow<'static, str>> {
    const COMMON: [(&str, &str); 14] = [
        ("host", "HTTP_HOST"),
        ("content-type", "CONTENT_TYPE"),
        ("content-length", "CONTENT_LENGTH"),
        ("connection", "HTTP_CONNECTION"),
        ("x-forwarded-for", "HTTP_X_FORWARDED_FOR"),
        ("x-forwarded-proto", "HTTP_X_FORWARDED_PROTO"),
        ("x-request-start", "HTTP_X_REQUEST_START"),
        ("user-agent", "HTTP_USER_AGENT"),
        ("accept", "HTTP_ACCEPT"),
        ("accept-encoding", "HTTP_ACCEPT_ENCODING"),
        ("accept-language", "HTTP_ACCEPT_LANGUAGE"),
        ("cookie", "HTTP_COOKIE"),
        ("transfer-encoding", "HTTP_TRANSFER_ENCODING"),
        ("expect", "HTTP_EXPECT"),
    ];
    if name.contains('_') {
        return None;
    }
    if let Some((_, key)) = COMMON.iter().find(|(common, _)| common.eq_ignore_ascii_case(name)) {
        return Some(Cow::Borrowed(key));
    }
    let key: String = name.bytes().map(|b| if b == b'-' { '_' } else { b.to_ascii_uppercase() as char }).collect();
    Some(Cow::Owned(format!("HTTP_{key}")))
}

/// Bytes read as latin-1, as PEP 3333 has the environ's strings.
pub fn latin1(bytes: &[u8]) -> String {
    match std::str::from_utf8(bytes) {
        Ok(text) if bytes.is_ascii() => text.to_owned(),
        _ => bytes.iter().map(|&b| b as char).collect(),
    }
}

/// The last item of a comma-separated header value.
fn last_item(list: &str) -> &str {
    list.rsplit(',').next().unwrap_or(list).trim_matches([' ', '\t'])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(head: &[u8]) -> Request {
        parse_request(head).unwrap_or_else(|error| panic!("{}: {error}", String::from_utf8_lossy(head)))
    }

    #[test]
    fn parses_the_fields() {
        let request = parse(
            b"POST /a%20b/c?x=1&y=2 HTTP/1.1\r\nHost: h:81\r\nContent-Length: 3\r\n\
              content-type: text/x\r\nX-A:  one \r\nX-A: two\r\nCookie: a=1\r\nCookie: b=2\r\nX_Evil: 1",
        );
        assert_eq!(
            (request.method.as_str(), request.path.as_str(), request.query.as_str(), request.version),
            ("POST", "/a%20b/c", "x=1&y=2", Version::Http11)
        );
        let headers: Vec<(&str, &str)> = request.headers.iter().map(|(k, v)| (k.as_ref(), v.as_str())).collect();
        assert_eq!(
            headers,
            [
                ("HTTP_HOST", "h:81"),
                ("CONTENT_LENGTH", "3"),
                ("CONTENT_TYPE", "text/x"),
                ("HTTP_X_A", "one, two"),
                ("HTTP_COOKIE", "a=1; b=2"),
            ]
        );
        assert_eq!(request.content_length, Some(3));
        assert_eq!((request.chunked, request.keep_alive, request.expect_continue), (false, true, false));
    }

    #[test]
    fn keep_alive_rules() {
        let cases = [
            ("HTTP/1.1", None, true),
            ("HTTP/1.1", Some("close"), false),
            ("HTTP/1.1", Some("Keep-Alive, Close"), false),
            ("HTTP/1.1", Some("closed-captions"), true),
            ("HTTP/1.0", None, false),
            ("HTTP/1.0", Some("keep-alive"), true),
            ("HTTP/1.0", Some("Keep-Alive"), true),
        ];
        for (version, connection, keep_alive) in cases {
            let mut head = format!("GET / {version}\r\nHost: x");
            if let Some(connection) = connection {
                head += &format!("\r\nConnection: {connection}");
            }
            assert_eq!(parse(head.as_bytes()).keep_alive, keep_alive, "{head}");
        }
    }

    #[test]
    fn chunked_and_expect() {
        let request = parse(b"PUT / HTTP/1.1\r\nTransfer-Encoding: Chunked\r\nExpect: 100-Continue");
        assert!(request.chunked && request.expect_continue && request.content_length.is_none());
        assert!(!parse(b"PUT / HTTP/1.0\r\nExpect: 100-continue").expect_continue);
    }

    #[test]
    fn asterisk_and_absolute_targets() {
        let request = parse(b"OPTIONS * HTTP/1.1");
        assert_eq!((request.path.as_str(), request.query.as_str()), ("", ""));
        let request = parse(b"GET https://example.com:8443/p/q?z=9 HTTP/1.1");
        assert_eq!((request.path.as_str(), request.query.as_str()), ("/p/q", "z=9"));
        assert_eq!(parse(b"GET http://example.com HTTP/1.1").path, "/");
    }

    #[test]
    fn malformed_heads() {
        let many_headers = [&b"GET / HTTP/1.1"[..], &b"\r\nA: b".repeat(101)].concat();
        let cases: [(&[u8], u16); 18] = [
            (b"GET / HTTP/1.1 x", 400),
            (b"GET  / HTTP/1.1", 400),
            (b"G(T / HTTP/1.1", 400),
            (b"GET / HTTP/3.0", 505),
            (b"GET / HTTX/1.1", 400),
            (b"GET nothing HTTP/1.1", 400),
            (b"GET / HTTP/1.1\r\nNo-Colon", 400),
            (b"GET / HTTP/1.1\r\nBad Name: x", 400),
            (b"GET / HTTP/1.1\r\n: empty name", 400),
            (b"GET / HTTP/1.1\r\nA: b\rc", 400),
            (b"GET / HTTP/1.1\r\nA: b\x00", 400),
            (b"GET / HTTP/1.1\r\nContent-Length: 1e3", 400),
            (b"GET / HTTP/1.1\r\nContent-Length: \xb2", 400), // a latin-1 superscript two is not a digit
            (b"GET / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2", 400),
            (b"GET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 2", 400),
            (b"GET / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked", 501),
            (b"GET / HTTP/1.1\r\nExpect: something", 417),
            (&many_headers, 431),
        ];
        for (head, status) in cases {
            let error = parse_request(head).expect_err(&String::from_utf8_lossy(head));
            assert_eq!(error.status, status, "{}", String::from_utf8_lossy(head));
        }
    }

    #[test]
    fn same_content_length_twice_is_accepted() {
        assert_eq!(parse(b"GET / HTTP/1.1\r\nContent-Length: 2\r\nContent-Length: 2").content_length, Some(2));
    }

    #[test]
    fn errors_name_what_is_wrong() {
        let message = |head: &[u8]| parse_request(head).unwrap_err().message;
        assert_eq!(message(b"GET / HTTP/1.1\r\nNo-Colon"), "bad header line");
        assert_eq!(message(b"GET / HTTP/1.1\r\nBad Name: x"), "bad header name");
        assert_eq!(message(b"GET / HTTP/1.1\r\n folded"), "bad header line");
        assert_eq!(message(b"G(T / HTTP/1.1"), "bad method");
        assert_eq!(message(b"GET nothing HTTP/1.1"), "bad request target");
    }
}
