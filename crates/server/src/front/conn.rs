//! One client connection: read a request completely, queue it, write its response, repeat.
//!
//! The connection is the only thing a client can hold. While it is idle between requests it
//! costs a task and a buffer, no slot and no thread. A request enters the queue only once its
//! head and body are fully read, so slow uploads never hold a slot; its response comes back
//! through a spool, so slow downloads never hold one either. One request of a connection is in
//! the queue or running at a time: the next one (keep-alive or pipelined) enters at the back
//! of the queue only after this one's response, so a connection cannot take more than its
//! share of the slots, and pipelined answers are in order by construction.
//!
//! While a request waits, the connection keeps reading (up to one head's worth) to notice a
//! client that goes away: its request is then withdrawn and never runs.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Buf, Bytes, BytesMut};
use http::header::{self, HeaderValue};
use http::{Method, StatusCode, Version};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::time::{sleep_until, timeout, timeout_at};
use tracing::debug;

use super::forward::worker_request;
use super::Front;
use crate::access_log;
use crate::http1::chunked::ChunkedDecoder;
use crate::http1::request::{parse_head, Framing, RequestHead};
use crate::http1::response::{plain_response, put_chunk, write_head, Persistence, LAST_CHUNK};
use crate::http1::{response_has_body, strip_hop_by_hop, HttpError};
use crate::job::{Failure, Job, Outcome, RequestBody, ResponseBody, Timing, WorkerResponse};
use crate::queue::{Refused, Withdrawal};
use crate::spool;

/// How much to ask the kernel for per read.
const READ_CHUNK: usize = 16 * 1024;
/// Write out a streamed body once this much is gathered.
const FLUSH_AT: usize = 64 * 1024;
/// After the last response on a connection, how long and how much to keep reading (and
/// discarding) so that unread client bytes do not make the kernel reset the connection before
/// the client has read the response.
const LINGER_TIME: Duration = Duration::from_secs(2);
const LINGER_BYTES: usize = 1 << 20;

/// Why a connection ends early.
enum End {
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
    io: S,
    client_ip: Option<IpAddr>,
    /// Bytes read and not yet used: the rest of a head, a body, pipelined requests.
    buf: BytesMut,
    front: Arc<Front>,
    accepted_at: Instant,
    requests: u64,
}

/// What a client connection runs on: a TCP or unix stream.
pub trait ClientStream: AsyncRead + AsyncWrite + Unpin {
    /// Resolves when the stream has bytes (or an end) to read, without reading them.
    fn readable(&self) -> impl std::future::Future<Output = std::io::Result<()>>;
}

impl ClientStream for tokio::net::TcpStream {
    fn readable(&self) -> impl std::future::Future<Output = std::io::Result<()>> {
        tokio::net::TcpStream::readable(self)
    }
}

impl ClientStream for tokio::net::UnixStream {
    fn readable(&self) -> impl std::future::Future<Output = std::io::Result<()>> {
        tokio::net::UnixStream::readable(self)
    }
}

impl<S: ClientStream> Connection<S> {
    pub fn new(io: S, client_ip: Option<IpAddr>, front: Arc<Front>) -> Self {
        Connection { io, client_ip, buf: BytesMut::new(), front, accepted_at: Instant::now(), requests: 0 }
    }

    /// Serves the connection until it ends.
    pub async fn serve(mut self) {
        let _open = self.front.stats.connection_opened();
        match self.run().await {
            Ok(()) => {}
            Err(End::Gone) => {}
            Err(End::Refuse(error, version)) => {
                let response = plain_response(version, error.status, error.reason, &[], Persistence::Close);
                self.front.stats.response_sent(error.status);
                if self.write(&response).await.is_ok() {
                    self.linger().await;
                }
            }
        }
    }

