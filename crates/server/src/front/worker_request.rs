//! The request a worker receives: the client's request, cleaned of its connection-specific
//! fields, with the forwarding headers a server behind a proxy expects. HTTP/1.1 and
//! HTTP/2 requests are made into one the same way: the fields here are what either protocol's
//! head comes down to.
//!
//! The body is always whole and sent with `Content-Length`, so a worker never sees chunked
//! uploads, `Expect`, or a slow client. The forwarding headers say who the client is and how
//! it came (see [`super::forwarding_fields`]; the client's address goes beside the request as a
//! [`Client`], the bundled worker's `REMOTE_ADDR`), and `X-Request-Start` (Heroku's and New Relic's
//! convention) says when the request became complete, so an app can measure its own queue time.
//!
//! The target goes on as the client sent it, except for the bytes a request line may hold (the
//! parser takes any visible character and UTF-8, as nginx does) that a URI may not: those that
//! `http::Uri` cannot carry and UTF-8, which h11, httptools and Node refuse. They are
//! percent-encoded ([`settle_target`]), which every server and framework decodes back to the same
//! path, rather than refused: browsers send a raw backtick in a query, and curl sends `<`, `>`,
//! `"` and UTF-8 as given. The access log shows the settled target, so the log and the app never
//! disagree on what was asked.

use std::fmt::Write as _;
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::BytesMut;
use headway_http1::fields::{remove_fields, strip_connection_fields};
use headway_http1::HttpError;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Method, StatusCode, Uri, Version};

use super::forwarding_fields::{forward_for, Peer, TrustedProxies};
use crate::queue::job::{Client, RequestBody};

static X_REQUEST_START: HeaderName = HeaderName::from_static("x-request-start");

/// The longest target `http::Uri` holds (its own limit, `u16::MAX - 1` bytes).
const MAX_TARGET: usize = u16::MAX as usize - 1;

/// Makes `target` (validated by the parser, which refuses a fragment) the one the worker gets,
/// and returns it as a URI: `"`, `<`, `>` and `` ` ``, which `http::Uri` refuses, and UTF-8, which
/// a URI may not hold, percent-encoded. Refused: a target longer than a URI may be (414).
pub fn settle_target(target: &mut String) -> Result<Uri, HttpError> {
    let carried_as_is = |byte: u8| byte.is_ascii() && !matches!(byte, b'"' | b'<' | b'>' | b'`');
    if !target.bytes().all(carried_as_is) {
        let mut encoded = String::with_capacity(target.len() + 16);
        for byte in target.bytes() {
            if carried_as_is(byte) {
                encoded.push(char::from(byte));
            } else {
                write!(encoded, "%{byte:02X}").expect("a String takes any write");
            }
        }
        *target = encoded;
    }
    Uri::try_from(target.as_str()).map_err(|_| {
        if target.len() > MAX_TARGET {
            HttpError::new(StatusCode::URI_TOO_LONG, "request target too long")
        } else {
            HttpError::bad_request("malformed request target")
        }
    })
}

