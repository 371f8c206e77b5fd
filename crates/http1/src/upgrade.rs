//! The WebSocket opening handshake (RFC 6455 section 4): a client's request as the front judges
//! it, and the worker's answer.
//!
//! A request becomes a WebSocket only when it is unmistakably one: `GET` over HTTP/1.1 with
//! `Connection: upgrade` and `Upgrade: websocket`. Such a request with a malformed key, a body, or
//! a version other than 13 is refused here with a clear status (400, or 426 naming version 13),
//! so no app ever sees half a handshake. Anything else that mentions `Upgrade` (h2c, a `POST`,
//! HTTP/1.0) stays a plain request whose connection-specific `Upgrade` is stripped, as before.

use bytes::BytesMut;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Method, StatusCode, Version};

use crate::body::{BodyEncoder, BodyKind};
use crate::error::HttpError;
use crate::fields::{comma_tokens, has_token, strip_connection_fields, trim_blanks};
use crate::request::RequestHead;
use crate::response::{write_head, Persistence};

static SEC_WEBSOCKET_KEY: HeaderName = HeaderName::from_static("sec-websocket-key");
static SEC_WEBSOCKET_VERSION: HeaderName = HeaderName::from_static("sec-websocket-version");
static SEC_WEBSOCKET_EXTENSIONS: HeaderName = HeaderName::from_static("sec-websocket-extensions");
const VERSION: &str = "13";

/// What a refused handshake must carry besides its status: the version the front speaks.
static UNSUPPORTED_VERSION_FIELDS: [(HeaderName, HeaderValue); 1] =
    [(HeaderName::from_static("sec-websocket-version"), HeaderValue::from_static(VERSION))];

/// Whether `head` opens a WebSocket. `Ok(false)` for every request that is not a WebSocket
/// handshake, including other upgrades; an error for a WebSocket handshake the front refuses.
pub fn is_handshake(head: &RequestHead) -> Result<bool, HttpError> {
    let asks = head.method == Method::GET
        && head.version == Version::HTTP_11
        && has_token(&head.headers, &header::CONNECTION, "upgrade")
        && has_token(&head.headers, &header::UPGRADE, "websocket");
    if !asks {
        return Ok(false);
    }
    if head.body != BodyKind::Empty {
        return Err(HttpError::bad_request("a WebSocket handshake has no body"));
    }
    let mut keys = head.headers.get_all(&SEC_WEBSOCKET_KEY).iter();
    match (keys.next(), keys.next()) {
        (Some(key), None) if is_key(key.as_bytes()) => {}
        _ => return Err(HttpError::bad_request("malformed Sec-WebSocket-Key")),
    }
    let mut versions = head.headers.get_all(&SEC_WEBSOCKET_VERSION).iter();
    match (versions.next(), versions.next()) {
        (Some(version), None) if version.as_bytes().trim_ascii() == VERSION.as_bytes() => Ok(true),
        _ => Err(HttpError::new(StatusCode::UPGRADE_REQUIRED, "only WebSocket version 13 is supported")),
    }
}

/// The fields a refusal of a handshake carries: a 426 names the supported version (RFC 6455
/// section 4.4).
pub fn refusal_fields(error: &HttpError) -> &'static [(HeaderName, HeaderValue)] {
    if error.status == StatusCode::UPGRADE_REQUIRED {
        &UNSUPPORTED_VERSION_FIELDS
    } else {
        &[]
    }
}

/// A key is 16 random bytes in base64: 22 characters of the alphabet and `==`.
fn is_key(key: &[u8]) -> bool {
    let is_base64 = |b: &u8| b.is_ascii_alphanumeric() || *b == b'+' || *b == b'/';
    key.len() == 24 && key[..22].iter().all(is_base64) && &key[22..] == b"=="
}

/// Asks the worker for the upgrade: the front strips `Connection` and `Upgrade` from every
/// request it forwards, and puts back exactly these two.
pub fn ask_upgrade(headers: &mut HeaderMap) {
    headers.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
    headers.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
}

/// Whether a worker's answer accepts the WebSocket: `101` switching to `websocket`.
pub fn is_accepted(status: StatusCode, headers: &HeaderMap) -> bool {
    status == StatusCode::SWITCHING_PROTOCOLS && has_token(headers, &header::UPGRADE, "websocket")
}

/// Whether a worker's `101` agrees to permessage-deflate (RFC 7692), the one extension that gives
/// a frame's first reserved bit a meaning: a compressed message sets it on its first frame.
pub fn agrees_deflate(headers: &HeaderMap) -> bool {
    comma_tokens(headers, &SEC_WEBSOCKET_EXTENSIONS).any(|item| {
        let name = item.split(|&b| b == b';').next().map_or(&[][..], trim_blanks);
        name.eq_ignore_ascii_case(b"permessage-deflate")
    })
}

