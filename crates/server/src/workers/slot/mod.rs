//! A slot: the front's line to a worker, carrying one request at a time.
//!
//! A worker with T slots has exactly T of them, so it never holds more than T requests and never
//! queues one internally: every wait happens in the front's queue. A slot takes the oldest
//! request from the queue, sends it, reads the response, passes the head to the client's
//! connection and pumps the body into a spool, and only then takes the next request.
//!
//! How the request travels depends on the worker: any HTTP/1.1 server (`--cmd`) gets a
//! keep-alive connection to its unix socket per slot ([`connection`]); the bundled worker gets a pair
//! of rings in memory both processes share ([`hop`]). Everything else, the loop and what a
//! response becomes, is the same for both and lives here. A WebSocket handshake goes on a
//! connection of its own for either kind of worker ([`upgrade`]).

mod connection;
mod hop;
mod link;
#[cfg(test)]
mod tests;
mod upgrade;

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use smallvec::SmallVec;
use tokio::sync::{oneshot, watch};
use tokio::time::{Instant, Sleep};
use tracing::{debug, warn};

use hop::ClientGoneSignal;
use link::{LinkError, WorkerBody};

use crate::queue::job::{
    Client, Failure, Job, Outcome, RequestBody, ResponseBody, Timing, Upgraded, WebSocketHandshake, WorkerResponse,
};
use crate::queue::Queue;
use crate::spool::{self, SpoolLimits};
use crate::workers::worker::{Phase, Transport, Worker};

/// Pause before reconnecting when a worker that says it is ready refuses a connection; and the
/// longest a slot whose request broke waits for the supervisor's verdict on the process.
const RECONNECT_DELAY: Duration = Duration::from_millis(50);

/// What every slot needs to know.
#[derive(Debug, Clone)]
pub struct SlotSettings {
    /// How long a worker may be silent (before the head, or between body pieces) before the
    /// request fails with 504 and the worker is replaced.
    pub request_timeout: Duration,
    /// Where a response waits for its client: `--response-buffer` bytes in memory, then up to
    /// `--max-temp-file-size` in a temporary file, within the disk budget.
    pub response_spool: SpoolLimits,
}

pub struct Slot {
    pub worker: Arc<Worker>,
    /// Which of the worker's slots this is, from 0.
    pub index: usize,
    pub queue: Arc<Queue>,
    pub settings: Arc<SlotSettings>,
    /// The generation of the process the slot's link goes to, which a stuck request is blamed on.
    generation: AtomicU64,
}

/// A slot's line to one worker process.
enum Link {
    Http(connection::Connection),
    Hop(hop::SlotLine),
}

impl Slot {
    pub fn new(worker: Arc<Worker>, index: usize, queue: Arc<Queue>, settings: Arc<SlotSettings>) -> Slot {
        Slot { worker, index, queue, settings, generation: AtomicU64::new(0) }
    }

    /// Serves requests for as long as the worker exists, connecting again whenever the worker
    /// is restarted or closes the connection.
    pub async fn run(self) {
        let mut phase = self.worker.watch_phase();
        while let Some(generation) = ready_generation(&mut phase).await {
            self.generation.store(generation, Ordering::Relaxed);
            let link = match &self.worker.transport {
                Transport::Http => {
                    connection::Connection::open(self.worker.socket.of(generation)).await.map(Link::Http)
                }
                Transport::Hop(links) => hop::SlotLine::of(links, generation, self.index).map(Link::Hop),
            };
            match link {
                Ok(mut link) => {
                    if self.serve(&mut link, generation, &phase).await == Ended::Broken {
                        match link {
                            // Its rings hold what a broken exchange left: only the next
                            // process's region can be trusted.
                            Link::Hop(line) if line.poisoned => leaves_generation(&mut phase, generation).await,
                            // The worker ended the exchange itself (an abort: the app failed
                            // after its head, or stopped a stream whose client left): the line
                            // is clean and the process well.
                            Link::Hop(_) => {}
                            // A request broke: the process is most likely dying. Its socket still
                            // accepts connections into the backlog for a moment after its own
                            // connections reset, and a request sent there would fail too, so wait
                            // until the supervisor has seen it exit (or, if it lives, a moment).
                            _ => {
                                let _ =
                                    tokio::time::timeout(RECONNECT_DELAY, leaves_generation(&mut phase, generation))
                                        .await;
                            }
                        }
                    }
                }
                Err(err) => {
                    debug!(worker = self.worker.index, "cannot reach the worker: {err}");
                    tokio::time::sleep(RECONNECT_DELAY).await;
                }
            }
        }
    }

