//! `--websocket-*`, `--max-websockets` and `--max-websocket-*`: how the front treats WebSockets.

use std::sync::Arc;
use std::time::Duration;

use crate::byte_budget::ByteBudget;
use crate::workers::launch::TakesWebSockets;

/// How the front treats WebSockets.
#[derive(Debug, Clone)]
pub struct WebSocketSettings {
    /// Whether the workers take WebSocket handshakes; if not, a handshake is a plain request.
    pub workers_take_them: TakesWebSockets,
    /// WebSockets open or in their handshake at once; a handshake beyond gets 503.
    pub max_open: usize,
    /// A socket with no bytes moving either way this long is closed (1001).
    pub idle_timeout: Duration,
    /// While nothing moves, the client is pinged this often (`None`: never).
    pub ping_interval: Option<Duration>,
    /// Largest message a client may send (its frames together); closed with 1009 above it.
    pub max_message: u64,
    /// `--max-websocket-held`: what every socket's unfinished fragmented message may hold,
    /// together; a socket whose message would take more is closed with 1013.
    pub held: Arc<ByteBudget>,
}
