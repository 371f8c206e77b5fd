//! One HTTP/2 stream: a request of the one queue exactly as an HTTP/1.1 request is.
//!
//! Its body is read whole first, into the same sink ([`crate::front::body`]), under the
//! stream's flow-control window, so a slow upload holds no slot; then the same worker request is
//! made of it ([`crate::front::worker_request`]) and queued, and the stream waits for its outcome while
//! watching for the client's RST_STREAM: a reset (or the connection's end) drops the [`Wait`],
//! which withdraws a request that has not started. The answer goes back under the client's
//! flow control, a window at a time, from the spool the slot filled, so a slow reader never holds
//! a slot either. Fields that belong to one HTTP/1.1 hop (`Connection`, `Keep-Alive`,
//! `Transfer-Encoding`, `Upgrade`, ...) are stripped: HTTP/2 forbids them.

use std::future::poll_fn;
use std::sync::Arc;
use std::task::Poll;

use bytes::Bytes;
use h2::server::SendResponse;
use h2::{Reason, RecvStream, SendStream};
use http::header::{self, HeaderMap, HeaderValue};
use http::{Method, StatusCode, Version};
use tokio::time::timeout;
use tracing::{debug, warn};

use super::request::Head;
use super::shared::Shared;
use crate::front::body::BodySink;
use crate::front::static_files::accel::HandOff;
use crate::front::static_files::{FileResponse, Preconditions, StaticAnswer, STATIC_LANE};
use crate::front::worker_request::{settle_target, worker_request};
use crate::ops::access_log::RequestFields;
use crate::queue::job::{Outcome, RequestBody, ResponseBody, Timing, WorkerResponse};
use crate::queue::Wait;
use headway_http1::fields::{self, strip_connection_fields};
use headway_http1::response::{self, with_http_date};
use headway_http1::HttpError;

/// Why a stream ended without its whole response.
enum End {
    /// A request the front refuses: answer with this status.
    Refuse(HttpError),
    /// The client reset the stream, or the connection ended, or the client stopped reading.
    Gone,
}

impl From<h2::Error> for End {
    fn from(err: h2::Error) -> Self {
        debug!("HTTP/2 stream ended: {err}");
        End::Gone
    }
}

/// What was sent, for the access log.
struct Sent {
    status: StatusCode,
    body_bytes: u64,
    timing: Option<Timing>,
}

/// Serves one stream to its end, and counts how it ended for the connection's reset bound.
pub(super) async fn serve(shared: Arc<Shared>, request: http::Request<RecvStream>, respond: SendResponse<Bytes>) {
    let mut stream = Stream { shared, respond };
    let (parts, body) = request.into_parts();
    let ended = match stream.run(parts, body).await {
        Err(End::Refuse(error)) => stream.refuse(&error).await,
        ended => ended.map(drop),
    };
    match ended {
        Ok(()) => stream.shared.count_complete(),
        Err(_) => stream.shared.count_cancelled(),
    }
}

struct Stream {
    shared: Arc<Shared>,
    respond: SendResponse<Bytes>,
}

