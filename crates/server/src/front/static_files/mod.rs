//! Files at the front: `--static URL_PREFIX=DIR` mounts answered without a slot or the queue,
//! and a worker's `X-Accel-Redirect` / `X-Sendfile` answered with a file in place of its body
//! ([`accel`]).
//!
//! A request under a mount ([`mounts`]) is served here if it is a `GET` or `HEAD` for a file in
//! the mount's directory ([`resolve`] says which, and never one outside it); a request for a file
//! that is not there goes on to the app, as Rails' `public_file_server` and WhiteNoise do, or gets
//! `404` from a mount with `:only` (or `--static-only`). The response ([`response`]) carries
//! validators, honours conditionals and ranges, several as a multipart body ([`conditional`],
//! [`range`]), sends a precompressed variant where the client takes one ([`variant`]) and says
//! what the file is and how long it may be kept ([`fields`]).
//! [`send`] puts the bytes on the wire: `sendfile(2)` on a plain socket, bounded pieces through
//! TLS and HTTP/2, so a slow reader of a large file costs the front no memory.

pub mod accel;
mod conditional;
mod fields;
pub(super) mod file_io;
mod mounts;
mod open_files;
mod range;
mod resolve;
mod response;
pub(super) mod send;
mod variant;

pub use conditional::Preconditions;
pub use fields::MaxAge;
pub use mounts::{Mount, MountOptions, Sendfile, StaticSettings};
pub use response::{FileBody, FileResponse, StaticAnswer};

/// The lane the access log names for a response the front served from a mount.
pub const STATIC_LANE: &str = "static";
