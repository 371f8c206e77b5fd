//! Writing a request's outcome to its client: a failure as a plain response, or a worker's
//! response re-framed for this client (its own `Content-Length`, chunked or close-delimited
//! body, persistence).
//!
//! A response body still arriving from the worker comes through a spool, so a slow reader only
//! ever holds its own connection, never a slot. On a plain socket, with a body that needs no
//! framing, the slot may write the body to the socket itself while the connection waits for it
//! (`spool`'s pass-through): the bytes go from the worker's ring to the client without a copy
//! in between.

use bytes::{Bytes, BytesMut};
use http::header::{self, HeaderValue};
use http::{Method, StatusCode, Version};
use tracing::{debug, warn};

use super::conn::{Connection, End};
use super::static_files::Preconditions;
use super::stream::ClientStream;
use crate::queue::job::{Outcome, ResponseBody, Timing, WorkerResponse, WorkerSocket};
use headway_http1::body::BodyEncoder;
use headway_http1::fields::{self, strip_connection_fields};
use headway_http1::response::{body_encoder, plain_response, write_head, Persistence};

/// A piece of a streamed body at least this large is sent from where it is, not copied.
const LARGE_PIECE: usize = 64 * 1024;
/// Write out a streamed body once this much is gathered.
const GATHER_AT: usize = 1024 * 1024;

/// What was sent for one request.
pub(super) struct Sent {
    pub persistence: Persistence,
    pub status: StatusCode,
    pub body_bytes: u64,
    /// Queue and service time, when a worker answered.
    pub timing: Option<Timing>,
    /// The worker's end of the WebSocket the response opened (`101`).
    pub websocket: Option<WorkerSocket>,
}

