//! The app's response head and how its body goes on the wire: the app's `Content-Length` when
//! it gave one, a computed one when the whole body is known (a list), chunked otherwise, or
//! delimited by closing the connection for HTTP/1.0; nothing at all after HEAD, 1xx, 204 and 304
//! (`headway_http1::response::body_encoder` decides, as it does for the front). The encoder keeps
//! the app to its word: bytes beyond its `Content-Length` are dropped, and a body that ends short
//! of it is reported so the connection is closed rather than left out of step.

use bytes::{Bytes, BytesMut};
use headway_http1::body::BodyEncoder;
use headway_http1::response::{self, put_framing, put_status_line, Persistence};
use headway_http1::{fields, HttpError};
use http::{StatusCode, Version};

/// What the app said in start_response, validated and encoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResponseHead {
    /// The status as given (`200 OK`), latin-1.
    pub status: Vec<u8>,
    pub code: StatusCode,
    /// The app's header fields, each `Name: value\r\n`, latin-1.
    pub header_block: Vec<u8>,
    /// The app's `Content-Length`, if it gave one.
    pub content_length: Option<u64>,
    /// The app gave its own `Date`.
    pub has_date: bool,
}

impl ResponseHead {
    /// How the body goes on the wire, for a request that was `HEAD` or not, in `version`;
    /// `body_length` is the whole body's size when it is known before the head is sent.
    pub fn encoder(&self, is_head: bool, version: Version, body_length: Option<u64>) -> BodyEncoder {
        response::body_encoder(is_head, self.code, version, self.content_length, body_length)
    }
}

/// The fields an app must not send: hop-by-hop, and framing is the server's job (PEP 3333, the
/// Rack SPEC, and every ASGI server takes it so).
const HOP_BY_HOP: [&str; 9] = [
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "trailers",
    "transfer-encoding",
    "upgrade",
];

/// Whether the field `name` is hop-by-hop ([`HOP_BY_HOP`]).
pub fn is_hop_by_hop(name: &[u8]) -> bool {
    HOP_BY_HOP.iter().any(|hop| hop.as_bytes().eq_ignore_ascii_case(name))
}

/// `Name: value\r\n` for each field, as [`ResponseHead::header_block`] holds them.
pub fn header_block<'a>(fields: impl Iterator<Item = (&'a [u8], &'a [u8])> + Clone) -> Vec<u8> {
    let mut block = Vec::with_capacity(fields.clone().map(|(name, value)| field_size(name.len(), value.len())).sum());
    for (name, value) in fields {
        put_field(&mut block, name, value);
    }
    block
}

/// The bytes `Name: value\r\n` takes in a header block, for a name and a value of these lengths.
pub fn field_size(name: usize, value: usize) -> usize {
    name + value + 4
}

/// Appends `Name: value\r\n` to a header block.
pub fn put_field(block: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    block.extend_from_slice(name);
    block.extend_from_slice(b": ");
    block.extend_from_slice(value);
    block.extend_from_slice(b"\r\n");
}

impl ResponseHead {
    /// The head of a response with status `code` and the app's `fields`, checked: each name a
    /// token and not hop-by-hop, no CR, LF or NUL in a value, one `Content-Length` at most. The
    /// error is the line the app's author gets.
    pub fn of_fields(code: StatusCode, fields: &[(&[u8], &[u8])]) -> Result<ResponseHead, String> {
        let mut content_length = None;
        let mut has_date = false;
        for &(name, value) in fields {
            let shown = String::from_utf8_lossy(name);
            if !fields::is_token(name) {
                return Err(format!("bad header name {shown:?}"));
            }
            if is_hop_by_hop(name) {
                return Err(format!("hop-by-hop header {shown:?} is not allowed from the app"));
            }
            if value.iter().any(|&b| b == b'\r' || b == b'\n' || b == 0) {
                return Err(format!("the value of header {shown:?} contains CR, LF or NUL"));
            }
            if name.eq_ignore_ascii_case(b"content-length") {
                let length = fields::content_length([value]).ok().flatten();
                let Some(length) = length.filter(|length| content_length.is_none_or(|seen| seen == *length)) else {
                    return Err(format!("bad or conflicting Content-Length {:?}", String::from_utf8_lossy(value)));
                };
                content_length = Some(length);
            }
            has_date |= name.eq_ignore_ascii_case(b"date");
        }
        let status = format!("{} {}", code.as_str(), code.canonical_reason().unwrap_or("Unknown")).into_bytes();
        let header_block = header_block(fields.iter().copied());
        Ok(ResponseHead { status, code, header_block, content_length, has_date })
    }
}

