//! A slot's part in a WebSocket handshake: the upgrade request goes to the worker on a
//! connection opened for it alone, and once the worker answers `101` that connection, not the
//! slot's, becomes the socket.
//!
//! The slot's own link (a keep-alive connection, or the hop's rings) never carries a WebSocket,
//! whatever the worker: the slot is free again as soon as the worker has answered, and an open
//! socket costs its worker a connection, never a slot. The bundled worker listens on its socket
//! for these handshakes too. Any other answer is relayed as an ordinary response.

use std::sync::atomic::Ordering;

use tokio::time::Instant;
use tracing::warn;

use super::connection::Connection;
use super::{LinkError, Slot};
use crate::queue::job::{Failure, Job, Outcome, Timing, Upgraded, WorkerSocket};
use crate::read_ahead::ReadAhead;
use crate::tally::Hold;
use headway_http1::upgrade::{agrees_deflate, is_accepted};

impl Slot {
    /// Carries a WebSocket handshake to the worker and its answer back.
    pub(super) async fn handshake(&self, job: Job) {
        let Job { request, reply, complete_at, .. } = job;
        if reply.is_closed() {
            return; // the client left between dispatch and now
        }
        let started = Instant::now();
        let timeout = self.settings.request_timeout;
        let mut connection = match Connection::open(&self.worker.socket).await {
            Ok(connection) => connection,
            Err(err) => {
                warn!(worker = self.worker.index, "cannot connect to the worker for a WebSocket: {err}");
                let _ = reply.send(Outcome::Failed(Failure::WorkerFailed));
                return;
            }
        };
        let (head, body) = match tokio::time::timeout(timeout, connection.ask_upgrade(request)).await {
            Ok(Ok(answer)) => answer,
            Ok(Err(err)) => {
                warn!(worker = self.worker.index, "WebSocket handshake failed: {err}");
                let _ = reply.send(Outcome::Failed(Failure::WorkerFailed));
                return;
            }
            Err(_) => {
                warn!(worker = self.worker.index, "no handshake answer within {timeout:?}; replacing the worker");
                let _ = reply.send(Outcome::Failed(Failure::WorkerTimeout));
                self.report_hung();
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
        if !is_accepted(head.status, &head.headers) {
            let err =
                LinkError::Response(headway_http1::HttpError::bad_response("a 101 that does not switch to websocket"));
            warn!(worker = self.worker.index, "WebSocket handshake failed: {err}");
            let _ = reply.send(Outcome::Failed(Failure::WorkerFailed));
            return;
        }
        // What the worker sent after its 101 is the socket's first bytes.
        let (stream, ahead) = connection.into_upgraded();
        let socket = WorkerSocket {
            io: Box::new(ReadAhead::new(stream, ahead)),
            compressed: agrees_deflate(&head.headers),
            closing: self.worker.watch_websockets_closing(),
            held: Hold::new(self.worker.websockets.clone()),
        };
        // A client gone meanwhile drops the socket with the outcome, closing it.
        let _ = reply.send(Outcome::Upgraded(Upgraded { head, socket, timing }));
    }
}
