//! Response heads and body framing: the app's `Content-Length` when it gave one, a computed
//! one when the whole body is known (a list), chunked otherwise, or delimited by closing the
//! connection for HTTP/1.0; nothing at all after HEAD, 1xx, 204 and 304.
//!
//! `Framing` also keeps the app to its word: bytes beyond its `Content-Length` are dropped (the
//! next response would otherwise start inside them), and a body that ends short of it is
//! reported so the connection is closed rather than left out of step.

use bytes::{BufMut, BytesMut};
use headway_server::http1::response::{put_chunk, with_http_date};

use super::request::Version;
use super::status_allows_body;

pub use headway_server::http1::response::LAST_CHUNK;

/// The interim answer to `Expect: 100-continue`.
pub const CONTINUE: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\n";

/// What the app said in start_response, validated and encoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResponseHead {
    /// The status as given (`200 OK`), latin-1.
    pub status: Vec<u8>,
    pub code: u16,
    /// The app's header fields, each `Name: value\r\n`, latin-1.
    pub header_block: Vec<u8>,
    /// The app's `Content-Length`, if it gave one.
    pub content_length: Option<u64>,
    /// The app gave its own `Date`.
    pub has_date: bool,
}

/// How the body of a response is delimited, and how much of it may still be sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    Length { promised: u64, remaining: u64, overflowed: bool },
    Chunked,
    UntilClose,
    NoBody,
}

/// Writes the head of a response to a request that was `HEAD` or not, in `version`.
/// `body_length` is the whole body's size when it is known before the head is sent;
/// `keep_alive` is whether the connection could carry another request as far as the caller
/// knows. Returns the framing and whether the connection is kept after this response.
pub fn write_head(
    out: &mut BytesMut,
    head: &ResponseHead,
    is_head: bool,
    version: Version,
    body_length: Option<u64>,
    keep_alive: bool,
) -> (Framing, bool) {
    out.reserve(64 + head.status.len() + head.header_block.len());
    out.put_slice(b"HTTP/1.1 ");
    out.put_slice(&head.status);
    out.put_slice(b"\r\n");
    out.put_slice(&head.header_block);
    if !head.has_date {
        put_date(out);
    }
    let framing = framing_of(head, is_head, version, body_length);
    match framing {
        Framing::NoBody if is_head && status_allows_body(head.code) => {
            if let (None, Some(length)) = (head.content_length, body_length) {
                put_content_length(out, length); // what a GET would get
            }
        }
        Framing::Length { promised, .. } if head.content_length.is_none() => put_content_length(out, promised),
        Framing::Chunked => out.put_slice(b"Transfer-Encoding: chunked\r\n"),
        _ => {}
    }
    let keep_alive = keep_alive && framing != Framing::UntilClose;
    if !keep_alive {
        out.put_slice(b"Connection: close\r\n");
    } else if version == Version::Http10 {
        out.put_slice(b"Connection: keep-alive\r\n");
    }
    out.put_slice(b"\r\n");
    (framing, keep_alive)
}

/// How the body of `head` is delimited, for a request that was `HEAD` or not, in `version`;
/// `body_length` is the whole body's size when it is known before the head is sent.
pub fn framing_of(head: &ResponseHead, is_head: bool, version: Version, body_length: Option<u64>) -> Framing {
    if !status_allows_body(head.code) || is_head {
        Framing::NoBody
    } else if let Some(length) = head.content_length.or(body_length) {
        Framing::Length { promised: length, remaining: length, overflowed: false }
    } else if version == Version::Http11 {
        Framing::Chunked
    } else {
        Framing::UntilClose
    }
}

/// The `Date` field, formatted at most once a second.
fn put_date(out: &mut BytesMut) {
    with_http_date(|date| {
        out.put_slice(b"Date: ");
        out.put_slice(date.as_bytes());
        out.put_slice(b"\r\n");
    });
}

fn put_content_length(out: &mut BytesMut, length: u64) {
    out.put_slice(b"Content-Length: ");
    out.put_slice(length.to_string().as_bytes());
    out.put_slice(b"\r\n");
}

/// A body that broke its `Content-Length`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Broken {
    /// More bytes than promised came (reported once; the rest is dropped).
    Overrun { promised: u64 },
    /// The body ended `missing` bytes short.
    Underrun { promised: u64, missing: u64 },
}

impl std::fmt::Display for Broken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Broken::Overrun { promised } => {
                write!(f, "app sent more bytes than its Content-Length ({promised}); the rest is dropped")
            }
            Broken::Underrun { promised, missing } => {
                write!(f, "app sent {missing} bytes fewer than its Content-Length ({promised}); closing the connection")
            }
        }
    }
}

