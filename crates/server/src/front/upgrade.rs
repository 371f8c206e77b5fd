//! A client's WebSocket handshake on its way through the front: judged and admitted here (within
//! `--max-websockets`), queued like any request, carried to the worker by a slot on a connection
//! of its own (`slot::upgrade`), and answered `101`, after which the connection leaves HTTP for
//! [`super::websocket`]. A worker's other answers are relayed like any response.

use http::StatusCode;

use super::conn::{Connection, End};
use super::relay::Sent;
use super::stream::ClientStream;
use crate::job::{RequestBody, Upgraded, WebSocketHandshake};
use crate::ops::stats::Gauge;
use headway_http1::request::RequestHead;
use headway_http1::response::Persistence;
use headway_http1::upgrade::{ask_upgrade, is_handshake, switching_protocols};
use headway_http1::HttpError;

impl<S: ClientStream> Connection<S> {
    /// For a WebSocket handshake, its place among the open WebSockets; `None` for any other
    /// request (and for every request when the workers take no WebSockets). A refused
    /// handshake ends the connection with its status.
    pub(super) fn admit_websocket(&self, head: &RequestHead) -> Result<Option<Gauge>, End> {
        let settings = &self.front.settings.websocket;
        let refuse = |error| End::Refuse(error, head.version);
        if !settings.workers_take_them.get() || !is_handshake(head).map_err(refuse)? {
            return Ok(None);
        }
        match self.front.stats.admit_websocket(settings.max_open) {
            Some(admitted) => Ok(Some(admitted)),
            None => Err(refuse(HttpError::new(StatusCode::SERVICE_UNAVAILABLE, "too many open WebSockets"))),
        }
    }

    /// Sends the client the worker's `101`; the connection then carries the socket.
    pub(super) async fn switch_protocols(&mut self, upgraded: Upgraded) -> Result<Sent, End> {
        let Upgraded { head, socket, timing } = upgraded;
        self.front.stats.response_sent(StatusCode::SWITCHING_PROTOCOLS);
        self.write(&switching_protocols(head.headers)).await?;
        Ok(Sent {
            persistence: Persistence::Close,
            status: StatusCode::SWITCHING_PROTOCOLS,
            body_bytes: 0,
            timing: Some(timing),
            websocket: Some(socket),
        })
    }
}

/// Makes the worker request of an admitted handshake ask for the upgrade, and marks it for the
/// slot, which opens a connection of its own for it.
pub(super) fn ask_worker_to_upgrade(request: &mut http::Request<RequestBody>) {
    ask_upgrade(request.headers_mut());
    request.extensions_mut().insert(WebSocketHandshake);
}
