//! Closing workers' WebSockets: how long the supervisor waits for those open to a process to go
//! ([`WEBSOCKETS_CLOSE_TIME`]), and closing every worker's at once ([`close_websockets`]).

use std::sync::Arc;
use std::time::Duration;

use crate::workers::worker::Worker;

/// How long to wait for a worker's WebSockets to close. The front closes one within two seconds
/// (`front::websocket`); the rest is margin.
pub(super) const WEBSOCKETS_CLOSE_TIME: Duration = Duration::from_secs(3);

/// Has the WebSockets open to `workers` closed, and waits until they are gone (a few seconds at
/// most).
pub(super) async fn close_websockets(workers: &[Arc<Worker>]) {
    workers.iter().for_each(|worker| worker.close_websockets());
    let _ = tokio::time::timeout(WEBSOCKETS_CLOSE_TIME, async {
        for worker in workers {
            worker.websockets.zero().await;
        }
    })
    .await;
}