impl Stream {
    async fn run(&mut self, parts: http::request::Parts, body: RecvStream) -> Result<(), End> {
        let front = self.shared.front.clone();
        let mut head = Head::of(parts).map_err(End::Refuse)?;
        let uri = settle_target(&mut head.target).map_err(End::Refuse)?;
        if let Some((status, message)) = front.health_probe(&head.method, &head.target) {
            front.stats.response_sent(status);
            let body = (head.method != Method::HEAD).then_some(message);
            return self.send_plain(status, body, &[]).await.map(drop);
        }
        if let Some(answer) = front.settings.statics.answer(&head.method, &head.target, &head.headers) {
            let (status, body_bytes) = match answer {
                StaticAnswer::File(response) => (response.status, self.send_file_response(response).await?),
                StaticAnswer::NotFound => (StatusCode::NOT_FOUND, self.send_not_found(&head.method).await?),
            };
            front.stats.static_sent(status, body_bytes);
            if let Some(log) = &front.access_log {
                let mut logged = RequestFields::new(&head.method, &head.target, Version::HTTP_2, &head.headers);
                logged.took_lane(Some(STATIC_LANE.into()));
                log.log(&logged.entry(self.shared.peer.ip, status, body_bytes, None));
            }
            return Ok(());
        }
        let declared = content_length(&head.headers);
        if declared.is_some_and(|len| len > front.settings.limits.max_body) {
            return Err(End::Refuse(HttpError::new(StatusCode::PAYLOAD_TOO_LARGE, "request body too large")));
        }
        if expects_continue(&head.headers) && !body.is_end_stream() {
            let continue_ = http::Response::builder().status(StatusCode::CONTINUE).body(()).expect("a valid head");
            self.respond.send_informational(continue_)?;
        }
        let body = self.read_body(body).await?;
        if self.is_reset() {
            return Err(End::Gone); // reset while its body arrived: it never queues
        }
        let mut logged = front
            .access_log
            .is_some()
            .then(|| RequestFields::new(&head.method, &head.target, Version::HTTP_2, &head.headers));
        let Head { method, mut headers, .. } = head;
        // A worker may hand the response's file to the front: what makes it conditional or
        // partial is kept for then.
        let statics = &front.settings.statics;
        let preconditions = statics.takes_hand_offs().then(|| {
            statics.mark_request(&mut headers);
            Preconditions::of(&headers)
        });
        let trusted = &front.settings.trusted_proxies;
        let peer = &self.shared.peer;
        let (request, client) = worker_request(method.clone(), uri, Version::HTTP_2, headers, body, peer, trusted);
        let wait = front.queue.enqueue(request, client);
        if let Some(fields) = logged.as_mut() {
            fields.took_lane(wait.lane());
        }
        let outcome = self.wait(wait).await?;
        let sent = self.respond_with(&method, outcome, preconditions.as_ref()).await?;
        if let (Some(log), Some(logged)) = (&front.access_log, logged) {
            log.log(&logged.entry(self.shared.peer.ip, sent.status, sent.body_bytes, sent.timing));
        }
        Ok(())
    }

    /// Reads the whole body into the sink, releasing the window as it goes, so the client may
    /// send the next piece while the earlier ones are spooled.
    async fn read_body(&mut self, mut body: RecvStream) -> Result<RequestBody, End> {
        let settings = &self.shared.front.settings;
        let mut sink = BodySink::new(&settings.request_spool);
        while !body.is_end_stream() {
            let piece = match timeout(settings.io_timeout, body.data()).await {
                Ok(Some(piece)) => piece?,
                Ok(None) => break,
                Err(_) => {
                    return Err(End::Refuse(HttpError::new(
                        StatusCode::REQUEST_TIMEOUT,
                        "request body not received in time",
                    )))
                }
            };
            let _ = body.flow_control().release_capacity(piece.len());
            sink.push(piece).map_err(End::Refuse)?;
            if sink.len() > settings.limits.max_body {
                return Err(End::Refuse(HttpError::new(StatusCode::PAYLOAD_TOO_LARGE, "request body too large")));
            }
        }
        Ok(sink.finish())
    }

    /// Waits for the request's outcome; the client's RST_STREAM (or the connection's end) drops
    /// the wait, which withdraws the request if no slot has started it.
    async fn wait(&mut self, mut wait: Wait) -> Result<Outcome, End> {
        let respond = &mut self.respond;
        tokio::select! {
            biased;
            outcome = wait.outcome() => Ok(outcome),
            _ = poll_fn(|cx| respond.poll_reset(cx)) => Err(End::Gone),
        }
    }

    /// Whether the client has reset the stream already.
    fn is_reset(&mut self) -> bool {
        let respond = &mut self.respond;
        let waker = std::task::Waker::noop();
        matches!(respond.poll_reset(&mut std::task::Context::from_waker(waker)), Poll::Ready(_))
    }

