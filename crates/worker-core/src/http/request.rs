//! A request as the worker's apps need it: the WSGI environ's keys and the ASGI scope's fields,
//! from a head `headway_http1` parsed (a connection of the worker's own) or from fields the
//! front already checked (the hop).

use std::borrow::Cow;

use headway_http1::body::BodyKind;
use headway_http1::request::RequestHead;
use headway_http1::{fields, HttpError};
use http::Version;

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
    /// Where the body ends.
    pub body: BodyKind,
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

    /// The request's protocol as WSGI's `SERVER_PROTOCOL` names it; ASGI's `http_version` is
    /// what follows the slash.
    pub fn protocol(&self) -> &'static str {
        match self.version {
            Version::HTTP_10 => "HTTP/1.0",
            Version::HTTP_2 => "HTTP/2",
            _ => "HTTP/1.1",
        }
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

    /// A request of `method` for `target` in `version`, with no fields yet.
    fn new(method: &[u8], target: &[u8], version: Version) -> Request {
        let (path, query) = split_target(target);
        Request {
            method: latin1(method),
            path,
            query,
            version,
            headers: Vec::new(),
            body: BodyKind::Empty,
            keep_alive: version == Version::HTTP_11,
            expect_continue: false,
            front_client: None,
        }
    }

    /// Adds one header field as its environ key: a repeated field joins the first (`; ` for
    /// cookies), a name with `_` is dropped.
    fn add_field(&mut self, name: &str, value: &[u8]) {
        let Some(key) = environ_key(name) else { return };
        let value = latin1(fields::trim_blanks(value));
        match self.headers.iter_mut().find(|(k, _)| *k == key) {
            // Repeated lengths were checked to be the same number: one is said once.
            Some(entry) if key == "CONTENT_LENGTH" => entry.1 = value,
            Some(entry) => {
                entry.1.push_str(if key == "HTTP_COOKIE" { "; " } else { ", " });
                entry.1.push_str(&value);
            }
            None => self.headers.push((key, value)),
        }
    }
}

/// The request a head `headway_http1` parsed.
pub fn from_head(head: RequestHead) -> Request {
    let mut request = Request::new(head.method.as_str().as_bytes(), head.target.as_bytes(), head.version);
    request.headers.reserve(head.headers.len());
    for (name, value) in &head.headers {
        request.add_field(name.as_str(), value.as_bytes());
    }
    request.body = head.body;
    request.keep_alive = head.keep_alive;
    request.expect_continue = head.expect_continue;
    request
}

/// A request from fields already split and checked (by the headway front, over the hop): no
/// transfer-coding, no `Expect`, no `Connection` (the front removed them); its body is
/// `Content-Length` long.
pub fn from_fields<'a>(
    method: &[u8],
    target: &[u8],
    version: Version,
    fields: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
) -> Result<Request, HttpError> {
    let mut request = Request::new(method, target, version);
    let fields = fields.into_iter();
    request.headers.reserve(fields.size_hint().0);
    let mut length = None;
    for (name, value) in fields {
        let name = std::str::from_utf8(name).map_err(|_| HttpError::bad_request("bad header name"))?;
        if name.eq_ignore_ascii_case("content-length") {
            length = fields::content_length([value]).map_err(HttpError::bad_request)?;
        }
        request.add_field(name, value);
    }
    request.body = match length {
        None | Some(0) => BodyKind::Empty,
        Some(length) => BodyKind::Length(length),
    };
    Ok(request)
}

