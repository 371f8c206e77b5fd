//! What travels through the queue: a complete request, and the channel its answer goes back on.
//!
//! The front builds a [`Job`] once the request's head and body are fully read, so a job is ready
//! to run on any slot of any worker the moment it is dispatched; only a large body its client
//! sends fast may still be arriving (its slot then waits no longer than that client's pace). The answer is an
//! [`Outcome`]: the worker's response, the worker's connection become a WebSocket, or the
//! failure the front must turn into a status.

use std::sync::atomic::{AtomicU64, Ordering};
use std::task::Poll;
use std::time::Duration;

use bytes::Bytes;
use http::StatusCode;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::{oneshot, watch};
use tokio::time::Instant;

use super::routing::Routing;
use crate::spool;
use crate::tally::Hold;

/// Identifies a job so its connection can withdraw it from the queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ticket(u64);

/// Who sent a request, as the front judged it from the peer and what trusted proxies said: carried
/// by its job beside the request (a field, not one of the request's extensions, which cost three
/// allocations a request), and passed on by the hop as the bundled worker's `REMOTE_ADDR` (an
/// HTTP worker reads `X-Forwarded-For` itself). Shared bytes: most requests'
/// client is their connection's peer, made once for the connection and cloned for each request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Client(pub Bytes);

/// A request waiting for, or running on, a slot.
pub struct Job {
    pub ticket: Ticket,
    /// When the request entered the queue (complete, or its body arriving fast): its place in
    /// the queue, and the start of its queue timeout.
    pub complete_at: Instant,
    /// The request as it will be sent to the worker: origin-form target, connection-specific
    /// fields removed, forwarding headers added, the body read (or, queued early, arriving).
    pub request: http::Request<RequestBody>,
    /// Who sent it; `None` when nothing names anyone (a local router that said nothing).
    pub client: Option<Client>,
    /// Where the outcome goes. A closed channel means the client has gone away.
    pub reply: oneshot::Sender<Outcome>,
    /// Its lane and route, set as it enters the queue; the slot gives it back with the service
    /// time, for the queue to learn from.
    pub routing: Routing,
}

impl Job {
    /// A job for a request that is complete now, and the receiver its outcome arrives on. Boxed
    /// once here: the queue, the hand-over to a slot and the slot move it by its pointer, where
    /// each move of the job itself copied its 360 bytes (some 1k instructions a request).
    pub(crate) fn new(
        request: http::Request<RequestBody>,
        client: Option<Client>,
    ) -> (Box<Job>, oneshot::Receiver<Outcome>) {
        static NEXT_TICKET: AtomicU64 = AtomicU64::new(0);
        let (reply, outcome) = oneshot::channel();
        let ticket = Ticket(NEXT_TICKET.fetch_add(1, Ordering::Relaxed));
        let job = Job { ticket, complete_at: Instant::now(), request, client, reply, routing: Routing::default() };
        (Box::new(job), outcome)
    }

    /// Sends the outcome to the connection that is waiting for it. A client that has gone
    /// away no longer waits, and there is nobody left to tell.
    pub fn answer(self, outcome: Outcome) {
        let _ = self.reply.send(outcome);
    }
}

/// A request body: in memory when small, in a spool (memory, then a temporary file) when large,
/// so waiting uploads cost bounded memory. It is complete before the request queues, but for a
/// large body whose client sends it fast: that one queues early, and its rest arrives in the
/// spool while the request waits or runs (see `front::read`).
pub enum RequestBody {
    Memory(Bytes),
    Spooled { reader: spool::Reader, len: u64 },
}

