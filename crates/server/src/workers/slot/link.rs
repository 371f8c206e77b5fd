//! What a slot's two kinds of link to a worker share: how an exchange on either fails
//! ([`LinkError`]), and a response body as it arrives over either ([`WorkerBody`]).

use std::future::Future;
use std::io::IoSlice;
use std::task::Poll;

use bytes::Bytes;

/// A response body as it arrives from a worker, over either link.
pub(super) trait WorkerBody {
    /// Whether [`WorkerBody::next_through`] shows bytes in place: worth waiting for the client's
    /// connection to be ready to take them so.
    const PASSES_THROUGH: bool = false;

    /// The next piece if it is there now, `Poll::Pending` if not yet; `Ready(None)` at the end.
    fn now(&mut self) -> impl Future<Output = Poll<Option<Result<Bytes, LinkError>>>>;
    /// The next piece, waiting for it; `None` at the end.
    fn next(&mut self) -> impl Future<Output = Option<Result<Bytes, LinkError>>>;

    /// Like [`WorkerBody::next`], but a link that holds the body's bytes where they can be read
    /// in place first shows them to `through`, which says how many of them it used: only the rest
    /// comes back as the piece (empty when `through` used all there was).
    fn next_through(&mut self, through: &mut Through<'_>) -> impl Future<Output = Option<Result<Bytes, LinkError>>> {
        let _ = through;
        self.next()
    }
}

/// Passes body bytes on from where they lie; returns how many it used.
pub(super) type Through<'a> = dyn FnMut(&[IoSlice<'_>]) -> usize + Send + 'a;

/// Why an exchange with a worker failed.
#[derive(Debug, thiserror::Error)]
pub(super) enum LinkError {
    #[error("the worker sent no answer: {0}")]
    NoAnswer(std::io::Error),
    #[error("the worker's answer broke HTTP/1.1: {}", .0.reason)]
    Response(headway_http1::HttpError),
    #[error("the worker's connection failed: {0}")]
    Io(std::io::Error),
    #[error("worker closed the connection and refused a new one: {0}")]
    Reconnect(std::io::Error),
    #[error(transparent)]
    Hop(#[from] headway_hop::HopError),
    #[error("the worker process went away")]
    WorkerGone,
    #[error("the app failed after its response began: {0}")]
    Aborted(String),
    #[error("the request body was cut short: its client left before it sent it all, or its spool failed")]
    BodyLost,
}