    /// Runs jobs on `link` until it closes, a request on it fails, or the worker leaves
    /// generation `generation`.
    async fn serve(&self, link: &mut Link, generation: u64, phase: &watch::Receiver<Phase>) -> Ended {
        let busy = &self.worker.busy;
        // A process being replaced is stopped once no slot is linked to it any more.
        let _linked = self.worker.socket.link(generation);
        // The request timeout's timer, one for the link and moved on for each request: moving
        // a registered timer later is one atomic write, where a timer per request was set up
        // in the runtime's timer wheel and taken out again every time.
        let mut silence = Box::pin(tokio::time::sleep(self.settings.request_timeout));
        // The same for the worker's phase: one wait for it to leave this generation, made for
        // the link and polled between jobs, not one registered with the phase's channel per job.
        let mut watched = phase.clone();
        let mut leaves = std::pin::pin!(leaves_generation(&mut watched, generation));
        loop {
            let mut next = self.queue.next_job(busy);
            let closed = async {
                match link {
                    Link::Http(connection) => connection.closed().await,
                    Link::Hop(_) => std::future::pending().await,
                }
            };
            // The job first, as what wakes an idle slot nearly every time: the phase's channel
            // is then not polled again (a lock of its own), and is read once instead below.
            let job = tokio::select! {
                biased;
                job = next.recv() => Some(job),
                () = leaves.as_mut() => None,
                () = closed => None,
            };
            // A worker leaving its ready phase (draining for a reload, say) wins over a job
            // handed over at the same moment: the job goes back to the queue, not to a process
            // about to stop.
            let job = match job {
                Some(job) if *phase.borrow() != (Phase::Ready { generation }) => {
                    self.queue.give_back(job, busy);
                    None
                }
                job => job,
            };
            let Some(job) = job else {
                next.cancel(busy);
                self.report_unrequested(link);
                return Ended::Closed;
            };
            let started = Instant::now();
            let routing = job.routing;
            let after = match link {
                _ if job.request.extensions().get::<WebSocketHandshake>().is_some() => {
                    self.handshake(job).await;
                    After::Reuse
                }
                Link::Http(connection) => {
                    let socket = self.worker.socket.of(generation);
                    self.forward(job, started, None, silence.as_mut(), |request, _| {
                        connection.exchange(socket, request)
                    })
                    .await
                }
                Link::Hop(line) => {
                    let client_gone = line.client_gone_signal();
                    self.forward(job, started, Some(&client_gone), silence.as_mut(), |request, client| {
                        line.exchange(request, client)
                    })
                    .await
                }
            };
            busy.down();
            self.report_unrequested(link);
            let took = started.elapsed();
            self.worker.busy_micros.fetch_add(took.as_micros() as u64, Ordering::Relaxed);
            self.queue.record_service(routing, took);
            match after {
                After::Reuse => {}
                // Dropping the link closes its connection: the worker hears that the client left.
                After::Abandon => return Ended::Closed,
                After::Broken => return Ended::Broken,
            }
            if *phase.borrow() != (Phase::Ready { generation }) {
                return Ended::Closed;
            }
        }
    }

