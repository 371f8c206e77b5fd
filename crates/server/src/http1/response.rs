//! Writing response heads and body framing for clients.
//!
//! The worker's response reaches the front already parsed (by hyper's client); the front
//! re-frames it for its own client: the client's HTTP version, the front's own decision on
//! persistence, and a body delimited by `Content-Length`, chunked coding, or closing the
//! connection (HTTP/1.0 without a length). Responses the front makes itself (400, 503, ...) are
//! built here too, with a short plain-text body.

use std::cell::RefCell;
use std::fmt::Write as _;
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::{BufMut, Bytes, BytesMut};
use http::header::{self, HeaderMap, HeaderValue};
use http::{StatusCode, Version};

/// The last chunk of a chunked body, with no trailer fields.
pub const LAST_CHUNK: &[u8] = b"0\r\n\r\n";

/// How the connection continues after this response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Persistence {
    KeepAlive,
    Close,
}

/// Appends a status line and header section to `out`. `headers` must already hold the
/// message's own fields (hop-by-hop ones removed, `Content-Length` decided by the caller);
/// this adds `Date` when missing, `Transfer-Encoding: chunked` when `chunked`, and the
/// `Connection` field the persistence decision calls for.
pub fn write_head(
    out: &mut BytesMut,
    version: Version,
    status: StatusCode,
    headers: &HeaderMap,
    chunked: bool,
    persistence: Persistence,
) {
    out.reserve(256);
    out.put_slice(if version == Version::HTTP_10 { b"HTTP/1.0 " } else { b"HTTP/1.1 " });
    out.put_slice(status.as_str().as_bytes());
    out.put_u8(b' ');
    out.put_slice(status.canonical_reason().unwrap_or("Unknown").as_bytes());
    out.put_slice(b"\r\n");
    for (name, value) in headers {
        put_field(out, name.as_str().as_bytes(), value.as_bytes());
    }
    if !headers.contains_key(header::DATE) {
        with_http_date(|date| put_field(out, b"date", date.as_bytes()));
    }
    if chunked {
        put_field(out, b"transfer-encoding", b"chunked");
    }
    match (persistence, version) {
        (Persistence::Close, _) => put_field(out, b"connection", b"close"),
        (Persistence::KeepAlive, Version::HTTP_10) => put_field(out, b"connection", b"keep-alive"),
        (Persistence::KeepAlive, _) => {}
    }
    out.put_slice(b"\r\n");
}

fn put_field(out: &mut BytesMut, name: &[u8], value: &[u8]) {
    out.put_slice(name);
    out.put_slice(b": ");
    out.put_slice(value);
    out.put_slice(b"\r\n");
}

/// A complete response the front makes itself: plain text, one line, with `extra` fields
/// (such as `Retry-After`).
pub fn plain_response(
    version: Version,
    status: StatusCode,
    message: &str,
    extra: &[(header::HeaderName, HeaderValue)],
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
    write_head(&mut out, version, status, &headers, false, persistence);
    out.put_slice(body.as_bytes());
    out.freeze()
}

/// Appends one chunk of a chunked body. Empty data writes nothing: an empty chunk would end
/// the body.
pub fn put_chunk(out: &mut BytesMut, data: &[u8]) {
    if data.is_empty() {
        return;
    }
    let mut size = String::with_capacity(18);
    let _ = write!(size, "{:x}\r\n", data.len());
    out.put_slice(size.as_bytes());
    out.put_slice(data);
    out.put_slice(b"\r\n");
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

    #[test]
    fn head_for_http11_keep_alive() {
        let mut headers = HeaderMap::new();
        headers.insert(header::CONTENT_LENGTH, HeaderValue::from(5));
        let mut out = BytesMut::new();
        write_head(&mut out, Version::HTTP_11, StatusCode::OK, &headers, false, Persistence::KeepAlive);
        let head = text(&out);
        assert!(head.starts_with("HTTP/1.1 200 OK\r\ncontent-length: 5\r\ndate: "), "{head}");
        assert!(head.ends_with(" GMT\r\n\r\n"), "{head}");
        assert!(!head.contains("connection"));
    }

    #[test]
    fn head_for_http10_and_close() {
        let headers = HeaderMap::new();
        let mut out = BytesMut::new();
        write_head(&mut out, Version::HTTP_10, StatusCode::NOT_FOUND, &headers, false, Persistence::KeepAlive);
        assert!(text(&out).starts_with("HTTP/1.0 404 Not Found\r\n"));
        assert!(text(&out).contains("connection: keep-alive\r\n"));
        let mut out = BytesMut::new();
        write_head(&mut out, Version::HTTP_11, StatusCode::OK, &headers, true, Persistence::Close);
        assert!(text(&out).contains("transfer-encoding: chunked\r\nconnection: close\r\n\r\n"));
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
        assert!(text.contains("connection: close\r\n"));
        assert!(text.ends_with("\r\n\r\nqueue full\n"));
    }

    #[test]
    fn chunks() {
        let mut out = BytesMut::new();
        put_chunk(&mut out, b"hello world, hello!");
        put_chunk(&mut out, b"");
        out.put_slice(LAST_CHUNK);
        assert_eq!(text(&out), "13\r\nhello world, hello!\r\n0\r\n\r\n");
    }
}