/// Writes the head of a response to a request that was `HEAD` or not, in `version`.
/// `body_length` is the whole body's size when it is known before the head is sent;
/// `keep_alive` is whether the connection could carry another request as far as the caller
/// knows. Returns the body's encoder and whether the connection is kept after this response.
pub fn write_head(
    out: &mut BytesMut,
    head: &ResponseHead,
    is_head: bool,
    version: Version,
    body_length: Option<u64>,
    keep_alive: bool,
) -> (BodyEncoder, bool) {
    out.reserve(64 + head.status.len() + head.header_block.len());
    let (code, reason) = head.status.split_at(3.min(head.status.len()));
    put_status_line(out, Version::HTTP_11, code, reason.strip_prefix(b" ").unwrap_or(reason));
    out.extend_from_slice(&head.header_block);
    let encoder = head.encoder(is_head, version, body_length);
    let persistence = if keep_alive { Persistence::KeepAlive } else { Persistence::Close };
    let persistence = put_framing(out, version, &encoder, head.content_length.is_some(), head.has_date, persistence);
    (encoder, persistence == Persistence::KeepAlive)
}

/// A complete short plain-text response for an error the worker answers itself; the
/// connection is closed after it (`with_body` is false to answer a HEAD request).
pub fn error_response(error: &HttpError, with_body: bool) -> Bytes {
    let whole = response::plain_response(Version::HTTP_11, error.status, error.reason, &[], Persistence::Close);
    if with_body {
        whole
    } else {
        whole.slice(..whole.len() - error.reason.len() - 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_responses() {
        let response = error_response(&HttpError::bad_request("bad request line"), true);
        assert!(response.starts_with(b"HTTP/1.1 400 Bad Request\r\n"));
        assert!(response.ends_with(b"Connection: close\r\n\r\nbad request line\n"));
        assert!(response.windows(20).any(|w| w == b"content-length: 17\r\n"), "the message's own field");
        let internal = HttpError::new(StatusCode::INTERNAL_SERVER_ERROR, "oops");
        assert!(error_response(&internal, false).ends_with(b"\r\n\r\n"));
    }

    fn head(content_length: Option<u64>) -> ResponseHead {
        ResponseHead {
            status: b"200 OK".to_vec(),
            code: StatusCode::OK,
            header_block: b"X: y\r\n".to_vec(),
            content_length,
            has_date: true,
        }
    }

    #[test]
    fn fields_are_checked_and_encoded() {
        let head =
            ResponseHead::of_fields(StatusCode::OK, &[(b"content-type", b"text/plain"), (b"Content-Length", b"2")]);
        let head = head.unwrap();
        assert_eq!(head.status, b"200 OK");
        assert_eq!(head.header_block, b"content-type: text/plain\r\nContent-Length: 2\r\n");
        assert_eq!((head.content_length, head.has_date), (Some(2), false));
        let refused = |fields: &[(&[u8], &[u8])]| ResponseHead::of_fields(StatusCode::OK, fields).unwrap_err();
        assert!(refused(&[(b"bad name", b"x")]).contains("bad header name"));
        assert!(refused(&[(b"Transfer-Encoding", b"chunked")]).contains("hop-by-hop"));
        assert!(refused(&[(b"x", b"a\nb")]).contains("CR, LF or NUL"));
        assert!(refused(&[(b"content-length", b"1"), (b"content-length", b"2")]).contains("conflicting"));
    }

    #[test]
    fn framing_of_each_kind_of_response() {
        let framed = |head: &ResponseHead, is_head, version, length, keep| {
            let mut out = BytesMut::new();
            let (encoder, keep) = write_head(&mut out, head, is_head, version, length, keep);
            (String::from_utf8(out.to_vec()).unwrap(), encoder, keep)
        };
        let (text, encoder, keep) = framed(&head(None), false, Version::HTTP_11, Some(5), true);
        assert_eq!(text, "HTTP/1.1 200 OK\r\nX: y\r\nContent-Length: 5\r\n\r\n");
        assert_eq!((encoder, keep), (BodyEncoder::length(5), true));
        let (text, encoder, _) = framed(&head(None), false, Version::HTTP_11, None, true);
        assert!(text.ends_with("Transfer-Encoding: chunked\r\n\r\n") && encoder == BodyEncoder::Chunked);
        let (text, encoder, keep) = framed(&head(None), false, Version::HTTP_10, None, true);
        assert!(text.ends_with("Connection: close\r\n\r\n") && encoder == BodyEncoder::UntilClose && !keep);
        let (text, _, _) = framed(&head(None), false, Version::HTTP_10, Some(1), true);
        assert!(text.ends_with("Connection: keep-alive\r\n\r\n"));
        // A HEAD response says no length the app did not give: an empty body for HEAD tells
        // nothing of the GET's.
        let (text, encoder, _) = framed(&head(None), true, Version::HTTP_11, Some(0), true);
        assert!(!text.contains("Content-Length") && encoder == BodyEncoder::NoBody, "{text}");
        let no_content =
            ResponseHead { code: StatusCode::NO_CONTENT, status: b"204 No Content".to_vec(), ..head(None) };
        let (text, encoder, _) = framed(&no_content, false, Version::HTTP_11, Some(0), true);
        assert!(!text.contains("Content-Length") && encoder == BodyEncoder::NoBody, "{text}");
    }
}