    async fn run(&mut self) -> Result<(), End> {
        loop {
            let Some(head) = self.read_head().await? else { return Ok(()) };
            let (method, version) = (head.method.clone(), head.version);
            let body = self.read_body(&head).await.map_err(|end| match end {
                End::Refuse(error, _) => End::Refuse(error, version),
                gone => gone,
            })?;
            self.requests += 1;
            let persistence = self.persistence(&head);
            let logged = self.front.access_log.is_some().then(|| Logged::of(&head));
            let outcome = self.queue_and_wait(worker_request(head, body, self.client_ip)).await?;
            let sent = self.respond(&method, version, outcome, persistence).await?;
            if let (Some(log), Some(logged)) = (&self.front.access_log, logged) {
                log.log(&logged.entry(self.client_ip, &sent));
            }
            if sent.persistence == Persistence::Close {
                self.linger().await;
                return Ok(());
            }
        }
    }

    /// Reads the next request head. `None`: the client closed, or stayed idle too long, or the
    /// server is shutting down, while no request was under way.
    async fn read_head(&mut self) -> Result<Option<RequestHead>, End> {
        let settings = &self.front.settings;
        let first = self.requests == 0;
        // The first request must be complete within the header timeout of the accept; later
        // ones within the header timeout of their first byte.
        let first_deadline = self.accepted_at + settings.header_timeout;
        if self.buf.is_empty() {
            // An idle connection holds no buffer: ten thousand idle keep-alive clients should
            // cost a few megabytes, not a read buffer each. The buffer comes back with the
            // next request's first bytes.
            self.buf = BytesMut::new();
            let idle_until = if first { first_deadline } else { Instant::now() + settings.keep_alive_timeout };
            let _idle = self.front.stats.connection_idle();
            let mut shutdown = self.front.shutdown.clone();
            let (io, buf) = (&mut self.io, &mut self.buf);
            let next_bytes = async {
                io.readable().await?;
                buf.reserve(READ_CHUNK);
                io.read_buf(buf).await
            };
            tokio::select! {
                read = next_bytes => if read? == 0 { return Ok(None) },
                () = sleep_until(idle_until.into()) => return Ok(None),
                _ = shutdown.wait_for(|stopping| *stopping) => return Ok(None),
            }
        }
        let deadline = if first { first_deadline } else { Instant::now() + settings.header_timeout };
        let mut scanned = 0;
        loop {
            // Parse only once the blank line that ends a head has arrived (or the limit is
            // reached): re-parsing on every byte of a slowly sent head would be quadratic.
            if has_head_end(&self.buf, scanned) || self.buf.len() >= settings.limits.max_head {
                match parse_head(&self.buf, &settings.limits) {
                    Ok(Some((head, len))) => {
                        self.buf.advance(len);
                        return Ok(Some(head));
                    }
                    Ok(None) => {}
                    Err(error) => return Err(End::Refuse(error, Version::HTTP_11)),
                }
            }
            scanned = self.buf.len();
            self.buf.reserve(READ_CHUNK);
            match timeout_at(deadline.into(), self.io.read_buf(&mut self.buf)).await {
                Ok(read) => {
                    if read? == 0 {
                        return Err(End::Gone); // closed mid-head: nobody to answer
                    }
                }
                Err(_) => {
                    let error = HttpError::new(StatusCode::REQUEST_TIMEOUT, "request header not received in time");
                    return Err(End::Refuse(error, Version::HTTP_11));
                }
            }
        }
    }

    /// Reads the whole body. Only then may the request queue.
    async fn read_body(&mut self, head: &RequestHead) -> Result<RequestBody, End> {
        let mut sink = BodySink::new(self.front.settings.request_buffer);
        match head.framing {
            Framing::Empty => {}
            Framing::Length(len) => {
                self.send_continue(head).await?;
                let mut remaining = len; // at most --max-body, checked by the parser
                loop {
                    let take = remaining.min(self.buf.len() as u64) as usize;
                    if take > 0 {
                        sink.push(self.buf.split_to(take).freeze())?;
                        remaining -= take as u64;
                    }
                    if remaining == 0 {
                        break;
                    }
                    self.buf.reserve(remaining.min(256 * 1024) as usize);
                    self.read_body_bytes().await?;
                }
            }
            Framing::Chunked => {
                self.send_continue(head).await?;
                let mut decoder = ChunkedDecoder::new(self.front.settings.limits.max_body);
                let mut decoded = BytesMut::new();
                loop {
                    let used =
                        decoder.decode(&self.buf, &mut decoded).map_err(|error| End::Refuse(error, head.version))?;
                    self.buf.advance(used);
                    if !decoded.is_empty() {
                        sink.push(decoded.split().freeze())?;
                    }
                    if decoder.is_done() {
                        break;
                    }
                    self.buf.reserve(READ_CHUNK);
                    self.read_body_bytes().await?;
                }
            }
        }
        Ok(sink.finish())
    }