    async fn respond_with(
        &mut self,
        method: &Method,
        outcome: Outcome,
        preconditions: Option<&Preconditions>,
    ) -> Result<Sent, End> {
        let front = self.shared.front.clone();
        let mut response = match outcome {
            Outcome::Response(response) => response,
            Outcome::Failed(failure) => {
                let retry_after = failure
                    .is_load_shed()
                    .then(|| (header::RETRY_AFTER, HeaderValue::from(front.queue.retry_after_secs())));
                front.stats.response_sent(failure.status());
                let body_bytes =
                    self.send_plain(failure.status(), Some(failure.message()), retry_after.as_slice()).await?;
                return Ok(Sent { status: failure.status(), body_bytes, timing: None });
            }
            // Only a request marked as a WebSocket handshake is carried as one, and no HTTP/2
            // stream is: a worker's 101 here could only be a worker error.
            Outcome::Upgraded(upgraded) => {
                let status = StatusCode::BAD_GATEWAY;
                front.stats.response_sent(status);
                let body_bytes =
                    self.send_plain(status, Some("the worker switched protocols on an HTTP/2 stream"), &[]).await?;
                return Ok(Sent { status, body_bytes, timing: Some(upgraded.timing) });
            }
        };
        let statics = &front.settings.statics;
        if let Some(hand_off) = preconditions.and_then(|given| statics.hand_off(&mut response.head, method, given)) {
            hand_off.count(&front.stats);
            let (status, body_bytes) = match hand_off {
                HandOff::File(file) => {
                    front.stats.response_sent(file.status);
                    (file.status, self.send_file_response(file).await?)
                }
                failed => {
                    let status = failed.failure_status();
                    warn!("a worker's response: {}", failed.reason());
                    front.stats.response_sent(status);
                    let message = status.canonical_reason().filter(|_| *method != Method::HEAD);
                    (status, self.send_plain(status, message, &[]).await?)
                }
            };
            return Ok(Sent { status, body_bytes, timing: Some(response.timing) });
        }
        let WorkerResponse { head, body, timing } = response;
        let mut headers = head.headers;
        strip_connection_fields(&mut headers);
        let status = head.status;
        front.stats.response_sent(status);
        let sent = |body_bytes| Sent { status, body_bytes, timing: Some(timing) };
        if !response::has_body(method == http::Method::HEAD, status) {
            self.send_head(status, headers, true)?;
            return Ok(sent(0));
        }
        match body {
            ResponseBody::Complete(data) => {
                if !headers.contains_key(header::CONTENT_LENGTH) {
                    headers.insert(header::CONTENT_LENGTH, HeaderValue::from(data.len()));
                }
                let len = data.len() as u64;
                let mut out = self.send_head(status, headers, data.is_empty())?;
                if !data.is_empty() {
                    self.send_body(&mut out, data, true).await?;
                }
                Ok(sent(len))
            }
            ResponseBody::Streaming(mut reader) => {
                let mut out = self.send_head(status, headers, false)?;
                let mut body_bytes = 0;
                loop {
                    match reader.next().await {
                        Some(Ok(data)) => {
                            body_bytes += data.len() as u64;
                            self.send_body(&mut out, data, false).await?;
                        }
                        None => {
                            out.send_data(Bytes::new(), true)?;
                            return Ok(sent(body_bytes));
                        }
                        Some(Err(truncated)) => {
                            // Too late for a status: the client sees the stream reset, not a
                            // complete body.
                            debug!("{truncated}");
                            out.send_reset(Reason::INTERNAL_ERROR);
                            return Err(End::Gone);
                        }
                    }
                }
            }
        }
    }

    fn send_head(&mut self, status: StatusCode, headers: HeaderMap, end: bool) -> Result<SendStream<Bytes>, End> {
        let mut response = http::Response::new(());
        *response.status_mut() = status;
        *response.headers_mut() = headers;
        if !response.headers().contains_key(header::DATE) {
            with_http_date(|date| {
                response
                    .headers_mut()
                    .insert(header::DATE, HeaderValue::from_str(date).expect("a date is a valid value"));
            });
        }
        Ok(self.respond.send_response(response, end)?)
    }