    /// Runs one job through `exchange` (which sends the request and waits for the response
    /// head), failing it with 504 if `silence` (reset here) fires first; says what the link can
    /// do next. If the client leaves before the response ends, `client_gone` (the hop's) tells
    /// the worker, whose app may be waiting to hear it (ASGI's `http.disconnect`), and the
    /// exchange runs to its end; a link without one (an HTTP worker's connection) is abandoned,
    /// to be closed, which is how a server behind a proxy hears it. `started`: when the slot
    /// took the job, the one clock read its queue time, deadline and service time start from.
    async fn forward<B, F>(
        &self,
        job: Box<Job>,
        started: Instant,
        client_gone: Option<&ClientGoneSignal>,
        mut silence: Pin<&mut Sleep>,
        exchange: impl FnOnce(http::Request<RequestBody>, Option<Client>) -> F,
    ) -> After
    where
        B: WorkerBody,
        F: Future<Output = Result<(http::response::Parts, B), LinkError>>,
    {
        let Job { request, client, mut reply, complete_at, .. } = *job;
        if reply.is_closed() {
            return After::Reuse; // the client left between dispatch and now: nothing to run
        }
        let timeout = self.settings.request_timeout;
        silence.as_mut().reset(started + timeout);
        let exchanged = exchange(request, client);
        tokio::pin!(exchanged);
        let mut told = false;
        let exchanged = loop {
            // The exchange first: a response that came as the timer fired is delivered, and on
            // the wake-ups that bring it the timer and the client's channel are not polled.
            tokio::select! {
                biased;
                exchanged = &mut exchanged => break Some(exchanged),
                () = silence.as_mut() => break None,
                () = reply.closed(), if !told => {
                    told = true;
                    if !tell(client_gone) {
                        return After::Abandon;
                    }
                }
            }
        };
        let (head, body) = match exchanged {
            Some(Ok(response)) => response,
            Some(Err(err)) => {
                // A request given up once its client left mid-body (by the app, or by the slot for
                // a `--cmd` worker) is no failure.
                if !(reply.is_closed() && matches!(err, LinkError::Aborted(_) | LinkError::BodyLost)) {
                    warn!(worker = self.worker.index, "request failed: {err}");
                }
                let _ = reply.send(Outcome::Failed(Failure::WorkerFailed));
                self.replace_if_broken(&err);
                return After::Broken;
            }
            None => {
                warn!(worker = self.worker.index, "no response within {timeout:?}; replacing the worker");
                let _ = reply.send(Outcome::Failed(Failure::WorkerTimeout));
                self.report_hung();
                return After::Broken;
            }
        };
        self.worker.served.fetch_add(1, Ordering::Relaxed);
        self.worker.lifetime.served_one();
        let timing = Timing {
            queued: started.saturating_duration_since(complete_at),
            service: started.elapsed(),
            worker: self.worker.index,
        };
        self.deliver(reply, head, body, timing, client_gone).await
    }

