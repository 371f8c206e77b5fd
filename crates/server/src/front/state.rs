//! What the front runs with: [`FrontSettings`], how it treats clients (from the flags), and
//! [`Front`], what every connection task shares (those settings, the queue, the stats, the
//! shutdown signal). A module of their own below the front's, as every stage of a connection
//! reads them.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use super::forwarding_fields::TrustedProxies;
use super::h2::Http2Settings;
use super::static_files::StaticSettings;
use super::tls::Tls;
use super::websocket::WebSocketSettings;
use crate::ops::access_log::AccessLog;
use crate::ops::readiness::Readiness;
use crate::ops::stats::Stats;
use crate::queue::Queue;
use crate::spool::SpoolLimits;
use headway_http1::request::Limits;

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
    /// Where a request body waits: `--request-buffer` bytes in memory, the rest in a temporary
    /// file within the disk budget.
    pub request_spool: SpoolLimits,
    /// Peers whose forwarding headers are believed (`--forwarded-allow-ips`).
    pub trusted_proxies: TrustedProxies,
    /// TCP connections open with a PROXY protocol header (`--proxy-protocol`).
    pub proxy_protocol: bool,
    /// A path the front answers itself from the readiness (`--health-path`).
    pub health_path: Option<String>,
    pub websocket: WebSocketSettings,
    /// HTTP/2's settings; `None` with `--no-http2`: every connection speaks HTTP/1.1.
    pub http2: Option<Http2Settings>,
    /// Files the front serves itself (`--static`), and those workers may hand it.
    pub statics: StaticSettings,
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
    /// `--certfile`: every connection speaks TLS.
    pub tls: Option<Arc<Tls>>,
}
