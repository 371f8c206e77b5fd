//! A slot's part in a WebSocket handshake: the upgrade request goes to the worker on a
//! connection opened for it alone, and once the worker answers `101` that connection, not the
//! slot's, becomes the socket.
//!
//! The slot's own link (a keep-alive connection, or the hop's rings) never carries a WebSocket,
//! whatever the worker: the slot is free again as soon as the worker has answered, and an open
//! socket costs its worker a connection, never a slot. The bundled worker listens on its socket
//! for these handshakes too. Any other answer is relayed as an ordinary response.

use std::path::Path;
use std::sync::atomic::Ordering;

use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::net::UnixStream;
use tokio::time::Instant;
use tracing::{debug, warn};

use super::Slot;
use crate::http1::websocket::is_accepted;
use crate::job::{Failure, Job, Outcome, RequestBody, Timing, Upgraded, WorkerSocket};
use crate::tally::Hold;

/// Why a handshake got no usable answer from the worker.
#[derive(Debug, thiserror::Error)]
enum HandshakeError {
    #[error("cannot connect to the worker for a WebSocket: {0}")]
    Connect(std::io::Error),
    #[error("{0}")]
    Http(#[from] hyper::Error),
    #[error("the worker answered 101 without switching to websocket")]
    NotWebSocket,
}

impl Slot {
    /// Carries a WebSocket handshake to the worker and its answer back.
    pub(super) async fn handshake(&self, job: Job) {
        let Job { request, reply, complete_at, .. } = job;
        if reply.is_closed() {
            return; // the client left between dispatch and now
        }
        let started = Instant::now();
        let timeout = self.settings.request_timeout;
        let mut response = match tokio::time::timeout(timeout, send(&self.worker.socket, request)).await {
            Ok(Ok(response)) => response,
            Ok(Err(err)) => {
                warn!(worker = self.worker.index, "WebSocket handshake failed: {err}");
                let _ = reply.send(Outcome::Failed(Failure::WorkerFailed));
                return;
            }
            Err(_) => {
                warn!(worker = self.worker.index, "no handshake answer within {timeout:?}; replacing the worker");
                let _ = reply.send(Outcome::Failed(Failure::WorkerTimeout));
                self.worker.report_hung();
                return;
            }
        };
        self.worker.served.fetch_add(1, Ordering::Relaxed);
        let timing = Timing {
            queued: started.saturating_duration_since(complete_at),
            service: started.elapsed(),
            worker: self.worker.index,
        };
        let upgrade = hyper::upgrade::on(&mut response);
        let (head, body) = response.into_parts();
        if head.status != http::StatusCode::SWITCHING_PROTOCOLS {
            // Refused by the app (403, 404, ...): an ordinary response on a connection that ends
            // with it.
            self.deliver(reply, head, body, timing, None).await;
            return;
        }
        let opened = if is_accepted(&head) {
            upgrade.await.map_err(HandshakeError::from)
        } else {
            Err(HandshakeError::NotWebSocket)
        };
        match opened {
            Ok(upgraded) => {
                let socket = WorkerSocket {
                    io: Box::new(TokioIo::new(upgraded)),
                    closing: self.worker.watch_websockets_closing(),
                    held: Hold::new(self.worker.websockets.clone()),
                };
                // A client gone meanwhile drops the socket with the outcome, closing it.
                let _ = reply.send(Outcome::Upgraded(Upgraded { head, socket, timing }));
            }
            Err(err) => {
                warn!(worker = self.worker.index, "WebSocket handshake failed: {err}");
                let _ = reply.send(Outcome::Failed(Failure::WorkerFailed));
            }
        }
    }
}

/// Sends the handshake on a new connection and waits for the answer's head.
async fn send(socket: &Path, request: http::Request<RequestBody>) -> Result<http::Response<Incoming>, HandshakeError> {
    let stream = UnixStream::connect(socket).await.map_err(HandshakeError::Connect)?;
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    // Driven until the answer is complete, or until the connection is handed over after 101.
    tokio::spawn(async move {
        if let Err(err) = connection.with_upgrades().await {
            debug!("WebSocket handshake connection ended: {err}");
        }
    });
    Ok(sender.send_request(request).await?)
}