    /// Passes a response to the client's connection: whole, with the body that is already
    /// there, when that is all of it and fits the response buffer (the client then gets a
    /// `Content-Length` and one write); otherwise through a spool the slot goes on filling until
    /// the body ends, so the slot is free as soon as the worker is done, however slowly the client
    /// reads, unless the client falls so far behind that the spool is full: then the slot stops
    /// reading the worker until the client catches up. If the client leaves before the body ends,
    /// the worker is told as in [`Slot::forward`].
    async fn deliver<B: WorkerBody>(
        &self,
        reply: oneshot::Sender<Outcome>,
        head: http::response::Parts,
        mut body: B,
        timing: Timing,
        client_gone: Option<&ClientGoneSignal>,
    ) -> After {
        let limits = &self.settings.response_spool;
        let (mut pieces, mut gathered) = (Pieces::new(), 0);
        let stalled = loop {
            if gathered > limits.memory {
                break pieces; // a worker faster than us: on through the spool and its limits
            }
            match body.now().await {
                Poll::Ready(Some(Ok(piece))) => {
                    gathered += piece.len();
                    pieces.push(piece);
                }
                Poll::Ready(None) => {
                    let body = ResponseBody::Complete(concat(pieces));
                    let _ = reply.send(Outcome::Response(WorkerResponse { head, body, timing }));
                    return After::Reuse;
                }
                Poll::Ready(Some(Err(err))) => {
                    // Nothing has reached the client yet: it gets a clean 502, not a cut body.
                    warn!(worker = self.worker.index, "response body failed: {err}");
                    let _ = reply.send(Outcome::Failed(Failure::WorkerFailed));
                    self.replace_if_broken(&err);
                    return After::Broken;
                }
                Poll::Pending => break pieces,
            }
        };

        let (writer, reader) = spool::channel(limits);
        let streaming = ResponseBody::Streaming(reader);
        let _ = reply.send(Outcome::Response(WorkerResponse { head, body: streaming, timing }));
        let mut stalled = stalled.into_iter();
        let timeout = self.settings.request_timeout;
        let mut told = false;
        loop {
            let gathered = async {
                match stalled.next() {
                    Some(piece) => Ok(Some(Ok(piece))),
                    // A body shown in place goes from the worker's memory to the client's
                    // socket when the connection waits with nothing buffered (`spool`'s
                    // pass-through): the slot waits for that while the client keeps pace.
                    None => {
                        if B::PASSES_THROUGH {
                            writer.passing().await;
                        }
                        tokio::time::timeout(timeout, body.next_through(&mut |parts| writer.pass_through(parts))).await
                    }
                }
            };
            let next = tokio::select! {
                next = gathered => next,
                // An app streaming without end would otherwise hold the slot for good, pumping
                // its response into a spool nobody reads.
                () = writer.reader_left(), if !told => {
                    told = true;
                    if !tell(client_gone) {
                        return After::Abandon;
                    }
                    continue;
                }
            };
            match next {
                // All of it went straight to the client.
                Ok(Some(Ok(piece))) if piece.is_empty() => {}
                Ok(Some(Ok(piece))) => {
                    // A client keeping pace gets the body from memory, not through the disk;
                    // one too far behind holds the slot back (the spool is full): back-pressure.
                    writer.room(piece.len()).await;
                    if let Err(err) = writer.write(piece).await {
                        warn!("cannot buffer response: {err}");
                        return After::Broken;
                    }
                }
                Ok(None) => {
                    writer.finish();
                    return After::Reuse;
                }
                Ok(Some(Err(err))) => {
                    // A response cut by its app once its client left is no failure.
                    if !(writer.reader_gone() && matches!(err, LinkError::Aborted(_))) {
                        warn!(worker = self.worker.index, "response body failed: {err}");
                    }
                    self.replace_if_broken(&err);
                    return After::Broken;
                }
                Err(_) => {
                    warn!(worker = self.worker.index, "response body stalled for {timeout:?}; replacing the worker");
                    self.report_hung();
                    return After::Broken;
                }
            }
        }
    }
}

impl Slot {
    /// Counts and logs a worker connection found holding bytes no request asked for (a late or
    /// extra response): it is closed rather than read from again.
    fn report_unrequested(&self, link: &mut Link) {
        if let Link::Http(connection) = link {
            if connection.take_unrequested() {
                self.worker.unrequested.fetch_add(1, Ordering::Relaxed);
                warn!(worker = self.worker.index, "the worker sent bytes no request asked for; closing its connection");
            }
        }
    }

    /// A worker that broke the hop's rules cannot be trusted with more requests: have it replaced.
    fn replace_if_broken(&self, err: &LinkError) {
        if matches!(err, LinkError::Hop(_)) {
            warn!(worker = self.worker.index, "the worker broke the hop's rules; replacing it");
            self.report_hung();
        }
    }

