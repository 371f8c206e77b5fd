//! The front: owns the listening sockets and every client connection.
//!
//! It accepts connections, runs one task per connection (see [`conn`]), and puts each
//! complete request in the one queue. It holds no worker state: everything it knows about
//! serving a request is "push, then wait for the outcome".

mod conn;
pub mod forward;
pub mod forwarded;
mod health;
pub mod listener;
mod proxy_protocol;
mod read;
mod relay;
mod upgrade;
pub mod websocket;

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::access_log::AccessLog;
use crate::http1::request::Limits;
use crate::queue::Queue;
use crate::readiness::Readiness;
use crate::stats::Stats;
use conn::Connection;
use forwarded::{Peer, TrustedProxies};
use listener::{accept_until, Accepted, Listener};
use websocket::WebSocketSettings;

/// How the front treats clients.
#[derive(Debug, Clone)]
pub struct FrontSettings {
    pub limits: Limits,
    /// Time allowed to send a complete request head (from accept for the first request).
    pub header_timeout: Duration,
    /// How long an idle keep-alive connection is kept.
    pub keep_alive_timeout: Duration,
    pub keep_alive: bool,
    /// Requests served on one connection before it is closed; 0 for no limit.
    pub max_requests_per_connection: u64,
    /// How long a client may stall while sending a body or receiving a response.
    pub io_timeout: Duration,
    /// Request body bytes held in memory per request; the rest goes to a temporary file.
    pub request_buffer: usize,
    /// Peers whose forwarding headers are believed (`--forwarded-allow-ips`).
    pub trusted_proxies: TrustedProxies,
    /// TCP connections open with a PROXY protocol header (`--proxy-protocol`).
    pub proxy_protocol: bool,
    /// A path the front answers itself from the readiness (`--health-path`).
    pub health_path: Option<String>,
    pub websocket: WebSocketSettings,
}

/// What every connection task shares.
pub struct Front {
    pub settings: FrontSettings,
    pub queue: Arc<Queue>,
    pub stats: Arc<Stats>,
    pub access_log: Option<Arc<AccessLog>>,
    pub readiness: Arc<Readiness>,
    /// Becomes true when the server starts shutting down: idle connections close, busy ones
    /// close after their current response.
    pub shutdown: watch::Receiver<bool>,
}

impl Front {
    /// Accepts connections until shutdown starts, and those already waiting in the kernel's
    /// backlog then; then drops the listener (so new connections are refused by the kernel)
    /// and returns.
    pub async fn accept_loop(self: Arc<Self>, listener: Listener) {
        let mut shutdown = self.shutdown.clone();
        let stopping = async move {
            let _ = shutdown.wait_for(|stopping| *stopping).await;
        };
        accept_until(&listener, stopping, |accepted| match accepted {
            Accepted::Tcp(stream, peer) => {
                let peer = Peer::tcp(peer.ip(), &self.settings.trusted_proxies);
                let proxy_header = self.settings.proxy_protocol;
                tokio::spawn(Connection::new(stream, peer, self.clone()).serve(proxy_header));
            }
            Accepted::Unix(stream) => {
                tokio::spawn(Connection::new(stream, Peer::local(), self.clone()).serve(false));
            }
        })
        .await;
    }
}

#[cfg(test)]
mod tests;