    /// One read of body bytes; a client silent for the I/O timeout gets 408.
    async fn read_body_bytes(&mut self) -> Result<(), End> {
        match timeout(self.front.settings.io_timeout, self.io.read_buf(&mut self.buf)).await {
            Ok(read) if read.as_ref().is_ok_and(|&n| n > 0) => Ok(()),
            Ok(_) => Err(End::Gone),
            Err(_) => Err(End::Refuse(
                HttpError::new(StatusCode::REQUEST_TIMEOUT, "request body not received in time"),
                Version::HTTP_11,
            )),
        }
    }

    /// Tells a client that waits for it to send its body (RFC 9110 section 10.1.1).
    async fn send_continue(&mut self, head: &RequestHead) -> Result<(), End> {
        if head.expect_continue && self.buf.is_empty() {
            self.write(b"HTTP/1.1 100 Continue\r\n\r\n").await?;
        }
        Ok(())
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

    /// Puts the request in the queue and waits for its outcome, watching for the client
    /// leaving and for the queue timeout.
    async fn queue_and_wait(&mut self, request: http::Request<RequestBody>) -> Result<Outcome, End> {
        let queue = self.front.queue.clone();
        let (job, mut outcome) = Job::new(request);
        let ticket = job.ticket;
        let deadline = job.complete_at + queue.timeout();
        match queue.push(job) {
            Ok(()) => {}
            Err(Refused::Full) => return Ok(Outcome::Failed(Failure::QueueFull)),
            Err(Refused::WouldTimeOut) => return Ok(Outcome::Failed(Failure::QueueTimeout)),
        }
        let mut queued = true;
        loop {
            let read_ahead = self.buf.len() < self.front.settings.limits.max_head;
            if read_ahead {
                self.buf.reserve(READ_CHUNK);
            }
            tokio::select! {
                biased;
                result = &mut outcome => {
                    // A dropped reply means the job was lost with its slot: a worker failure.
                    return Ok(result.unwrap_or(Outcome::Failed(Failure::WorkerFailed)));
                }
                () = sleep_until(deadline.into()), if queued => {
                    if queue.withdraw(ticket, Withdrawal::TimedOut) {
                        return Ok(Outcome::Failed(Failure::QueueTimeout));
                    }
                    queued = false; // it started just in time; the request timeout applies now
                }
                read = self.io.read_buf(&mut self.buf), if read_ahead => {
                    if !matches!(read, Ok(n) if n > 0) {
                        let was_queued = queue.withdraw(ticket, Withdrawal::ClientGone);
                        self.front.stats.abandoned(was_queued);
                        return Err(End::Gone);
                    }
                    // Otherwise: pipelined bytes, kept for the next request.
                }
            }
        }
    }

    /// Writes the outcome to the client.
    async fn respond(
        &mut self,
        method: &Method,
        version: Version,
        outcome: Outcome,
        persistence: Persistence,
    ) -> Result<Sent, End> {
        match outcome {
            Outcome::Failed(failure) => {
                let retry_after = failure.retry_after_secs().map(|secs| (header::RETRY_AFTER, HeaderValue::from(secs)));
                let message = failure.message();
                let response = plain_response(version, failure.status(), message, retry_after.as_slice(), persistence);
                self.front.stats.response_sent(failure.status());
                self.write(&response).await?;
                let body_bytes = message.len() as u64 + 1;
                Ok(Sent { persistence, status: failure.status(), body_bytes, timing: None })
            }
            Outcome::Response(response) => self.relay(method, version, response, persistence).await,
        }
    }

    /// Re-frames a worker's response for this client and writes it.
    async fn relay(
        &mut self,
        method: &Method,
        version: Version,
        response: WorkerResponse,
        persistence: Persistence,
    ) -> Result<Sent, End> {
        let WorkerResponse { head, body, timing } = response;
        let status = head.status;
        let sent = |persistence, body_bytes| Sent { persistence, status, body_bytes, timing: Some(timing) };
        let mut headers = head.headers;
        strip_hop_by_hop(&mut headers);
        self.front.stats.response_sent(status);
        let mut out = BytesMut::with_capacity(512);

        if !response_has_body(method, status) {
            write_head(&mut out, version, status, &headers, false, persistence);
            self.write(&out).await?;
            return Ok(sent(persistence, 0));
        }
        let reader = match body {
            ResponseBody::Complete(data) => {
                if !headers.contains_key(header::CONTENT_LENGTH) {
                    headers.insert(header::CONTENT_LENGTH, HeaderValue::from(data.len()));
                }
                write_head(&mut out, version, status, &headers, false, persistence);
                out.extend_from_slice(&data);
                self.write(&out).await?;
                return Ok(sent(persistence, data.len() as u64));
            }
            ResponseBody::Streaming(reader) => reader,
        };

        // A body still arriving: keep its length if the worker gave one; otherwise chunked
        // for HTTP/1.1, or the end of the connection marks the end of the body for HTTP/1.0.
        let (chunked, persistence) = if headers.contains_key(header::CONTENT_LENGTH) {
            (false, persistence)
        } else if version == Version::HTTP_11 {
            (true, persistence)
        } else {
            (false, Persistence::Close)
        };
        write_head(&mut out, version, status, &headers, chunked, persistence);
        let mut reader = reader;
        let mut body_bytes = 0;
        loop {
            let piece = match reader.try_next() {
                Some(piece) => piece,
                None => {
                    if !out.is_empty() {
                        self.write(&out).await?;
                        out.clear();
                    }
                    reader.next().await
                }
            };
            match piece {
                Some(Ok(data)) => {
                    body_bytes += data.len() as u64;
                    if chunked {
                        put_chunk(&mut out, &data);
                    } else {
                        out.extend_from_slice(&data);
                    }
                }
                None => {
                    if chunked {
                        out.extend_from_slice(LAST_CHUNK);
                    }
                    self.write(&out).await?;
                    return Ok(sent(persistence, body_bytes));
                }
                Some(Err(truncated)) => {
                    // Too late for a status: end the connection so the client sees a body
                    // cut short, not a complete one.
                    debug!("{truncated}");
                    let _ = self.write(&out).await;
                    return Err(End::Gone);
                }
            }
            if out.len() >= FLUSH_AT {
                self.write(&out).await?;
                out.clear();
            }
        }
    }

    /// Writes all of `data`; a client that accepts nothing for the I/O timeout is dropped.
    async fn write(&mut self, data: &[u8]) -> Result<(), End> {
        match timeout(self.front.settings.io_timeout, self.io.write_all(data)).await {
            Ok(written) => Ok(written?),
            Err(_) => Err(End::Gone),
        }
    }

    /// Closes our side, then reads and discards what the client still sends for a moment, so
    /// the client reads our last response before the connection is torn down.
    async fn linger(&mut self) {
        if self.io.shutdown().await.is_err() {
            return;
        }
        let until = Instant::now() + LINGER_TIME;
        let mut discarded = 0;
        while discarded < LINGER_BYTES {
            self.buf.clear();
            self.buf.reserve(READ_CHUNK);
            match timeout_at(until.into(), self.io.read_buf(&mut self.buf)).await {
                Ok(Ok(read)) if read > 0 => discarded += read,
                _ => return,
            }
        }
    }
}

/// What was sent for one request.
struct Sent {
    persistence: Persistence,
    status: StatusCode,
    body_bytes: u64,
    /// Queue and service time, when a worker answered.
    timing: Option<Timing>,
}

/// What the access log needs of a request head, kept once the head has gone to the worker.
struct Logged {
    method: Method,
    target: String,
    version: Version,
    referer: Option<String>,
    user_agent: Option<String>,
}

impl Logged {
    fn of(head: &RequestHead) -> Self {
        let field = |name| {
            head.headers.get(name).map(|value: &HeaderValue| String::from_utf8_lossy(value.as_bytes()).into_owned())
        };
        Logged {
            method: head.method.clone(),
            target: head.target.clone(),
            version: head.version,
            referer: field(header::REFERER),
            user_agent: field(header::USER_AGENT),
        }
    }