/// (path, query) of an origin-form target, or ("", "") for `*`.
fn split_target(target: &[u8]) -> (String, String) {
    if target == b"*" {
        return (String::new(), String::new());
    }
    match target.iter().position(|&b| b == b'?') {
        Some(mark) => (latin1(&target[..mark]), latin1(&target[mark + 1..])),
        None => (latin1(target), String::new()),
    }
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
    use headway_http1::request::{parse_head, Limits};
    use http::StatusCode;

    fn parse_request(head: &[u8]) -> Result<Request, HttpError> {
        let limits = Limits { max_head: 1 << 20, max_body: u64::MAX };
        let head = [head, b"\r\n\r\n"].concat();
        Ok(from_head(parse_head(&head, &limits)?.expect("complete").0))
    }

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
            ("POST", "/a%20b/c", "x=1&y=2", Version::HTTP_11)
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
        assert_eq!(request.body, BodyKind::Length(3));
        assert_eq!((request.keep_alive, request.expect_continue), (true, false));
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
        let request = parse(b"PUT / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: Chunked\r\nExpect: 100-Continue");
        assert!(request.body == BodyKind::Chunked && request.expect_continue);
        assert!(!parse(b"PUT / HTTP/1.0\r\nExpect: 100-continue").expect_continue);
    }

    #[test]
    fn asterisk_and_absolute_targets() {
        let request = parse(b"OPTIONS * HTTP/1.1\r\nHost: x");
        assert_eq!((request.path.as_str(), request.query.as_str()), ("", ""));
        let request = parse(b"GET https://example.com:8443/p/q?z=9 HTTP/1.1\r\nHost: x");
        assert_eq!((request.path.as_str(), request.query.as_str()), ("/p/q", "z=9"));
        assert_eq!(parse(b"GET http://example.com HTTP/1.1\r\nHost: x").path, "/");
        assert_eq!(request.header("HTTP_HOST"), Some("example.com:8443"));
    }

    #[test]
    fn malformed_heads() {
        let many_headers = [&b"GET / HTTP/1.1\r\nHost: x"[..], &b"\r\nA: b".repeat(101)].concat();
        let cases: [(&[u8], u16); 17] = [
            (b"GET / HTTP/1.1 x\r\nHost: x", 400),
            (b"GET  / HTTP/1.1\r\nHost: x", 400),
            (b"G(T / HTTP/1.1\r\nHost: x", 400),
            (b"GET / HTTP/3.0\r\nHost: x", 505),
            (b"GET / HTTX/1.1\r\nHost: x", 400),
            (b"GET nothing HTTP/1.1\r\nHost: x", 400),
            (b"GET / HTTP/1.1\r\nNo-Colon", 400),
            (b"GET / HTTP/1.1\r\nBad Name: x", 400),
            (b"GET / HTTP/1.1\r\n: empty name", 400),
            (b"GET / HTTP/1.1\r\nA: b\rc", 400),
            (b"GET / HTTP/1.1\r\nA: b\x00", 400),
            (b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 1e3", 400),
            (b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: \xb2", 400), // latin-1 superscript two
            (b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2", 400),
            (b"GET / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 2", 400),
            (b"GET / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked", 501),
            (b"GET / HTTP/1.1\r\nHost: x\r\nExpect: something", 417),
        ];
        for (head, status) in cases {
            let error = parse_request(head).expect_err(&String::from_utf8_lossy(head));
            assert_eq!(error.status, status, "{}", String::from_utf8_lossy(head));
        }
        let error = parse_request(&many_headers).unwrap_err();
        assert_eq!(error.status, StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE);
    }

    #[test]
    fn same_content_length_twice_is_said_once() {
        let request = parse(b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 2");
        assert_eq!(request.body, BodyKind::Length(2));
        assert_eq!(request.header("CONTENT_LENGTH"), Some("2"));
    }

    #[test]
    fn fields_from_the_front() {
        let fields: [(&[u8], &[u8]); 3] = [(b"host", b"a"), (b"content-length", b"5"), (b"x_evil", b"1")];
        let request = from_fields(b"POST", b"/p?q=1", Version::HTTP_11, fields).unwrap();
        assert_eq!((request.path.as_str(), request.query.as_str(), request.body), ("/p", "q=1", BodyKind::Length(5)));
        assert_eq!(request.headers.len(), 2, "a name with _ is dropped");
        let bad: [(&[u8], &[u8]); 1] = [(b"content-length", b"x")];
        assert!(from_fields(b"POST", b"/", Version::HTTP_11, bad).is_err());
    }

    #[test]
    fn protocols() {
        assert_eq!(parse(b"GET / HTTP/1.0").protocol(), "HTTP/1.0");
        assert_eq!(parse(b"GET / HTTP/1.1\r\nHost: x").protocol(), "HTTP/1.1");
    }
}