    /// Carries a WebSocket handshake to the worker, on a connection of its own ([`upgrade`]),
    /// and its answer back: the socket once the worker switches, else an ordinary response.
    async fn handshake(&self, job: Box<Job>) {
        let Job { request, reply, complete_at, .. } = *job;
        if reply.is_closed() {
            return; // the client left between dispatch and now
        }
        let started = Instant::now();
        let mut connection = match upgrade::connect(&self.worker).await {
            Ok(connection) => connection,
            Err(failure) => {
                let _ = reply.send(Outcome::Failed(failure));
                return;
            }
        };
        let (head, body) =
            match upgrade::ask(&mut connection, request, &self.worker, self.settings.request_timeout).await {
                Ok(answer) => answer,
                Err(failure) => {
                    if failure == Failure::WorkerTimeout {
                        self.report_hung();
                    }
                    let _ = reply.send(Outcome::Failed(failure));
                    return;
                }
            };
        self.worker.served.fetch_add(1, Ordering::Relaxed);
        let timing = Timing {
            queued: started.saturating_duration_since(complete_at),
            service: started.elapsed(),
            worker: self.worker.index,
        };
        if head.status != http::StatusCode::SWITCHING_PROTOCOLS {
            // Refused by the app (403, 404, ...): an ordinary response on a connection that ends
            // with it.
            self.deliver(reply, head, body, timing, None).await;
            return;
        }
        // A client gone meanwhile drops the socket with the outcome, closing it.
        let _ = reply.send(match upgrade::socket(&self.worker, &head, connection) {
            Ok(socket) => Outcome::Upgraded(Upgraded { head, socket, timing }),
            Err(failure) => Outcome::Failed(failure),
        });
    }

    /// Has the process this slot's link goes to replaced: it is stuck, or broke the rules.
    pub(super) fn report_hung(&self) {
        self.worker.report_hung_of(self.generation.load(Ordering::Relaxed));
    }
}

/// Tells the worker that the client left, over a link that has a way to (the hop's signal);
/// false for one that has none, which must then be closed.
fn tell(client_gone: Option<&ClientGoneSignal>) -> bool {
    client_gone.inspect(|signal| signal.send()).is_some()
}

/// What a link can do once an exchange on it is over.
#[derive(Debug)]
enum After {
    /// Carry the next request.
    Reuse,
    /// Be closed and opened again: its exchange was abandoned, as its client left.
    Abandon,
    /// Nothing: a request failed on it (the worker died, hung, or broke the connection).
    Broken,
}

/// How a slot's link ended.
#[derive(Debug, PartialEq, Eq)]
enum Ended {
    /// Closed while idle, or the worker is being replaced: reconnect when it is ready.
    Closed,
    /// A request failed on it (the worker died, hung, or broke the connection).
    Broken,
}

/// Waits until the worker is ready and returns its generation; `None` once it is stopped.
async fn ready_generation(phase: &mut watch::Receiver<Phase>) -> Option<u64> {
    loop {
        match *phase.borrow_and_update() {
            Phase::Ready { generation } => return Some(generation),
            Phase::Stopped => return None,
            Phase::Starting | Phase::Draining => {}
        }
        phase.changed().await.ok()?;
    }
}

/// Resolves once the worker is no longer in `generation`'s ready phase.
async fn leaves_generation(phase: &mut watch::Receiver<Phase>, generation: u64) {
    let _ = phase.wait_for(|now| *now != Phase::Ready { generation }).await;
}

/// The body pieces a slot gathers before it hands a response on: one for nearly every response
/// (the worker's single write), held without an allocation.
type Pieces = SmallVec<[Bytes; 1]>;

fn concat(mut pieces: Pieces) -> Bytes {
    match pieces.len() {
        0 => Bytes::new(),
        1 => pieces.pop().expect("one piece"),
        _ => {
            let mut whole = BytesMut::with_capacity(pieces.iter().map(Bytes::len).sum());
            pieces.iter().for_each(|piece| whole.extend_from_slice(piece));
            whole.freeze()
        }
    }
}