    fn entry<'a>(&'a self, client_ip: Option<IpAddr>, sent: &Sent) -> access_log::Entry<'a> {
        access_log::Entry {
            client_ip,
            method: self.method.as_str(),
            target: &self.target,
            version: self.version,
            status: sent.status.as_u16(),
            body_bytes: sent.body_bytes,
            referer: self.referer.as_deref(),
            user_agent: self.user_agent.as_deref(),
            queued: sent.timing.map(|timing| timing.queued),
            service: sent.timing.map(|timing| timing.service),
        }
    }
}

/// Collects a request body: in memory up to the request buffer size, then in a spool (a
/// temporary file past that), so a thousand waiting uploads do not cost a thousand bodies of
/// memory.
struct BodySink {
    pieces: Vec<Bytes>,
    len: u64,
    memory_limit: usize,
    spool: Option<(spool::Writer, spool::Reader)>,
}

impl BodySink {
    fn new(memory_limit: usize) -> Self {
        BodySink { pieces: Vec::new(), len: 0, memory_limit, spool: None }
    }

    fn push(&mut self, data: Bytes) -> Result<(), End> {
        self.len += data.len() as u64;
        if self.spool.is_none() && self.len <= self.memory_limit as u64 {
            self.pieces.push(data);
            return Ok(());
        }
        let (writer, _) = self.spool.get_or_insert_with(|| spool::channel(self.memory_limit));
        let spooled = self.pieces.drain(..).chain(std::iter::once(data)).try_for_each(|piece| writer.write(piece));
        spooled.map_err(|err| {
            tracing::warn!("cannot buffer a request body: {err}");
            End::Refuse(
                HttpError::new(StatusCode::INTERNAL_SERVER_ERROR, "cannot buffer the request body"),
                Version::HTTP_11,
            )
        })
    }

