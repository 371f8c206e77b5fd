//! HTTP/1.1 without I/O, the one implementation every part of headway speaks it with: the front
//! to its clients and to `--cmd` workers, the bundled worker's core, and `headway load`.
//!
//! Everything here works on byte slices and returns values or an [`HttpError`]; the callers do
//! the reading and writing. One implementation means one answer to every framing question (where
//! a body ends, which statuses carry one, what a `Content-Length` may look like), so that no two
//! parts of headway can disagree on where a message ends: request smuggling and response
//! splitting live in such disagreements. It is also what lets the tests pin each decision to
//! bytes on the wire.
//!
//! - [`request`]: request heads, validated as a server on the open internet must (limits, one
//!   way to frame the body, `Host`, `Expect`, persistence), and written by a client.
//! - [`response`]: response heads, parsed as strictly as requests (a worker's or a server's
//!   answer), written for a client, and the rules of which responses have a body.
//! - [`body`]: where a body ends and how it is decoded ([`body::BodyDecoder`], chunked coding
//!   included) or encoded for the wire ([`body::BodyEncoder`]).
//! - [`fields`]: the rules of single header fields (`Content-Length`, `Transfer-Encoding`,
//!   `Connection`, connection-specific fields) the others share.
//! - [`upgrade`]: the WebSocket opening handshake (RFC 6455 section 4).

#![warn(missing_docs)]

pub mod body;
mod error;
pub mod fields;
pub mod request;
pub mod response;
pub mod upgrade;

pub use error::HttpError;
