//! One client connection: read a request completely, queue it, write its response, repeat.
//!
//! The connection is the only thing a client can hold. While it is idle between requests it
//! costs a task and no buffer, no slot and no thread. A request enters the queue only once its
//! head and body are fully read ([`super::read`]), so slow uploads never hold a slot; its
//! response comes back through a spool ([`super::relay`]), so slow downloads never hold one
//! either. One request of a connection is in the queue or running at a time: the next one
//! (keep-alive or pipelined) enters at the back of the queue only after this one's response, so
//! a connection cannot take more than its share of the slots, and pipelined answers are in
//! order by construction.
//!
//! While its request waits, the connection keeps reading (up to one head's worth) to notice a
//! client that goes away: it then drops the request's [`Wait`], which withdraws it.
//!
//! A WebSocket handshake travels the same way ([`super::upgrade`]); after its `101` the
//! connection carries the socket until it closes ([`super::websocket`]).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use bytes::BytesMut;
use http::Version;
use tokio::io::AsyncReadExt;
use tokio::time::{sleep_until, Instant, Sleep};
use tracing::debug;

use super::forward::worker_request;
use super::forwarded::Peer;
use super::stream::ClientStream;
use super::upgrade::ask_worker_to_upgrade;
use super::websocket::WebSocket;
use super::{Front, FrontSettings};
use crate::access_log::RequestFields;
use crate::http1::request::RequestHead;
use crate::http1::response::{plain_response, Persistence};
use crate::http1::websocket::refusal_fields;
use crate::http1::HttpError;
use crate::job::Outcome;
use crate::queue::Wait;
use crate::stats::{Gauge, Stats};

/// How much to ask the kernel for per read.
pub(super) const READ_CHUNK: usize = 16 * 1024;

/// Why a connection ends early.
pub(super) enum End {
    /// A request the front refuses: answer with this status and close.
    Refuse(HttpError, Version),
    /// The client left, the connection broke, or the client was too slow: nothing more to say.
    Gone,
    /// The worker accepted a WebSocket and the client has its `101`: the connection stops
    /// speaking HTTP and carries the socket.
    Upgraded(Box<WebSocket>),
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
    open: Option<Gauge>,
}

/// A connection just accepted. The stream it is served on may take a while to make (a PROXY
/// header read, a TLS handshake): its deadlines and its count among the open connections run
/// from here.
pub(super) struct Arrival {
    at: Instant,
    open: Gauge,
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

    /// Serves the connection until it ends.
    pub(super) async fn serve(mut self) {
        match self.run().await {
            Ok(()) => {}
            Err(End::Gone) => {}
            Err(End::Refuse(error, version)) => self.refuse(&error, version).await,
            Err(End::Upgraded(websocket)) => {
                // Counted as a WebSocket from here on, not as an HTTP connection: a graceful
                // shutdown drains the requests first, then closes the sockets.
                self.open = None;
                self.carry(*websocket).await;
            }
        }
    }

    /// Answers a request the front refuses, and closes.
    pub(super) async fn refuse(&mut self, error: &HttpError, version: Version) {
        let response = plain_response(version, error.status, error.reason, refusal_fields(error), Persistence::Close);
        self.front.stats.response_sent(error.status);
        if self.write(&response).await.is_ok() {
            self.linger().await;
        }
    }

    async fn run(&mut self) -> Result<(), End> {
        loop {
            let Some(head) = self.read_head().await? else { return Ok(()) };
            let (method, version) = (head.method.clone(), head.version);
            let websocket = self.admit_websocket(&head)?;
            let body = self.read_body(&head).await.map_err(|end| match end {
                End::Refuse(error, _) => End::Refuse(error, version),
                gone => gone,
            })?;
            self.requests += 1;
            let persistence = self.persistence(&head);
            if let Some(health) = self.front.health_response(&head, version, persistence) {
                self.front.stats.response_sent(health.status);
                self.write(&health.bytes).await?;
                if persistence == Persistence::Close {
                    self.linger().await;
                    return Ok(());
                }
                continue;
            }
            let mut logged = self.front.access_log.is_some().then(|| RequestFields::of(&head));
            let mut request = worker_request(head, body, &self.peer, &self.front.settings.trusted_proxies);
            if websocket.is_some() {
                ask_worker_to_upgrade(&mut request);
            }
            let wait = self.front.queue.enqueue(request);
            if let Some(fields) = logged.as_mut() {
                fields.took_lane(wait.lane());
            }
            let outcome = self.wait(wait).await?;
            let sent = self.respond(&method, version, outcome, persistence).await?;
            if let (Some(log), Some(logged)) = (&self.front.access_log, logged) {
                log.log(&logged.entry(self.peer.ip, sent.status, sent.body_bytes, sent.timing));
            }
            if let (Some(socket), Some(admitted)) = (sent.websocket, websocket) {
                return Err(End::Upgraded(Box::new(WebSocket { socket, admitted })));
            }
            if sent.persistence == Persistence::Close {
                self.linger().await;
                return Ok(());
            }
        }
    }

    /// Whether the connection may carry another request after this one.
    fn persistence(&self, head: &RequestHead) -> Persistence {
        let settings = &self.front.settings;
        let limit_reached =
            settings.max_requests_per_connection != 0 && self.requests >= settings.max_requests_per_connection;
        let stopping = *self.front.shutdown.borrow();
        if head.keep_alive && settings.keep_alive && !limit_reached && !stopping {
            Persistence::KeepAlive
        } else {
            Persistence::Close
        }
    }

    /// Waits for the request's outcome while watching the client: bytes it sends meanwhile
    /// (pipelined requests, up to one head's worth) are kept for later; if it goes away, the
    /// wait is dropped, which withdraws the request.
    async fn wait(&mut self, mut wait: Wait) -> Result<Outcome, End> {
        loop {
            let read_ahead = self.buf.len() < self.front.settings.limits.max_head;
            if read_ahead {
                self.buf.reserve(READ_CHUNK);
            }
            tokio::select! {
                biased;
                outcome = wait.outcome() => return Ok(outcome),
                read = self.io.read_buf(&mut self.buf), if read_ahead => {
                    if !matches!(read, Ok(n) if n > 0) {
                        return Err(End::Gone);
                    }
                }
            }
        }
    }
}
