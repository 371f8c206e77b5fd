//! HTTP/1.1 as the front speaks it to clients, without any I/O (and the WebSocket handshake and
//! frame headers an upgraded connection goes on with).
//!
//! The front owns every client connection, so it is the one place where untrusted bytes are
//! judged. Everything here works on byte slices and returns values or an [`HttpError`] that
//! carries the status the client must get; `front::conn` does the reading and writing. Keeping
//! the rules in one I/O-free layer is what lets the tests pin each framing decision (the
//! request-smuggling defences above all) to bytes on the wire.

pub mod chunked;
pub mod frames;
pub mod request;
pub mod response;
pub mod websocket;

use http::header::{self, HeaderMap, HeaderName};
use http::StatusCode;

/// A request the front refuses. The front answers with `status`, a one-line plain body made of
/// `reason`, and `Connection: close`: after a framing error nothing later on the connection can
/// be trusted to start where we think it does.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{status}: {reason}")]
pub struct HttpError {
    pub status: StatusCode,
    pub reason: &'static str,
}

impl HttpError {
    pub const fn new(status: StatusCode, reason: &'static str) -> Self {
        HttpError { status, reason }
    }

    pub const fn bad_request(reason: &'static str) -> Self {
        HttpError::new(StatusCode::BAD_REQUEST, reason)
    }
}

/// Headers that describe one hop, not the message (RFC 9110 section 7.6.1). The front never
/// forwards them in either direction; it decides framing and persistence itself.
const HOP_BY_HOP: [HeaderName; 8] = [
    header::CONNECTION,
    HeaderName::from_static("keep-alive"),
    HeaderName::from_static("proxy-connection"),
    header::PROXY_AUTHENTICATE,
    header::TE,
    header::TRAILER,
    header::TRANSFER_ENCODING,
    header::UPGRADE,
];

/// Removes the hop-by-hop headers, including every header named in `Connection`.
pub fn strip_hop_by_hop(headers: &mut HeaderMap) {
    let listed: Vec<HeaderName> = comma_tokens(headers, &header::CONNECTION)
        .filter_map(|token| HeaderName::from_bytes(token.as_bytes()).ok())
        .collect();
    for name in &listed {
        headers.remove(name);
    }
    remove_fields(headers, &HOP_BY_HOP);
}

/// Removes every field named in `names`. A message has a handful of fields and most often none
/// of these: one look at each field's name costs less than a removal attempt (a hash and a
/// probe) for each of the names, which was a measurable share of the front's time a request.
pub fn remove_fields(headers: &mut HeaderMap, names: &[HeaderName]) {
    if headers.keys().any(|name| names.contains(name)) {
        for name in names {
            headers.remove(name);
        }
    }
}

/// The comma-separated tokens of every field named `name`, trimmed and lower-cased.
pub fn comma_tokens<'a>(headers: &'a HeaderMap, name: &HeaderName) -> impl Iterator<Item = String> + 'a {
    headers
        .get_all(name)
        .iter()
        .flat_map(|value| value.as_bytes().split(|&b| b == b','))
        .map(|token| String::from_utf8_lossy(token).trim().to_ascii_lowercase())
        .filter(|token| !token.is_empty())
}

/// Whether a response to this request with this status carries a body (RFC 9112 section 6.3).
pub fn response_has_body(request_method: &http::Method, status: StatusCode) -> bool {
    !(request_method == http::Method::HEAD
        || status.is_informational()
        || status == StatusCode::NO_CONTENT
        || status == StatusCode::NOT_MODIFIED)
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    #[test]
    fn strips_listed_and_standard_hop_by_hop_headers() {
        let mut headers = HeaderMap::new();
        headers.insert(header::CONNECTION, HeaderValue::from_static("keep-alive, X-Secret"));
        headers.insert("x-secret", HeaderValue::from_static("1"));
        headers.insert(header::TRANSFER_ENCODING, HeaderValue::from_static("chunked"));
        headers.insert("keep-alive", HeaderValue::from_static("timeout=5"));
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
        strip_hop_by_hop(&mut headers);
        assert_eq!(headers.len(), 1);
        assert!(headers.contains_key(header::CONTENT_TYPE));

        // Only a `Connection` field: what it names goes too.
        let mut headers = HeaderMap::new();
        headers.insert(header::CONNECTION, HeaderValue::from_static("x-secret"));
        headers.append("x-secret", HeaderValue::from_static("1"));
        headers.append("x-secret", HeaderValue::from_static("2"));
        headers.insert(header::ACCEPT, HeaderValue::from_static("*/*"));
        strip_hop_by_hop(&mut headers);
        assert_eq!(headers.keys().collect::<Vec<_>>(), [header::ACCEPT]);
    }

    #[test]
    fn removes_every_value_of_the_fields_named_and_nothing_else() {
        let mut headers = HeaderMap::new();
        headers.insert(header::ACCEPT, HeaderValue::from_static("*/*"));
        headers.append(header::EXPECT, HeaderValue::from_static("100-continue"));
        headers.append(header::EXPECT, HeaderValue::from_static("100-continue"));
        let untouched = headers.clone();
        remove_fields(&mut headers, &[header::CONTENT_LENGTH]);
        assert_eq!(headers, untouched);
        remove_fields(&mut headers, &[header::CONTENT_LENGTH, header::EXPECT]);
        assert_eq!(headers.keys().collect::<Vec<_>>(), [header::ACCEPT]);
    }

    #[test]
    fn head_and_bodiless_statuses_have_no_body() {
        assert!(!response_has_body(&http::Method::HEAD, StatusCode::OK));
        assert!(!response_has_body(&http::Method::GET, StatusCode::NO_CONTENT));
        assert!(!response_has_body(&http::Method::GET, StatusCode::NOT_MODIFIED));
        assert!(response_has_body(&http::Method::GET, StatusCode::NOT_FOUND));
    }
}