    fn finish(self) -> RequestBody {
        match self.spool {
            Some((writer, reader)) => {
                writer.finish();
                RequestBody::Spooled { reader, len: self.len }
            }
            None if self.pieces.len() == 1 => RequestBody::Memory(self.pieces.into_iter().next().expect("one piece")),
            None => RequestBody::Memory(self.pieces.concat().into()),
        }
    }
}

/// Whether `buf` holds the blank line that ends a head, looking only at bytes from `from`
/// on (and the three before, which may start the terminator).
fn has_head_end(buf: &[u8], from: usize) -> bool {
    let start = from.saturating_sub(3);
    let window = &buf[start..];
    window.windows(2).any(|pair| pair == b"\n\n") || window.windows(3).any(|triple| triple == b"\n\r\n")
}

#[cfg(test)]
mod tests {
    use super::has_head_end;

    #[test]
    fn finds_head_end_across_reads() {
        let head = b"GET / HTTP/1.1\r\nHost: a\r\n\r\n";
        assert!(has_head_end(head, 0));
        assert!(has_head_end(head, head.len() - 1), "terminator split across reads");
        assert!(!has_head_end(b"GET / HTTP/1.1\r\nHost: a\r\n", 0));
        assert!(has_head_end(b"GET / HTTP/1.0\n\n", 10));
    }
}