impl Framing {
    /// The part of `data` that may go on the wire (all of it but past a `Content-Length`, none
    /// without a body), and an overrun the first time one happens. Chunked data still needs
    /// [`Framing::put`] (or its chunk framing) around it.
    pub fn admit<'d>(&mut self, data: &'d [u8]) -> (&'d [u8], Option<Broken>) {
        match self {
            Framing::Length { promised, remaining, overflowed } => {
                let mut broken = None;
                let mut data = data;
                if data.len() as u64 > *remaining {
                    if !*overflowed {
                        *overflowed = true;
                        broken = Some(Broken::Overrun { promised: *promised });
                    }
                    data = &data[..*remaining as usize];
                }
                *remaining -= data.len() as u64;
                (data, broken)
            }
            Framing::NoBody => (&[], None),
            Framing::Chunked | Framing::UntilClose => (data, None),
        }
    }

    /// Appends `data` (already admitted) as this framing carries it.
    pub fn put(&self, out: &mut BytesMut, data: &[u8]) {
        match self {
            Framing::Chunked => put_chunk(out, data),
            _ => out.put_slice(data),
        }
    }

    /// What ends the body on the wire, and whether it came out short.
    pub fn end(&self) -> (&'static [u8], Option<Broken>) {
        match *self {
            Framing::Chunked => (LAST_CHUNK, None),
            Framing::Length { promised, remaining, .. } if remaining > 0 => {
                (b"", Some(Broken::Underrun { promised, missing: remaining }))
            }
            _ => (b"", None),
        }
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        400 => "Bad Request",
        417 => "Expectation Failed",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        505 => "HTTP Version Not Supported",
        _ => "Error",
    }
}

/// A complete short plain-text response for an error the worker answers itself; the
/// connection is closed after it (`with_body` is false to answer a HEAD request).
pub fn error_response(status: u16, message: &str, with_body: bool) -> BytesMut {
    let body_length = message.len() + 1;
    let mut out = BytesMut::with_capacity(200 + body_length);
    out.put_slice(format!("HTTP/1.1 {status} {}\r\n", reason(status)).as_bytes());
    put_date(&mut out);
    out.put_slice(b"Content-Type: text/plain; charset=utf-8\r\n");
    put_content_length(&mut out, body_length as u64);
    out.put_slice(b"Connection: close\r\n\r\n");
    if with_body {
        out.put_slice(message.as_bytes());
        out.put_u8(b'\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn framing_helpers() {
        let mut out = BytesMut::new();
        Framing::Chunked.put(&mut out, &[b'x'; 26]);
        assert_eq!(&out[..], [&b"1a\r\n"[..], &[b'x'; 26], b"\r\n"].concat());
        let mut out = BytesMut::new();
        put_date(&mut out);
        let date = std::str::from_utf8(&out).unwrap();
        assert!(date.starts_with("Date: ") && date.ends_with(" GMT\r\n") && date.len() == 37, "{date}");
        let response = error_response(400, "bad request line", true);
        assert!(response.starts_with(b"HTTP/1.1 400 Bad Request\r\n"));
        assert!(response.ends_with(b"Content-Length: 17\r\nConnection: close\r\n\r\nbad request line\n"));
        assert!(error_response(500, "oops", false).ends_with(b"\r\n\r\n"));
    }

    fn head(content_length: Option<u64>) -> ResponseHead {
        ResponseHead {
            status: b"200 OK".to_vec(),
            code: 200,
            header_block: b"X: y\r\n".to_vec(),
            content_length,
            has_date: true,
        }
    }

    #[test]
    fn framing_of_each_kind_of_response() {
        let framed = |head: &ResponseHead, is_head, version, length, keep| {
            let mut out = BytesMut::new();
            let (framing, keep) = write_head(&mut out, head, is_head, version, length, keep);
            (String::from_utf8(out.to_vec()).unwrap(), framing, keep)
        };
        let (text, framing, keep) = framed(&head(None), false, Version::Http11, Some(5), true);
        assert_eq!(text, "HTTP/1.1 200 OK\r\nX: y\r\nContent-Length: 5\r\n\r\n");
        assert_eq!((framing, keep), (Framing::Length { promised: 5, remaining: 5, overflowed: false }, true));
        let (text, framing, _) = framed(&head(None), false, Version::Http11, None, true);
        assert!(text.ends_with("Transfer-Encoding: chunked\r\n\r\n") && framing == Framing::Chunked);
        let (text, framing, keep) = framed(&head(None), false, Version::Http10, None, true);
        assert!(text.ends_with("Connection: close\r\n\r\n") && framing == Framing::UntilClose && !keep);
        let (text, _, _) = framed(&head(None), false, Version::Http10, Some(1), true);
        assert!(text.ends_with("Connection: keep-alive\r\n\r\n"));
        let (text, framing, _) = framed(&head(None), true, Version::Http11, Some(14), true);
        assert!(text.ends_with("Content-Length: 14\r\n\r\n") && framing == Framing::NoBody);
        let no_content = ResponseHead { code: 204, ..head(None) };
        assert_eq!(framed(&no_content, false, Version::Http11, Some(0), true).1, Framing::NoBody);
    }

    #[test]
    fn content_length_is_kept_to() {
        let mut framing = Framing::Length { promised: 5, remaining: 5, overflowed: false };
        assert_eq!(framing.admit(b"12345"), (&b"12345"[..], None));
        assert_eq!(framing.admit(b"67"), (&b""[..], Some(Broken::Overrun { promised: 5 })));
        assert_eq!(framing.admit(b"89"), (&b""[..], None)); // reported once
        let short = Framing::Length { promised: 100, remaining: 90, overflowed: false };
        assert_eq!(short.end(), (&b""[..], Some(Broken::Underrun { promised: 100, missing: 90 })));
        assert_eq!(Framing::Chunked.end(), (LAST_CHUNK, None));
    }
}
