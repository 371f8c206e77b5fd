//! A message headway refuses, and the status that says why.

use http::StatusCode;

/// A message headway refuses, and the status that says why: a request's sender gets `status` and
/// a one-line plain body made of `reason`, then the connection closes (after a framing error
/// nothing later on the connection can be trusted to start where we think it does). For a
/// response that breaks the rules the status is `502 Bad Gateway`: what the client of a
/// gateway is owed when the server behind it answered wrongly.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{status}: {reason}")]
pub struct HttpError {
    /// The status the message's sender is answered with.
    pub status: StatusCode,
    /// Why, in a few words: the answer's body.
    pub reason: &'static str,
}

impl HttpError {
    /// Refused with `status`, for `reason`.
    pub const fn new(status: StatusCode, reason: &'static str) -> Self {
        HttpError { status, reason }
    }

    /// A request refused with `400 Bad Request`.
    pub const fn bad_request(reason: &'static str) -> Self {
        HttpError::new(StatusCode::BAD_REQUEST, reason)
    }

    /// A response refused: `502 Bad Gateway`.
    pub const fn bad_response(reason: &'static str) -> Self {
        HttpError::new(StatusCode::BAD_GATEWAY, reason)
    }
}