impl RequestBody {
    pub fn len(&self) -> u64 {
        match self {
            RequestBody::Memory(data) => data.len() as u64,
            RequestBody::Spooled { len, .. } => *len,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The body again, when it is at hand in memory (a spooled body is read once).
    pub fn try_clone(&self) -> Option<RequestBody> {
        match self {
            RequestBody::Memory(data) => Some(RequestBody::Memory(data.clone())),
            RequestBody::Spooled { .. } => None,
        }
    }

    /// Offers the rest of a spooled body that waits in its file alone (see
    /// [`spool::Reader::offer_file`]); `Ok(None)` for any other.
    pub fn offer_file<E>(
        &mut self,
        take: impl FnOnce(std::os::fd::BorrowedFd<'_>, u64, u64) -> Result<bool, E>,
    ) -> Result<Option<bool>, E> {
        match self {
            RequestBody::Memory(_) => Ok(None),
            RequestBody::Spooled { reader, .. } => reader.offer_file(take),
        }
    }

    /// The next piece of the body if it is there; `Ready(None)` after the last. `Pending`: the
    /// rest of a body queued early is still arriving ([`RequestBody::arrived`] says when more is).
    pub fn poll_piece(&mut self) -> Poll<Option<Result<Bytes, spool::Truncated>>> {
        match self {
            RequestBody::Memory(data) if data.is_empty() => Poll::Ready(None),
            RequestBody::Memory(data) => Poll::Ready(Some(Ok(std::mem::take(data)))),
            RequestBody::Spooled { reader, .. } => reader.try_next().map_or(Poll::Pending, Poll::Ready),
        }
    }

    /// Resolves when the client has sent more of a body that [`RequestBody::poll_piece`] found
    /// still arriving (or cut it short).
    pub async fn arrived(&self) {
        match self {
            RequestBody::Memory(_) => std::future::pending().await,
            RequestBody::Spooled { reader, .. } => reader.arrived().await,
        }
    }

    /// The next piece of the body, waiting for it if it is still arriving; `None` after the last.
    pub async fn next_piece(&mut self) -> Option<Result<Bytes, spool::Truncated>> {
        loop {
            if let Poll::Ready(piece) = self.poll_piece() {
                return piece;
            }
            self.arrived().await;
        }
    }
}

/// Marks a request (in its extensions) as a WebSocket handshake: the slot that takes it carries
/// it on a connection of its own, which becomes the socket if the worker answers `101`.
#[derive(Debug, Clone, Copy)]
pub struct WebSocketHandshake;

/// How a job ended.
pub enum Outcome {
    Response(WorkerResponse),
    /// The worker accepted a WebSocket: its `101` head, and the connection that now carries it.
    Upgraded(Upgraded),
    Failed(Failure),
}

pub struct Upgraded {
    pub head: http::response::Parts,
    pub socket: WorkerSocket,
    pub timing: Timing,
}

/// The worker's end of an open WebSocket.
pub struct WorkerSocket {
    pub io: Box<dyn WorkerIo>,
    /// The worker's `101` agreed to permessage-deflate: a client's compressed message sets a
    /// reserved bit.
    pub compressed: bool,
    /// Changes when the worker's WebSockets must close: its process is about to be replaced, or
    /// the server is stopping.
    pub closing: watch::Receiver<u64>,
    /// Counts the socket among its worker's open WebSockets while it lives.
    pub held: Hold,
}

/// A connection to a worker (any byte stream, so that tests can stand in for one).
pub trait WorkerIo: AsyncRead + AsyncWrite + Send + Unpin {}

impl<T: AsyncRead + AsyncWrite + Send + Unpin> WorkerIo for T {}

/// A worker's response: its head now, its body complete or still arriving.
pub struct WorkerResponse {
    pub head: http::response::Parts,
    pub body: ResponseBody,
    pub timing: Timing,
}

/// Where a request's time went before its response head.
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    /// From complete to started by a slot.
    pub queued: Duration,
    /// From started to the worker's response head.
    pub service: Duration,
    /// The index of the worker that ran it.
    pub worker: usize,
}

pub enum ResponseBody {
    /// The whole body arrived with the head; the front can send a `Content-Length`.
    Complete(Bytes),
    /// The body is still arriving; the slot keeps reading it from the worker into a spool so
    /// the slot is free as soon as the worker is done, however slowly the client reads.
    Streaming(spool::Reader),
}

/// Why a job got no response from a worker; each maps to the status the client receives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// The queue was at its length limit when the request arrived.
    QueueFull,
    /// No slot started the request within the queue timeout, or none could have.
    QueueTimeout,
    /// Refused on arrival while a sustained overload was held to the queue's target wait.
    StandingQueue,
    /// The worker died or broke the connection before answering.
    WorkerFailed,
    /// The worker did not answer within the request timeout.
    WorkerTimeout,
}

impl Failure {
    pub fn status(self) -> StatusCode {
        match self {
            Failure::QueueFull | Failure::QueueTimeout | Failure::StandingQueue => StatusCode::SERVICE_UNAVAILABLE,
            Failure::WorkerFailed => StatusCode::BAD_GATEWAY,
            Failure::WorkerTimeout => StatusCode::GATEWAY_TIMEOUT,
        }
    }