/// The `101` head for the client, from the worker's: its own fields (`Sec-WebSocket-Accept`,
/// the chosen protocol and extensions, cookies), the connection-specific ones replaced by the upgrade's.
pub fn switching_protocols(mut headers: HeaderMap) -> BytesMut {
    strip_connection_fields(&mut headers);
    ask_upgrade(&mut headers);
    let mut out = BytesMut::with_capacity(256);
    write_head(
        &mut out,
        Version::HTTP_11,
        StatusCode::SWITCHING_PROTOCOLS,
        &headers,
        &BodyEncoder::NoBody,
        Persistence::KeepAlive,
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::{parse_head, Limits};

    const HANDSHAKE: &str = "GET /chat HTTP/1.1\r\nHost: a\r\nConnection: keep-alive, Upgrade\r\n\
                             Upgrade: WebSocket\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\
                             Sec-WebSocket-Version: 13\r\n";

    fn judge(raw: &str) -> Result<bool, HttpError> {
        let limits = Limits { max_head: 4096, max_body: 1 << 20 };
        is_handshake(&parse_head(raw.as_bytes(), &limits).unwrap().unwrap().0)
    }

    #[test]
    fn a_valid_handshake_is_a_websocket() {
        assert_eq!(judge(&format!("{HANDSHAKE}\r\n")), Ok(true));
    }

    #[test]
    fn other_upgrades_stay_plain_requests() {
        assert_eq!(judge("GET / HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n"), Ok(false));
        assert_eq!(judge("GET / HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\n\r\n"), Ok(false));
        let post = HANDSHAKE.replace("GET", "POST");
        assert_eq!(judge(&format!("{post}\r\n")), Ok(false));
        let old = HANDSHAKE.replace("HTTP/1.1", "HTTP/1.0");
        assert_eq!(judge(&format!("{old}\r\n")), Ok(false));
        assert_eq!(judge("GET / HTTP/1.1\r\nHost: a\r\n\r\n"), Ok(false));
    }

    #[test]
    fn a_malformed_websocket_handshake_gets_400() {
        for key in ["", "dGhlIHNhbXBsZSBub25jZQ", "dGhlIHNhbXBsZSBub25jZQ=", "dGhlIHNhbXBsZSBub25j!Q=="] {
            let raw = HANDSHAKE.replace("dGhlIHNhbXBsZSBub25jZQ==", key);
            assert_eq!(judge(&format!("{raw}\r\n")).unwrap_err().status, StatusCode::BAD_REQUEST, "key {key:?}");
        }
        let two_keys = format!("{HANDSHAKE}Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n");
        assert_eq!(judge(&two_keys).unwrap_err().status, StatusCode::BAD_REQUEST);
        let with_body = format!("{HANDSHAKE}Content-Length: 3\r\n\r\nabc");
        assert_eq!(judge(&with_body).unwrap_err().status, StatusCode::BAD_REQUEST);
    }

    #[test]
    fn another_version_gets_426_naming_13() {
        let raw = HANDSHAKE.replace("Version: 13", "Version: 8");
        let refused = judge(&format!("{raw}\r\n")).unwrap_err();
        assert_eq!(refused.status, StatusCode::UPGRADE_REQUIRED);
        assert_eq!(refusal_fields(&refused)[0].1, "13");
        assert!(refusal_fields(&HttpError::bad_request("x")).is_empty());
    }

    #[test]
    fn only_permessage_deflate_is_a_compressed_socket() {
        let agreed = |value: &'static str| {
            let mut headers = HeaderMap::new();
            headers.insert(SEC_WEBSOCKET_EXTENSIONS.clone(), HeaderValue::from_static(value));
            agrees_deflate(&headers)
        };
        assert!(agreed("permessage-deflate"));
        assert!(agreed("x-webkit-deflate-frame, Permessage-Deflate ; client_max_window_bits=15"));
        assert!(!agreed("x-webkit-deflate-frame"));
        assert!(!agreed("permessage-deflated"));
        assert!(!agrees_deflate(&HeaderMap::new()));
    }

    #[test]
    fn the_clients_101_keeps_the_workers_fields_and_says_upgrade() {
        let mut headers = HeaderMap::new();
        headers.insert("sec-websocket-accept", HeaderValue::from_static("s3pPLMBiTxaQ9kYGzzhZRbK+xOo="));
        headers.insert(header::CONNECTION, HeaderValue::from_static("Upgrade, X-Private"));
        headers.insert("x-private", HeaderValue::from_static("1"));
        let head = String::from_utf8(switching_protocols(headers).to_vec()).unwrap();
        assert!(head.starts_with("HTTP/1.1 101 Switching Protocols\r\n"), "{head}");
        assert!(head.contains("sec-websocket-accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n"));
        assert!(head.contains("connection: upgrade\r\n") && head.contains("upgrade: websocket\r\n"), "{head}");
        assert!(!head.contains("x-private"));
    }
}