    /// Sends `data` as the client's window allows, a piece at a time; a client that opens no
    /// window for the I/O timeout is gone.
    async fn send_body(&mut self, out: &mut SendStream<Bytes>, mut data: Bytes, end: bool) -> Result<(), End> {
        let io_timeout = self.shared.front.settings.io_timeout;
        while !data.is_empty() {
            out.reserve_capacity(data.len());
            let granted = match timeout(io_timeout, poll_fn(|cx| out.poll_capacity(cx))).await {
                Ok(Some(granted)) => granted?,
                Ok(None) | Err(_) => return Err(End::Gone),
            };
            let piece = data.split_to(granted.min(data.len()));
            out.send_data(piece, end && data.is_empty())?;
        }
        Ok(())
    }

    /// Sends a file response, its bytes a piece at a time as the client's window opens: a slow
    /// reader holds one piece of memory. Returns the body's length.
    async fn send_file_response(&mut self, response: FileResponse) -> Result<u64, End> {
        let FileResponse { status, headers, body } = response;
        let Some(mut body) = body else {
            self.send_head(status, headers, true)?;
            return Ok(0);
        };
        let len = body.len();
        let mut out = self.send_head(status, headers, false)?;
        let mut done = 0;
        while done < len {
            let piece = match body.next_piece() {
                Ok(Some(piece)) => piece,
                _ => {
                    // Shrunk or unreadable since it was opened: the client sees the stream reset.
                    debug!("a static file could not be read to its end");
                    out.send_reset(Reason::INTERNAL_ERROR);
                    return Err(End::Gone);
                }
            };
            done += piece.len() as u64;
            self.send_body(&mut out, piece, done == len).await?;
        }
        Ok(len)
    }

    /// `404` for a mount's request the front refuses or does not have.
    async fn send_not_found(&mut self, method: &Method) -> Result<u64, End> {
        let message = (*method != Method::HEAD).then_some("Not Found");
        self.send_plain(StatusCode::NOT_FOUND, message, &[]).await
    }

    /// A response the front makes itself: one line of plain text (none for HEAD), with `extra`
    /// fields. Returns the body's length.
    async fn send_plain(
        &mut self,
        status: StatusCode,
        message: Option<&str>,
        extra: &[(header::HeaderName, HeaderValue)],
    ) -> Result<u64, End> {
        let body = message.map(|message| Bytes::from(format!("{message}\n")));
        let mut headers = HeaderMap::with_capacity(3 + extra.len());
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
        headers.insert(header::CONTENT_LENGTH, HeaderValue::from(body.as_ref().map_or(0, Bytes::len)));
        for (name, value) in extra {
            headers.insert(name.clone(), value.clone());
        }
        let mut out = self.send_head(status, headers, body.is_none())?;
        let Some(body) = body else { return Ok(0) };
        let len = body.len() as u64;
        self.send_body(&mut out, body, true).await?;
        Ok(len)
    }

    /// Answers a request the front refuses. A body the client is still sending is not wanted:
    /// once the stream's handles are dropped after the response, `h2` tells the client so with
    /// RST_STREAM `NO_ERROR` (RFC 9113 section 8.1), after the response's frames.
    async fn refuse(&mut self, error: &HttpError) -> Result<(), End> {
        self.shared.front.stats.response_sent(error.status);
        self.send_plain(error.status, Some(error.reason), &[]).await?;
        Ok(())
    }
}

/// The `content-length` the client gave, by the one rule every path of headway reads it with (the
/// `h2` crate has checked it too, and will check the DATA frames against it).
fn content_length(headers: &HeaderMap) -> Option<u64> {
    fields::content_length(headers.get_all(header::CONTENT_LENGTH).iter().map(HeaderValue::as_bytes)).ok().flatten()
}

fn expects_continue(headers: &HeaderMap) -> bool {
    headers.get(header::EXPECT).is_some_and(|value| value.as_bytes().eq_ignore_ascii_case(b"100-continue"))
}