/// Builds the request to send to a worker, and says who its client is. `uri`: the target, settled
/// by [`settle_target`]; `version`: what the worker is told the client spoke (HTTP/1.1 for every
/// HTTP/1 client, since the front re-frames the exchange; HTTP/2 for an HTTP/2 stream).
pub fn worker_request(
    method: Method,
    uri: Uri,
    version: Version,
    mut headers: HeaderMap,
    body: RequestBody,
    peer: &Peer,
    trusted: &TrustedProxies,
) -> (http::Request<RequestBody>, Option<Client>) {
    strip_connection_fields(&mut headers);
    remove_fields(&mut headers, &[header::EXPECT, header::CONTENT_LENGTH]);
    if !body.is_empty() || matches!(method, Method::POST | Method::PUT | Method::PATCH) {
        headers.insert(header::CONTENT_LENGTH, HeaderValue::from(body.len()));
    }
    let client = forward_for(&mut headers, peer, trusted);
    headers.insert(X_REQUEST_START.clone(), request_start());

    let mut request = http::Request::new(body);
    *request.method_mut() = method;
    *request.version_mut() = version;
    *request.uri_mut() = uri;
    *request.headers_mut() = headers;
    (request, client)
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
    use crate::front::forwarding_fields::{X_FORWARDED_FOR, X_FORWARDED_PROTO};
    use bytes::Bytes;
    use headway_http1::request::{parse_head, Limits, RequestHead};

    fn trusted() -> TrustedProxies {
        TrustedProxies::parse("127.0.0.1").unwrap()
    }

    fn head(raw: &str) -> RequestHead {
        let limits = Limits { max_head: 4096, max_body: 1 << 20 };
        parse_head(raw.as_bytes(), &limits).unwrap().unwrap().0
    }

    /// `worker_request` for a head as the HTTP/1 connection makes it: its target settled first.
    fn request_of(
        raw: &str,
        body: RequestBody,
        peer: &Peer,
        trusted: &TrustedProxies,
    ) -> (http::Request<RequestBody>, Option<Client>) {
        let mut head = head(raw);
        let uri = settle_target(&mut head.target).unwrap();
        worker_request(head.method, uri, Version::HTTP_11, head.headers, body, peer, trusted)
    }

    #[test]
    fn every_target_the_parser_takes_reaches_the_worker_as_the_log_shows_it() {
        let limits = Limits { max_head: 4096, max_body: 0 };
        for byte in 0x21..=0x7eu8 {
            let raw = [b"GET /a".as_slice(), &[byte], b"b?q=", &[byte], b" HTTP/1.1\r\nHost: a\r\n\r\n"].concat();
            let Ok(Some((mut head, _))) = parse_head(&raw, &limits) else { continue };
            let sent = head.target.clone();
            let uri = settle_target(&mut head.target).unwrap_or_else(|err| panic!("{sent}: {err}"));
            assert_eq!(uri.to_string(), head.target, "the log's target is the worker's");
            let decoded = percent_encoding::percent_decode_str(&head.target).collect::<Vec<u8>>();
            let original = percent_encoding::percent_decode_str(&sent).collect::<Vec<u8>>();
            assert_eq!(decoded, original, "{sent} means what it meant");
        }
        let mut pay = "/api/pay<x>?a=1`".to_owned();
        assert_eq!(settle_target(&mut pay).unwrap(), "/api/pay%3Cx%3E?a=1%60");
        let mut cafe = "/caf\u{e9}?q=\"1\"".to_owned();
        assert_eq!(settle_target(&mut cafe).unwrap(), "/caf%C3%A9?q=%221%22", "as a browser sends it");
        let mut long = format!("/{}", "a".repeat(MAX_TARGET));
        assert_eq!(settle_target(&mut long).unwrap_err().status, StatusCode::URI_TOO_LONG);
    }

    #[test]
    fn cleans_and_adds_forwarding_headers() {
        let raw = "POST /p?q=1 HTTP/1.1\r\nHost: a\r\nConnection: keep-alive, X-Hop\r\nX-Hop: 1\r\n\
                   Transfer-Encoding: chunked\r\nExpect: 100-continue\r\nX-Forwarded-For: 10.0.0.1\r\n\
                   X-Forwarded-Proto: https\r\nAccept: */*\r\n\r\n";
        let (request, client) = request_of(
            raw,
            RequestBody::Memory(Bytes::from_static(b"hello")),
            &Peer::new(Some("192.0.2.7".parse().unwrap()), true, false),
            &TrustedProxies::parse("192.0.2.7").unwrap(),
        );
        let headers = request.headers();
        assert_eq!(request.method(), Method::POST);
        assert_eq!(request.uri(), "/p?q=1");
        assert_eq!(headers[header::CONTENT_LENGTH], "5");
        assert_eq!(headers[&X_FORWARDED_FOR], "10.0.0.1, 192.0.2.7");
        assert_eq!(client, Some(Client(Bytes::from_static(b"10.0.0.1"))));
        // A trusted router's scheme is kept, not overwritten with http.
        assert_eq!(headers[&X_FORWARDED_PROTO], "https");
        assert!(headers[&X_REQUEST_START].to_str().unwrap().starts_with("t="));
        assert_eq!(headers[header::ACCEPT], "*/*");
        for gone in ["connection", "x-hop", "transfer-encoding", "expect"] {
            assert!(!headers.contains_key(gone), "{gone} must not be forwarded");
        }
    }

    #[test]
    fn bodiless_get_has_no_content_length() {
        let local = |raw| request_of(raw, RequestBody::Memory(Bytes::new()), &Peer::local(), &trusted());
        let (request, client) = local("GET / HTTP/1.1\r\nHost: a\r\n\r\n");
        assert!(!request.headers().contains_key(header::CONTENT_LENGTH));
        assert!(!request.headers().contains_key(&X_FORWARDED_FOR));
        assert_eq!(client, None, "a local router that named nobody");
        let (post, _) = local("POST / HTTP/1.1\r\nHost: a\r\n\r\n");
        assert_eq!(post.headers()[header::CONTENT_LENGTH], "0");
    }
}
