//! Writing a request's outcome to its client: a failure as a plain response, or a worker's
//! response re-framed for this client (its own `Content-Length`, chunked or close-delimited
//! body, persistence).
//!
//! A response body still arriving from the worker comes through a spool, so a slow reader only
//! ever holds its own connection, never a slot.

use bytes::BytesMut;
use http::header::{self, HeaderValue};
use http::{Method, StatusCode, Version};
use tracing::debug;

use super::conn::{Connection, End};
use super::stream::ClientStream;
use crate::http1::response::{plain_response, put_chunk, write_head, Persistence, LAST_CHUNK};
use crate::http1::{response_has_body, strip_hop_by_hop};
use crate::job::{Outcome, ResponseBody, Timing, WorkerResponse, WorkerSocket};

/// Write out a streamed body once this much is gathered.
const FLUSH_AT: usize = 64 * 1024;

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
            Outcome::Response(response) => self.relay(method, version, response, persistence).await,
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
        let sent =
            |persistence, body_bytes| Sent { persistence, status, body_bytes, timing: Some(timing), websocket: None };
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
}
