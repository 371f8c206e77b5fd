//! A slot's part in a WebSocket handshake: the upgrade request goes to the worker on a
//! connection opened for it alone, and once the worker answers `101` that connection, not the
//! slot's, becomes the socket.
//!
//! The slot's own link (a keep-alive connection, or the hop's rings) never carries a WebSocket,
//! whatever the worker: the slot is free again as soon as the worker has answered, and an open
//! socket costs its worker a connection, never a slot. The bundled worker listens on its socket
//! for these handshakes too. Any other answer is relayed as an ordinary response.

use tracing::warn;

use super::connection::{Connection, HttpBody};
use crate::queue::job::{Failure, RequestBody, WorkerSocket};
use crate::read_ahead::ReadAhead;
use crate::tally::Hold;
use crate::workers::worker::Worker;
use headway_http1::upgrade::{agrees_deflate, is_accepted};

/// Opens the connection a handshake goes to `worker` on.
pub(super) async fn connect(worker: &Worker) -> Result<Connection, Failure> {
    Connection::open(&worker.socket).await.map_err(|err| {
        warn!(worker = worker.index, "cannot connect to the worker for a WebSocket: {err}");
        Failure::WorkerFailed
    })
}

/// Asks the worker on `connection` to upgrade `request`, within `timeout`: its answer, whatever
/// the status.
pub(super) async fn ask<'a>(
    connection: &'a mut Connection,
    request: http::Request<RequestBody>,
    worker: &Worker,
    timeout: std::time::Duration,
) -> Result<(http::response::Parts, HttpBody<'a>), Failure> {
    match tokio::time::timeout(timeout, connection.ask_upgrade(request)).await {
        Ok(Ok(answer)) => Ok(answer),
        Ok(Err(err)) => {
            warn!(worker = worker.index, "WebSocket handshake failed: {err}");
            Err(Failure::WorkerFailed)
        }
        Err(_) => {
            warn!(worker = worker.index, "no handshake answer within {timeout:?}; replacing the worker");
            Err(Failure::WorkerTimeout)
        }
    }
}

/// The socket a `101` on `connection` opened, or a failure if the 101 does not switch to
/// WebSocket. What the worker sent after its 101 is the socket's first bytes.
pub(super) fn socket(
    worker: &Worker,
    head: &http::response::Parts,
    connection: Connection,
) -> Result<WorkerSocket, Failure> {
    if !is_accepted(head.status, &head.headers) {
        warn!(worker = worker.index, "WebSocket handshake failed: a 101 that does not switch to websocket");
        return Err(Failure::WorkerFailed);
    }
    let (stream, ahead) = connection.into_upgraded();
    Ok(WorkerSocket {
        io: Box::new(ReadAhead::new(stream, ahead)),
        compressed: agrees_deflate(&head.headers),
        closing: worker.watch_websockets_closing(),
        held: Hold::new(worker.websockets.clone()),
    })
}
