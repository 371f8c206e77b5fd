//! HTTP/1.1 for the worker, on bytes handed in or pulled through a [`reader::Source`]: the
//! request as the WSGI environ, the ASGI scope and the Rack env need it ([`request`]), its body
//! as the app reads it ([`body`]), and the app's response head and its framing ([`response`]).
//!
//! The rules themselves (what a valid head is, where a body ends, chunked coding, which
//! responses carry a body) are `headway_http1`'s, the same the front holds its clients to; this
//! module adapts them to the worker's blocking transports, apart from the socket code in
//! `unix.rs`. [`cgi`] holds the CGI variables' rules that WSGI and Rack share.

pub mod body;
pub mod cgi;
pub mod feeder;
pub mod reader;
pub mod request;
pub mod response;
pub mod source;

pub use headway_http1::HttpError;