impl<S: ClientStream> Connection<S> {
    /// Writes the outcome to the client.
    pub(super) async fn respond(
        &mut self,
        method: &Method,
        version: Version,
        outcome: Outcome,
        persistence: Persistence,
        preconditions: Option<&Preconditions>,
    ) -> Result<Sent, End> {
        match outcome {
            Outcome::Failed(failure) => {
                let retry_after = failure
                    .is_load_shed()
                    .then(|| (header::RETRY_AFTER, HeaderValue::from(self.front.queue.retry_after_secs())));
                let message = failure.message();
                let response = plain_response(version, failure.status(), message, retry_after.as_slice(), persistence);
                self.front.stats.response_sent(failure.status());
                self.write(&response).await?;
                let body_bytes = message.len() as u64 + 1;
                Ok(Sent { persistence, status: failure.status(), body_bytes, timing: None, websocket: None })
            }
            Outcome::Response(mut response) => {
                let statics = &self.front.settings.statics;
                let hand_off = preconditions.and_then(|given| statics.hand_off(&mut response.head, method, given));
                match hand_off {
                    Some(hand_off) => {
                        self.send_handed_off(method, version, hand_off, response.timing, persistence).await
                    }
                    None => self.relay(method, version, response, persistence).await,
                }
            }
            Outcome::Upgraded(upgraded) => self.switch_protocols(upgraded).await,
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
        let mut headers = head.headers;
        strip_connection_fields(&mut headers);
        self.front.stats.response_sent(status);
        // The worker's length, checked when its head was read; kept when it has one, and the
        // body is held to it.
        let declared =
            fields::content_length(headers.get_all(header::CONTENT_LENGTH).iter().map(|v| v.as_bytes())).ok().flatten();
        let known = match &body {
            ResponseBody::Complete(data) => Some(data.len() as u64),
            ResponseBody::Streaming(_) => None,
        };
        let mut encoder = body_encoder(method == Method::HEAD, status, version, declared, known);
        let mut out = BytesMut::with_capacity(512);
        let persistence = write_head(&mut out, version, status, &headers, &encoder, persistence);
        let sent = |body_bytes| Sent { persistence, status, body_bytes, timing: Some(timing), websocket: None };
        let mut body_bytes = 0;
        let mut reader = match body {
            ResponseBody::Complete(data) => {
                body_bytes += self.put_body(&mut encoder, &mut out, &data);
                return self.end_body(&encoder, out).await.map(|()| sent(body_bytes));
            }
            ResponseBody::Streaming(reader) => reader,
        };
        if let (Some(socket), Some(allowance)) = (self.io.socket(), encoder.unframed_allowance()) {
            match socket.try_clone_to_owned() {
                Ok(socket) => reader.pass_through(socket, allowance),
                Err(err) => debug!("the body goes through the spool: {err}"),
            }
        }
        // What is there now goes out in one write: framed pieces copied together, large ones
        // sent from where they are (a large download is copied once less, and written in fewer,
        // larger writes).
        let mut gathered = Gathered::new(out);
        loop {
            let piece = match reader.try_next() {
                Some(piece) => piece,
                None => {
                    self.write_gathered(&mut gathered).await?;
                    let next = self.watching_client(reader.next()).await?;
                    // What the slot wrote to the socket itself while we waited went out first.
                    let passed = reader.passed();
                    encoder.sent_unframed(passed);
                    body_bytes += passed;
                    next
                }
            };
            match piece {
                Some(Ok(data)) if data.len() >= LARGE_PIECE && !matches!(encoder, BodyEncoder::Chunked) => {
                    // What may be sent: none of it for HEAD, none past a Content-Length.
                    let admitted = self.admit(&mut encoder, &data).len();
                    body_bytes += admitted as u64;
                    if admitted > 0 {
                        gathered.push(data.slice(..admitted));
                    }
                }
                Some(Ok(data)) => body_bytes += self.put_body(&mut encoder, &mut gathered.tail, &data),
                None => {
                    self.write_gathered(&mut gathered).await?;
                    return self.end_body(&encoder, gathered.tail).await.map(|()| sent(body_bytes));
                }
                Some(Err(truncated)) => {
                    // Too late for a status: end the connection so the client sees a body
                    // cut short, not a complete one.
                    debug!("{truncated}");
                    let _ = self.write_gathered(&mut gathered).await;
                    return Err(End::Gone);
                }
            }
            if gathered.len() >= GATHER_AT {
                self.write_gathered(&mut gathered).await?;
            }
        }
    }

    /// Writes what is gathered, and empties it.
    async fn write_gathered(&mut self, gathered: &mut Gathered) -> Result<(), End> {
        gathered.seal_tail();
        if !gathered.pieces.is_empty() {
            self.write_pieces(&gathered.pieces).await?;
            gathered.pieces.clear();
        }
        Ok(())
    }

    /// Frames a piece of the body into `out`; returns how many body bytes went in.
    fn put_body(&self, encoder: &mut BodyEncoder, out: &mut BytesMut, data: &[u8]) -> u64 {
        let data = self.admit(encoder, data);
        encoder.put(out, data);
        data.len() as u64
    }

    /// The part of a piece of the body that may be sent (see [`BodyEncoder::admit`]).
    fn admit<'d>(&self, encoder: &mut BodyEncoder, data: &'d [u8]) -> &'d [u8] {
        let (data, broken) = encoder.admit(data);
        if let Some(broken) = broken {
            warn!("a worker's response: {broken}");
        }
        data
    }

    /// Writes what is left of the response with what ends its body. A body short of its length
    /// cannot be completed: the connection ends, so that the client sees it cut.
    async fn end_body(&mut self, encoder: &BodyEncoder, mut out: BytesMut) -> Result<(), End> {
        let (last, broken) = encoder.end();
        out.extend_from_slice(last);
        self.write(&out).await?;
        match broken {
            Some(broken) => {
                warn!("a worker's response: {broken}");
                Err(End::Gone)
            }
            None => Ok(()),
        }
    }
}

/// A streamed response's bytes waiting for the next write, in order: the large pieces as they
/// came, and what was framed or small, copied together, behind them in `tail`.
struct Gathered {
    pieces: Vec<Bytes>,
    tail: BytesMut,
}

impl Gathered {
    fn new(tail: BytesMut) -> Gathered {
        Gathered { pieces: Vec::new(), tail }
    }

    /// Adds a piece (not empty) after what is gathered.
    fn push(&mut self, piece: Bytes) {
        self.seal_tail();
        self.pieces.push(piece);
    }

    /// Ends the tail as a piece of its own, so that what comes next goes after it.
    fn seal_tail(&mut self) {
        if !self.tail.is_empty() {
            let framed = self.tail.split().freeze();
            self.pieces.push(framed);
        }
    }

    fn len(&self) -> usize {
        self.pieces.iter().map(Bytes::len).sum::<usize>() + self.tail.len()
    }
}
