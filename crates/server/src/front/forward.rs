//! The request a worker receives: the client's request, cleaned of what belonged to the
//! client's hop, with the forwarding headers a server behind a proxy expects. HTTP/1.1 and
//! HTTP/2 requests are made into one the same way: the fields here are what either protocol's
//! head comes down to.
//!
//! The body is always whole and sent with `Content-Length`, so a worker never sees chunked
//! uploads, `Expect`, or a slow client. The forwarding headers say who the client is and how
//! it came (see [`super::forwarded`]; the client's address rides along as a [`Client`] extension,
//! the bundled worker's `REMOTE_ADDR`), and `X-Request-Start` (Heroku's and New Relic's convention) says when the
//! request became complete, so an app can measure its own queue time.

use std::time::{SystemTime, UNIX_EPOCH};

use bytes::BytesMut;
use http::header::HeaderMap;
use http::header::{self, HeaderName, HeaderValue};
use http::{Method, Version};

use super::forwarded::{client_of, set_forwarding_headers, Peer, TrustedProxies};
use crate::job::{Client, RequestBody};
use headway_http1::fields::{remove_fields, strip_hop_by_hop};

static X_REQUEST_START: HeaderName = HeaderName::from_static("x-request-start");

/// Builds the request to send to a worker. `target`: origin form or `*`, as validated by the
/// protocol that carried it; `version`: what the worker is told the client spoke (HTTP/1.1 for
/// every HTTP/1 client, since the front re-frames the exchange; HTTP/2 for an HTTP/2 stream).
pub fn worker_request(
    method: Method,
    target: &str,
    version: Version,
    mut headers: HeaderMap,
    body: RequestBody,
    peer: &Peer,
    trusted: &TrustedProxies,
) -> http::Request<RequestBody> {
    strip_hop_by_hop(&mut headers);
    remove_fields(&mut headers, &[header::EXPECT, header::CONTENT_LENGTH]);
    if !body.is_empty() || matches!(method, Method::POST | Method::PUT | Method::PATCH) {
        headers.insert(header::CONTENT_LENGTH, HeaderValue::from(body.len()));
    }
    set_forwarding_headers(&mut headers, peer);
    let client = client_of(&headers, trusted);
    headers.insert(X_REQUEST_START.clone(), request_start());

    let mut request = http::Request::new(body);
    *request.method_mut() = method;
    *request.version_mut() = version;
    // The target was validated by the parser; `*` and `/path?query` are both valid URIs.
    *request.uri_mut() = target.parse().unwrap_or_else(|_| http::Uri::from_static("/"));
    *request.headers_mut() = headers;
    if let Some(client) = client {
        request.extensions_mut().insert::<Client>(client);
    }
    request
}

/// `t=` and the microseconds since the epoch, without the formatting machinery (a request's
/// share of the front's time is a few microseconds).
fn request_start() -> HeaderValue {
    let micros = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |since| since.as_micros() as u64);
    let mut value = BytesMut::with_capacity(24);
    value.extend_from_slice(b"t=");
    value.extend_from_slice(itoa::Buffer::new().format(micros).as_bytes());
    HeaderValue::from_maybe_shared(value.freeze()).expect("digits are a valid header value")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::front::forwarded::{X_FORWARDED_FOR, X_FORWARDED_PROTO};
    use bytes::Bytes;
    use headway_http1::request::{parse_head, Limits, RequestHead};

    fn from_head(
        head: RequestHead,
        body: RequestBody,
        peer: &Peer,
        trusted: &TrustedProxies,
    ) -> http::Request<RequestBody> {
        worker_request(head.method, &head.target, Version::HTTP_11, head.headers, body, peer, trusted)
    }

    fn trusted() -> TrustedProxies {
        TrustedProxies::parse("127.0.0.1").unwrap()
    }

    fn head(raw: &str) -> RequestHead {
        let limits = Limits { max_head: 4096, max_body: 1 << 20 };
        parse_head(raw.as_bytes(), &limits).unwrap().unwrap().0
    }

    #[test]
    fn cleans_and_adds_forwarding_headers() {
        let raw = "POST /p?q=1 HTTP/1.1\r\nHost: a\r\nConnection: keep-alive, X-Hop\r\nX-Hop: 1\r\n\
                   Transfer-Encoding: chunked\r\nExpect: 100-continue\r\nX-Forwarded-For: 10.0.0.1\r\n\
                   X-Forwarded-Proto: https\r\nAccept: */*\r\n\r\n";
        let request = from_head(
            head(raw),
            RequestBody::Memory(Bytes::from_static(b"hello")),
            &Peer::new(Some("192.0.2.7".parse().unwrap()), true, false),
            &TrustedProxies::parse("192.0.2.7").unwrap(),
        );
        let headers = request.headers();
        assert_eq!(request.method(), Method::POST);
        assert_eq!(request.uri(), "/p?q=1");
        assert_eq!(headers[header::CONTENT_LENGTH], "5");
        assert_eq!(headers[&X_FORWARDED_FOR], "10.0.0.1, 192.0.2.7");
        assert_eq!(request.extensions().get::<Client>(), Some(&Client("10.0.0.1".to_owned())));
        // A trusted router's scheme is kept (it used to be overwritten with http: issue 8).
        assert_eq!(headers[&X_FORWARDED_PROTO], "https");
        assert!(headers[&X_REQUEST_START].to_str().unwrap().starts_with("t="));
        assert_eq!(headers[header::ACCEPT], "*/*");
        for gone in ["connection", "x-hop", "transfer-encoding", "expect"] {
            assert!(!headers.contains_key(gone), "{gone} must not be forwarded");
        }
    }

    #[test]
    fn bodiless_get_has_no_content_length() {
        let local = |raw| from_head(head(raw), RequestBody::Memory(Bytes::new()), &Peer::local(), &trusted());
        let request = local("GET / HTTP/1.1\r\nHost: a\r\n\r\n");
        assert!(!request.headers().contains_key(header::CONTENT_LENGTH));
        assert!(!request.headers().contains_key(&X_FORWARDED_FOR));
        assert_eq!(request.extensions().get::<Client>(), None, "a local router that named nobody");
        let post = local("POST / HTTP/1.1\r\nHost: a\r\n\r\n");
        assert_eq!(post.headers()[header::CONTENT_LENGTH], "0");
    }
}