    pub fn message(self) -> &'static str {
        match self {
            Failure::QueueFull => "server busy: the request queue is full",
            Failure::QueueTimeout => "server busy: no worker could start the request in time",
            Failure::StandingQueue => "server busy: more requests arrive than it can serve, try again later",
            Failure::WorkerFailed => "the worker failed before answering",
            Failure::WorkerTimeout => "the worker did not answer in time",
        }
    }

    /// Whether the queue shed the request for load: the client is told when to try again
    /// (`Retry-After`); the other failures are not about load.
    pub fn is_load_shed(self) -> bool {
        match self {
            Failure::QueueFull | Failure::QueueTimeout | Failure::StandingQueue => true,
            Failure::WorkerFailed | Failure::WorkerTimeout => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pieces(mut body: RequestBody) -> Vec<u8> {
        let mut all = Vec::new();
        while let Poll::Ready(Some(piece)) = body.poll_piece() {
            all.extend_from_slice(&piece.unwrap());
        }
        all
    }

    #[tokio::test]
    async fn spooled_body_reads_back_whole() {
        let (writer, reader) = spool::channel(&spool::SpoolLimits::unbounded(16));
        let pieces_written: Vec<Bytes> = (0..10u8).map(|i| Bytes::from(vec![i; 100])).collect();
        for piece in &pieces_written {
            writer.try_write(piece.clone()).unwrap();
        }
        writer.finish();
        let body = RequestBody::Spooled { reader, len: 1000 };
        assert_eq!(body.len(), 1000);
        assert!(body.try_clone().is_none());
        assert_eq!(pieces(body), pieces_written.concat());
    }

    #[tokio::test]
    async fn body_queued_early_waits_for_its_rest() {
        let (writer, reader) = spool::channel(&spool::SpoolLimits::unbounded(16));
        writer.try_write(Bytes::from_static(b"first")).unwrap();
        let mut body = RequestBody::Spooled { reader, len: 11 };
        assert!(matches!(body.poll_piece(), Poll::Ready(Some(Ok(piece))) if piece == "first"));
        assert!(body.poll_piece().is_pending(), "the rest has not arrived");
        let late = tokio::spawn(async move {
            tokio::task::yield_now().await;
            writer.try_write(Bytes::from_static(b" rest")).unwrap();
            writer.finish();
        });
        assert_eq!(body.next_piece().await.unwrap().unwrap(), " rest");
        assert!(body.next_piece().await.is_none());
        late.await.unwrap();
    }

    #[tokio::test]
    async fn body_cut_while_arriving_says_so() {
        let (writer, reader) = spool::channel(&spool::SpoolLimits::unbounded(16));
        let mut body = RequestBody::Spooled { reader, len: 11 };
        assert!(body.poll_piece().is_pending());
        drop(writer); // the client went away mid-body
        assert!(matches!(body.next_piece().await, Some(Err(spool::Truncated))));
    }

    #[test]
    fn memory_body_ends_after_its_bytes() {
        let body = RequestBody::Memory(Bytes::from_static(b"hello"));
        assert_eq!(pieces(body.try_clone().unwrap()), b"hello");
        assert_eq!(pieces(body), b"hello");
        assert!(matches!(RequestBody::Memory(Bytes::new()).poll_piece(), Poll::Ready(None)));
    }
}
