//! An HTTP/2 request head made into the plain fields a worker request is built from: what
//! HTTP/1.1 says in its request line and `Host`, HTTP/2 says in pseudo-header fields (RFC 9113
//! section 8.3.1), and a worker speaks HTTP/1.1 (or the hop, which carries the same fields).
//!
//! The `h2` crate has already refused what makes a message malformed at its level (a missing
//! or repeated pseudo-header, connection-specific fields, `TE` other than `trailers`, upper-case
//! names, a `content-length` its DATA frames do not match): those streams never reach the front.
//! What is left is HTTP's: methods the front does not serve, targets, and the authority, which
//! becomes `Host` under HTTP/1.1's rules (no userinfo).

use http::header::{self, HeaderMap, HeaderValue};
use http::{Method, StatusCode, Version};

use headway_http1::request::check_host;
use headway_http1::HttpError;

/// The request line and fields of a stream, as a worker request takes them.
#[derive(Debug)]
pub(super) struct Head {
    pub method: Method,
    /// Origin form (`/path?query`), or `*` for `OPTIONS *`.
    pub target: String,
    /// The fields, with `Host` made from `:authority` and the cookie crumbs joined again.
    pub headers: HeaderMap,
}

impl Head {
    pub(super) fn of(parts: http::request::Parts) -> Result<Head, HttpError> {
        let http::request::Parts { method, uri, mut headers, .. } = parts;
        if method == Method::CONNECT {
            // Extended CONNECT (RFC 8441, WebSockets over HTTP/2) is not offered either.
            return Err(HttpError::new(StatusCode::NOT_IMPLEMENTED, "CONNECT is not supported"));
        }
        let target = match uri.path_and_query() {
            Some(target) if target.as_str().starts_with('/') => target.as_str().to_owned(),
            Some(target) if target.as_str() == "*" && method == Method::OPTIONS => "*".to_owned(),
            Some(target) if target.as_str() == "*" => {
                return Err(HttpError::bad_request("'*' is only a target for OPTIONS"))
            }
            _ => return Err(HttpError::bad_request("malformed :path")),
        };
        if let Some(authority) = uri.authority() {
            let host = HeaderValue::from_str(authority.as_str())
                .map_err(|_| HttpError::bad_request("malformed :authority"))?;
            let hosts: Vec<&HeaderValue> = headers.get_all(header::HOST).iter().collect();
            if hosts.iter().any(|given| given.as_bytes() != host.as_bytes()) {
                return Err(HttpError::bad_request(":authority and Host name different hosts"));
            }
            headers.insert(header::HOST, host);
        } else if !headers.contains_key(header::HOST) {
            return Err(HttpError::bad_request("a request needs :authority or Host"));
        }
        // The `Host` a worker gets keeps HTTP/1.1's rules: one, and no userinfo.
        check_host(Version::HTTP_2, &headers)?;
        join_cookies(&mut headers)?;
        Ok(Head { method, target, headers })
    }
}

/// HTTP/2 lets a client send each cookie as a field of its own (for HPACK's sake); an HTTP/1.1
/// request has one `Cookie` field, its pairs joined by `; ` (RFC 9113 section 8.2.3).
fn join_cookies(headers: &mut HeaderMap) -> Result<(), HttpError> {
    let crumbs: Vec<&[u8]> = headers.get_all(header::COOKIE).iter().map(HeaderValue::as_bytes).collect();
    if crumbs.len() > 1 {
        let joined = HeaderValue::from_bytes(&crumbs.join(&b"; "[..]))
            .map_err(|_| HttpError::bad_request("malformed cookie field"))?;
        headers.insert(header::COOKIE, joined);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(method: &str, uri: &str, fields: &[(&str, &str)]) -> http::request::Parts {
        let mut request = http::Request::builder().method(method).uri(uri);
        for (name, value) in fields {
            request = request.header(*name, *value);
        }
        request.body(()).unwrap().into_parts().0
    }

    #[test]
    fn the_authority_becomes_host_and_the_target_origin_form() {
        let head = Head::of(parts("GET", "https://example.com:8443/a/b?c=1", &[("accept", "*/*")])).unwrap();
        assert_eq!((head.method, head.target.as_str()), (Method::GET, "/a/b?c=1"));
        assert_eq!(head.headers[header::HOST], "example.com:8443");
        assert_eq!(head.headers[header::ACCEPT], "*/*");
        let same = Head::of(parts("GET", "http://a/", &[("host", "a")])).unwrap();
        assert_eq!(same.headers.get_all(header::HOST).iter().count(), 1);
    }

    #[test]
    fn cookie_crumbs_are_joined_in_order() {
        let head =
            Head::of(parts("GET", "http://a/", &[("cookie", "a=1"), ("cookie", "b=2"), ("cookie", "c=3")])).unwrap();
        assert_eq!(head.headers.get_all(header::COOKIE).iter().collect::<Vec<_>>(), ["a=1; b=2; c=3"]);
    }

    #[test]
    fn what_a_worker_cannot_be_given_is_refused() {
        let status = |parts| Head::of(parts).unwrap_err().status;
        assert_eq!(status(parts("GET", "http://a/", &[("host", "b")])), StatusCode::BAD_REQUEST);
        assert_eq!(status(parts("GET", "/", &[])), StatusCode::BAD_REQUEST, "no authority, no Host");
        assert_eq!(status(parts("GET", "/", &[("host", "a"), ("host", "b")])), StatusCode::BAD_REQUEST);
        assert_eq!(status(parts("GET", "http://u@evil/", &[])), StatusCode::BAD_REQUEST, "userinfo");
        assert_eq!(status(parts("GET", "http://u:pw@evil/", &[("host", "u:pw@evil")])), StatusCode::BAD_REQUEST);
        assert_eq!(status(parts("GET", "/", &[("host", "u@evil")])), StatusCode::BAD_REQUEST, "userinfo in Host");
        assert_eq!(status(parts("CONNECT", "a:443", &[])), StatusCode::NOT_IMPLEMENTED);
        assert_eq!(status(parts("GET", "*", &[("host", "a")])), StatusCode::BAD_REQUEST);
        assert_eq!(Head::of(parts("OPTIONS", "*", &[("host", "a")])).unwrap().target, "*");
        assert_eq!(Head::of(parts("GET", "/p", &[("host", "a")])).unwrap().target, "/p");
    }
}
