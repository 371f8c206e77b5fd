//! HTTP/1.1 for the worker without sockets or Python: request parsing, body decoding and
//! response framing, on bytes handed in (or pulled through a [`reader::Source`]).
//!
//! The rules are those of the pure-Python worker this replaced, kept byte for byte (statuses,
//! messages, limits), so the front and a direct client see the same worker. Keeping them here,
//! apart from the socket code in `unix.rs`, lets the unit tests pin every rule to bytes, and
//! lets another transport reuse the framing.

pub mod body;
pub mod reader;
pub mod request;
pub mod response;

/// A request the worker refuses: answered with `status` and a one-line body made of
/// `message`, then the connection is closed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpError {
    pub status: u16,
    pub message: &'static str,
}

impl HttpError {
    pub const fn new(status: u16, message: &'static str) -> Self {
        HttpError { status, message }
    }

    pub const fn bad_request(message: &'static str) -> Self {
        HttpError::new(400, message)
    }
}

impl std::fmt::Display for HttpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.status, self.message)
    }
}

/// RFC 9110 `tchar`: what header names, methods and URL schemes are made of.
pub fn is_token(text: &[u8]) -> bool {
    !text.is_empty() && text.iter().all(|&b| is_tchar(b))
}

fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// Whether a response with this status carries a body at all (1xx, 204 and 304 do not).
pub fn status_allows_body(code: u16) -> bool {
    code >= 200 && code != 204 && code != 304
}

/// `bytes` without leading and trailing spaces and tabs.
pub fn trim_blanks(bytes: &[u8]) -> &[u8] {
    let start = bytes.iter().position(|&b| b != b' ' && b != b'\t').unwrap_or(bytes.len());
    let end = bytes.iter().rposition(|&b| b != b' ' && b != b'\t').map_or(start, |last| last + 1);
    &bytes[start..end]
}
