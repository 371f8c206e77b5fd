//! HAProxy's agent check (`--agent-check ADDR`): how a fleet of headway instances keeps one
//! queue. HAProxy connects to this port every few seconds and reads one line: `ready
//! maxconn:<slots>` sets that server's `maxconn` to its slot count, so HAProxy sends an instance
//! no more requests than it can start at once and holds the rest in its backend queue until
//! some instance has a free slot; `drain` (while starting, reloading or shutting down) stops new
//! requests to it while those under way finish.
//!
//! The protocol (HAProxy's configuration manual, `agent-check`): the agent writes an ASCII line
//! of words and closes; whatever HAProxy sends first (`agent-send`) is ignored.

use std::sync::Arc;

use tokio::io::AsyncWriteExt as _;
use tracing::debug;

use crate::listener::{accept_until, Accepted, Listener};
use crate::ops::readiness::{Readiness, State};
use crate::queue::Queue;

/// Answers agent checks on `listener` until the task is dropped.
/// `queue` knows the workers' slots once they have started (the check says drain before).
pub async fn serve(listener: Listener, readiness: Arc<Readiness>, queue: Arc<Queue>) {
    accept_until(&listener, std::future::pending(), |accepted| {
        let Accepted::Tcp(mut stream, _) = accepted else { return };
        let line = reply(readiness.state(), queue.slots());
        tokio::spawn(async move {
            if let Err(err) = stream.write_all(line.as_bytes()).await.and(stream.shutdown().await) {
                debug!("agent check: {err}");
            }
        });
    })
    .await;
}

/// The line for HAProxy in `state`.
fn reply(state: State, slots: usize) -> String {
    match state {
        State::Serving => format!("ready maxconn:{slots}\n"),
        State::Booting | State::Reloading | State::ShuttingDown => "drain\n".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_with_the_slots_else_drain() {
        assert_eq!(reply(State::Serving, 6), "ready maxconn:6\n");
        for state in [State::Booting, State::Reloading, State::ShuttingDown] {
            assert_eq!(reply(state, 6), "drain\n");
        }
    }
}
