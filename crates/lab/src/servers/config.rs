//! What a server is started with: W x T and what headway needs beyond it.

use serde::Serialize;

/// W x T and what headway needs beyond it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ServerConfig {
    pub workers: usize,
    /// headway's `-w MIN:MAX`: the most workers, `workers` being the fewest, when it adapts W.
    pub workers_max: Option<usize>,
    pub threads: usize,
    /// headway's --queue-timeout (seconds), when the scenario sets one.
    pub queue_timeout: Option<f64>,
    /// The WSGI app (module:callable) that headway, gunicorn and granian serve instead of the demo
    /// app: the app under `recommend`; [`crate::twins::FLASK_APP`] for `throughput`, which falls back to the demo
    /// app where Flask is not installed. The other servers run the demo's twins whatever it says.
    pub app: Option<String>,
    /// More `headway serve` flags (for `scale-out`: the agent check, health path, shutdown delay).
    pub headway_flags: Vec<String>,
    /// The cases speak HTTP/2 with prior knowledge: servers that do not serve it are skipped.
    pub http2: bool,
    /// headway's lanes; off is `--no-lanes`, one first-in-first-out order (`mixed-tail` runs
    /// headway both ways).
    pub lanes: bool,
}

impl ServerConfig {
    pub fn new(workers: usize, threads: usize) -> ServerConfig {
        ServerConfig {
            workers,
            workers_max: None,
            threads,
            queue_timeout: None,
            app: None,
            headway_flags: Vec::new(),
            http2: false,
            lanes: true,
        }
    }
}
