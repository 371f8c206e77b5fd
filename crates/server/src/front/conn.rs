//! One client connection: its state (the bytes read and not yet used, its timers, who the peer
//! is) and the I/O every stage of serving it uses: writing, refusing, lingering before a close.
//!
//! The connection is the only thing a client can hold. While it is idle between requests it
//! costs a task and no buffer, no slot and no thread. Its life (read, queue, respond, repeat) is
//! in [`super::serve`]; the stages are [`super::read`], [`super::relay`], [`super::upgrade`] and,
//! after a `101`, [`super::websocket`].

use std::future::{poll_fn, Future};
use std::io::{self, IoSlice};
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http::Version;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::{sleep_until, timeout, timeout_at, Instant, Sleep};
use tracing::debug;

use super::forwarding_fields::Peer;
use super::state::{Front, FrontSettings};
use super::stream::ClientStream;
use crate::ops::stats::{Gauge, Stats};
use headway_http1::response::{plain_response, Persistence};
use headway_http1::upgrade::refusal_fields;
use headway_http1::HttpError;

/// How much to ask the kernel for per read.
pub(super) const READ_CHUNK: usize = 16 * 1024;

/// After the last response on a connection, how long and how much to keep reading (and
/// discarding) so that unread client bytes do not make the kernel reset the connection before
/// the client has read the response.
const LINGER_TIME: Duration = Duration::from_secs(2);
const LINGER_BYTES: usize = 1 << 20;

/// Why a connection ends early.
pub(super) enum End {
    /// A request the front refuses: answer with this status and close.
    Refuse(HttpError, Version),
    /// The client left, the connection broke, or the client was too slow: nothing more to say.
    Gone,
}

impl From<std::io::Error> for End {
    fn from(err: std::io::Error) -> Self {
        debug!("client connection error: {err}");
        End::Gone
    }
}

pub struct Connection<S> {
    pub(super) io: S,
    pub(super) peer: Peer,
    /// Bytes read and not yet used: the rest of a head, a body, pipelined requests.
    pub(super) buf: BytesMut,
    pub(super) front: Arc<Front>,
    pub(super) accepted_at: Instant,
    /// Requests read so far.
    pub(super) requests: u64,
    /// Ends the wait for a request: the first one's header timeout, then the keep-alive timeout.
    /// One timer for the connection's life, moved on for each request (a registered timer moves
    /// later with one atomic write; a new one per request went in and out of the runtime's
    /// timer wheel every time).
    pub(super) idle_timer: Pin<Box<Sleep>>,
    /// Resolves once the server is stopping, which ends an idle keep-alive wait. Made once for
    /// the connection (registered with the shutdown signal at its first poll and staying so),
    /// not per request; the connection ends the first time it resolves, and never polls it again.
    pub(super) stopping: Pin<Box<dyn Future<Output = ()> + Send>>,
    /// Counts the connection as open, from its accept (so that a shutdown waits for one accepted
    /// and not yet running) until it closes or becomes a WebSocket.
    pub(super) open: Option<Gauge>,
}

/// A connection just accepted. The stream it is served on may take a while to make (a PROXY
/// header read, a TLS handshake): its deadlines and its count among the open connections run
/// from here.
pub(super) struct Arrival {
    pub(super) at: Instant,
    pub(super) open: Gauge,
}

impl Arrival {
    pub(super) fn now(stats: &Arc<Stats>) -> Arrival {
        Arrival { at: Instant::now(), open: stats.connection_opened() }
    }

    /// When the first request head (or a PROXY header, or a TLS handshake) must be complete.
    pub(super) fn deadline(&self, settings: &FrontSettings) -> Instant {
        self.at + settings.header_timeout
    }
}

impl<S: ClientStream> Connection<S> {
    /// `read`: bytes of the connection read before it was made (after a PROXY header).
    pub(super) fn new(io: S, peer: Peer, front: Arc<Front>, arrival: Arrival, read: BytesMut) -> Self {
        let Arrival { at: accepted_at, open } = arrival;
        let idle_timer = Box::pin(sleep_until(accepted_at + front.settings.header_timeout));
        let mut shutdown = front.shutdown.clone();
        let stopping = Box::pin(async move {
            let _ = shutdown.wait_for(|stopping| *stopping).await;
        });
        Connection { io, peer, buf: read, front, accepted_at, requests: 0, idle_timer, stopping, open: Some(open) }
    }

    /// Answers a request the front refuses, and closes.
    pub(super) async fn refuse(&mut self, error: &HttpError, version: Version) {
        let response = plain_response(version, error.status, error.reason, refusal_fields(error), Persistence::Close);
        self.front.stats.response_sent(error.status);
        if self.write(&response).await.is_ok() {
            self.linger().await;
        }
    }

    /// Writes all of `data`; a client that accepts nothing for the I/O timeout is dropped.
    pub(super) async fn write(&mut self, data: &[u8]) -> Result<(), End> {
        let io_timeout = self.front.settings.io_timeout;
        within(io_timeout, self.io.write_all(data)).await
    }

    /// Writes all of `pieces`, in as few writes as the stream takes them in; as [`Self::write`].
    pub(super) async fn write_pieces(&mut self, pieces: &[Bytes]) -> Result<(), End> {
        let io_timeout = self.front.settings.io_timeout;
        let mut slices: Vec<IoSlice<'_>> = pieces.iter().map(|piece| IoSlice::new(piece)).collect();
        let mut slices = &mut slices[..];
        while !slices.is_empty() {
            let written = within(io_timeout, self.io.write_vectored(slices)).await?;
            if written == 0 {
                return Err(io::Error::from(io::ErrorKind::WriteZero).into());
            }
            IoSlice::advance_slices(&mut slices, written);
        }
        Ok(())
    }

    /// Closes our side, then reads and discards what the client still sends for a moment, so
    /// the client reads our last response before the connection is torn down.
    pub(super) async fn linger(&mut self) {
        if self.io.shutdown().await.is_err() {
            return;
        }
        let until = Instant::now() + LINGER_TIME;
        let mut discarded = 0;
        while discarded < LINGER_BYTES {
            self.buf.clear();
            self.buf.reserve(READ_CHUNK);
            match timeout_at(until, self.io.read_buf(&mut self.buf)).await {
                Ok(Ok(read)) if read > 0 => discarded += read,
                _ => return,
            }
        }
    }
}

/// Runs a write; one the client accepts nothing of for `io_timeout` ends the connection. Most
/// writes fit the socket's buffer at once: only one that has to wait sets a timer (setting and
/// clearing one for every response was a measurable part of the front's time per request).
pub(super) async fn within<T>(io_timeout: Duration, write: impl Future<Output = io::Result<T>>) -> Result<T, End> {
    let mut write = std::pin::pin!(write);
    if let Poll::Ready(written) = poll_fn(|context| Poll::Ready(write.as_mut().poll(context))).await {
        return Ok(written?);
    }
    match timeout(io_timeout, write).await {
        Ok(written) => Ok(written?),
        Err(_) => Err(End::Gone),
    }
}
