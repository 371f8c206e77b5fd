//! What a load run should do, as plain data: [`LoadConfig`], filled by the CLI or by the lab.
//! [`crate::plan`] checks it and resolves it into what the load loops read.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Requests sent when neither a count nor a duration is given (hey's default).
pub const DEFAULT_REQUESTS: u64 = 200;
/// Size of a WebSocket message unless told otherwise: a short chat line or a small JSON event.
pub const DEFAULT_MESSAGE_SIZE: usize = 32;
/// Largest WebSocket message (what the client accepts back, by tungstenite's default).
pub const MAX_MESSAGE_SIZE: usize = 64 << 20;

/// One URL to request, and how often relative to the others.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Target {
    pub url: String,
    pub weight: u32,
}

/// How open-loop send times are spaced.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Arrival {
    /// Exactly 1/rate apart.
    #[default]
    Constant,
    /// Exponentially distributed gaps with mean 1/rate (a Poisson process).
    Poisson,
}

/// Everything a load run needs to know. Build it with [`LoadConfig::new`] and change fields.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoadConfig {
    pub targets: Vec<Target>,
    pub method: String,
    /// Extra request headers, in order. A `Host` header here overrides the URL's host.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// Concurrent client connections (each carries one request, or one pipelined batch, at a time).
    pub connections: usize,
    /// Stop after this many requests. With neither this nor `duration`, 200 requests are sent.
    pub requests: Option<u64>,
    /// Stop sending after this long. With `requests` too, whichever comes first.
    pub duration: Option<Duration>,
    /// Open loop: requests per second in total, latency measured from each intended send time.
    /// `None` is the closed loop: a connection sends as soon as its previous answer is read.
    pub rate: Option<f64>,
    pub arrival: Arrival,
    /// Closed loop only: at most this many requests per second per connection (hey's `-q`).
    pub connection_rate: Option<f64>,
    pub keep_alive: bool,
    /// Requests written back to back on a connection before reading their answers.
    pub pipeline: usize,
    /// Connect to this unix socket instead of the URL's host (the URL still gives path and Host).
    pub unix_socket: Option<PathBuf>,
    /// How `https://` and `wss://` servers' certificates are checked.
    #[serde(default)]
    pub tls: TlsOptions,
    /// Limit for each request, from its connect (or write) to its last byte.
    pub timeout: Duration,
    /// Value of the Host header, instead of the URL's host.
    pub host: Option<String>,
    /// Count responses by the value of this response header (e.g. `X-Worker-Pid`).
    pub tally_header: Option<String>,
    /// Current-thread runtimes sharing the connections.
    pub threads: usize,
    /// Seed of the Poisson arrival gaps, so a run can be repeated.
    pub seed: u64,
    /// WebSocket mode: each connection is a WebSocket (`ws://` URLs) and each "request" is a
    /// binary message of `message_size` bytes, timed until its echo comes back.
    #[serde(default)]
    pub websocket: bool,
    #[serde(default = "default_message_size")]
    pub message_size: usize,
    /// HTTP/2: each connection carries `streams` requests at once (h2 by ALPN for `https://`,
    /// with prior knowledge for `http://`).
    #[serde(default)]
    pub http2: bool,
    #[serde(default = "default_streams")]
    pub streams: usize,
}

fn default_streams() -> usize {
    1
}

fn default_message_size() -> usize {
    DEFAULT_MESSAGE_SIZE
}

impl LoadConfig {
    /// A closed-loop GET of `url` with hey's defaults: 50 connections, 200 requests, 20 s timeout.
    pub fn new(url: impl Into<String>) -> LoadConfig {
        LoadConfig {
            targets: vec![Target { url: url.into(), weight: 1 }],
            method: "GET".into(),
            headers: Vec::new(),
            body: Vec::new(),
            connections: 50,
            requests: None,
            duration: None,
            rate: None,
            arrival: Arrival::Constant,
            connection_rate: None,
            keep_alive: true,
            pipeline: 1,
            unix_socket: None,
            tls: TlsOptions::default(),
            timeout: Duration::from_secs(20),
            host: None,
            tally_header: None,
            threads: 1,
            seed: 1,
            websocket: false,
            message_size: DEFAULT_MESSAGE_SIZE,
            http2: false,
            streams: 1,
        }
    }
}

/// A mistake in the options (as opposed to a failure of the target): exit status 2.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

/// How servers' certificates are checked.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TlsOptions {
    /// Accept any certificate (`-k/--insecure`).
    #[serde(default)]
    pub insecure: bool,
    /// Trust the CA certificates in this PEM file as well (`--cacert`).
    #[serde(default)]
    pub ca_cert: Option<PathBuf>,
    /// The certificate to show a server that asks for one (`--cert`, `--key`).
    #[serde(default)]
    pub identity: Option<Identity>,
}

/// `--cert` and `--key`: a client certificate chain and its key (PEM; the key may sit in the
/// certificate's file, as curl allows).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Identity {
    pub cert: PathBuf,
    pub key: PathBuf,
}
