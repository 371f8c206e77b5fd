//! A load run's checked, resolved form ([`Plan`]), which the load loops read: the settings
//! ([`crate::settings`]) with names resolved and requests serialized.
//!
//! Every rule a user can break is checked here, before any connection is opened, so a wrong
//! option gives one clear message instead of a run full of errors.

use std::io;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::conn::{Endpoint, Stream};
use crate::http1::encode_request;
use crate::record::PhaseAccum;
use crate::settings::{Arrival, LoadConfig, UsageError, DEFAULT_REQUESTS, MAX_MESSAGE_SIZE};
use crate::tls::{self, TlsOrigin};

fn usage(message: impl Into<String>) -> anyhow::Error {
    UsageError(message.into()).into()
}

/// Closed or open loop, with what each needs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum LoadModel {
    Closed { connection_rate: Option<f64> },
    Open { rate: f64, arrival: Arrival },
}

/// One URL, ready to send.
#[derive(Debug, Clone)]
pub struct TargetPlan {
    pub url: String,
    pub weight: u32,
    pub request: Vec<u8>,
    /// The same request over HTTP/2, with `--http2`.
    pub http2: Option<Http2Target>,
}

/// What a target's request is over HTTP/2.
#[derive(Debug, Clone)]
pub struct Http2Target {
    /// `scheme://authority/path?query`: `:scheme`, `:authority` and `:path`.
    pub uri: http::Uri,
    pub method: http::Method,
    pub headers: http::HeaderMap,
    pub body: Bytes,
}

impl Http2Target {
    /// `headers`: the run's extra fields; a `Host` among them is the authority.
    pub fn new(
        method: &str,
        scheme: &str,
        authority: &str,
        target: &str,
        headers: &[(String, String)],
        body: &[u8],
    ) -> anyhow::Result<Http2Target> {
        let host = headers.iter().rev().find(|(name, _)| name.eq_ignore_ascii_case("host"));
        let authority = host.map_or(authority, |(_, value)| value.as_str());
        let uri = format!("{scheme}://{authority}{target}").parse()?;
        let mut fields = http::HeaderMap::new();
        for (name, value) in headers {
            let name = http::HeaderName::from_bytes(name.as_bytes())?;
            // HTTP/2 has no connection-specific fields; `Host` is the authority.
            let hop = ["host", "connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade"];
            if !hop.contains(&name.as_str()) {
                fields.append(name, http::HeaderValue::from_str(value)?);
            }
        }
        if !body.is_empty() {
            fields.insert(http::header::CONTENT_LENGTH, http::HeaderValue::from(body.len()));
        }
        let method = http::Method::from_bytes(method.as_bytes())?;
        Ok(Http2Target { uri, method, headers: fields, body: Bytes::copy_from_slice(body) })
    }

    pub(crate) fn request(&self) -> http::Request<()> {
        let mut request = http::Request::new(());
        *request.method_mut() = self.method.clone();
        *request.uri_mut() = self.uri.clone();
        *request.headers_mut() = self.headers.clone();
        request
    }
}

/// One place connections go, and the targets served there.
#[derive(Debug, Clone)]
pub struct OriginPlan {
    pub endpoint: Endpoint,
    /// For `https://` and `wss://` URLs.
    pub tls: Option<TlsOrigin>,
    pub targets: Vec<usize>,
}

impl OriginPlan {
    /// Opens a connection, its TLS handshake done.
    pub async fn connect(&self) -> io::Result<Stream> {
        let stream = self.endpoint.connect().await?;
        match &self.tls {
            Some(tls) => tls.handshake(stream).await,
            None => Ok(stream),
        }
    }
}

/// A checked configuration with names resolved and requests serialized.
#[derive(Debug, Clone)]
pub struct Plan {
    pub config: LoadConfig,
    pub origins: Vec<OriginPlan>,
    pub targets: Vec<TargetPlan>,
    pub head_request: bool,
    pub requests: Option<u64>,
    pub model: LoadModel,
    pub threads: usize,
    /// The name lookups done before the run (one per host), for the DNS line of the report.
    pub dns: PhaseAccum,
}

impl Plan {
    pub async fn new(config: LoadConfig) -> anyhow::Result<Plan> {
        check(&config)?;
        let overridden = config.host.is_some();
        let headers: Vec<(String, String)> = config
            .headers
            .iter()
            .filter(|(name, _)| !(overridden && name.eq_ignore_ascii_case("host")))
            .cloned()
            .chain(config.host.as_ref().map(|host| ("Host".to_string(), host.clone())))
            .collect();

        let mut origins: Vec<(String, OriginPlan)> = Vec::new();
        let mut targets = Vec::new();
        let mut dns = PhaseAccum::default();
        let mut connector = None;
        for target in &config.targets {
            let url = parse_url(&target.url, config.websocket)?;
            let secure = matches!(url.scheme(), "https" | "wss");
            let host = url.host_str().unwrap_or_default();
            let authority = match url.port() {
                Some(port) => format!("{host}:{port}"),
                None => host.to_string(),
            };
            let address = format!("{host}:{}", url.port_or_known_default().unwrap_or(80));
            let key = match &config.unix_socket {
                Some(_) => format!("{secure}"),
                None => format!("{secure} {address}"),
            };
            let origin = match origins.iter().position(|(k, _)| *k == key) {
                Some(index) => index,
                None => {
                    let endpoint = match &config.unix_socket {
                        Some(path) => Endpoint::Unix(path.clone()),
                        None => resolve(&address, &mut dns).await?,
                    };
                    let tls = if secure {
                        let connector = match &connector {
                            Some(connector) => connector,
                            None => {
                                let connector_for = tls::connector(&config.tls, config.http2);
                                connector.insert(connector_for.map_err(|err| usage(format!("{err:#}")))?)
                            }
                        };
                        Some(TlsOrigin::new(connector.clone(), host).map_err(|err| usage(format!("{err:#}")))?)
                    } else {
                        None
                    };
                    origins.push((key, OriginPlan { endpoint, tls, targets: Vec::new() }));
                    origins.len() - 1
                }
            };
            origins[origin].1.targets.push(targets.len());
            let request_target = match url.query() {
                Some(query) => format!("{}?{query}", url.path()),
                None => url.path().to_string(),
            };
            let request =
                encode_request(&config.method, &request_target, &authority, &headers, &config.body, config.keep_alive);
            let http2 = match config.http2 {
                true => Some(
                    Http2Target::new(&config.method, url.scheme(), &authority, &request_target, &headers, &config.body)
                        .map_err(|err| usage(format!("{}: {err}", target.url)))?,
                ),
                false => None,
            };
            targets.push(TargetPlan { url: target.url.clone(), weight: target.weight, request, http2 });
        }

        let requests = match (config.requests, config.duration) {
            (None, None) => Some(DEFAULT_REQUESTS),
            (requests, _) => requests,
        };
        let model = match config.rate {
            Some(rate) => LoadModel::Open { rate, arrival: config.arrival },
            None => LoadModel::Closed { connection_rate: config.connection_rate },
        };
        Ok(Plan {
            head_request: config.method == "HEAD",
            threads: config.threads.min(config.connections),
            origins: origins.into_iter().map(|(_, origin)| origin).collect(),
            targets,
            requests,
            model,
            dns,
            config,
        })
    }

    /// When the run is cut off whatever is still in flight: the time at which sending stops
    /// (the duration, or the open-loop schedule's last send), plus one request timeout and a
    /// second of grace. `None` for a closed loop bounded only by its count, where each request
    /// is bounded by the timeout instead.
    pub fn hard_stop(&self, start: Instant) -> Option<Instant> {
        let sending_ends = match (self.config.duration, self.model, self.requests) {
            (Some(duration), _, _) => Some(duration),
            (None, LoadModel::Open { rate, .. }, Some(requests)) => {
                // A Poisson schedule's n-th send is at n/rate give or take sqrt(n)/rate; six
                // standard deviations (plus ten gaps for small n) cover it.
                let n = requests as f64;
                Some(Duration::from_secs_f64((n + 6.0 * n.sqrt() + 10.0) / rate))
            }
            _ => None,
        }?;
        Some(start + sending_ends + self.config.timeout + Duration::from_secs(1))
    }
}

fn check(config: &LoadConfig) -> anyhow::Result<()> {
    if config.targets.is_empty() {
        return Err(usage("no URL given"));
    }
    if let Some(target) = config.targets.iter().find(|t| t.weight == 0) {
        return Err(usage(format!("weight of {} must be at least 1", target.url)));
    }
    if !is_token(&config.method) {
        return Err(usage(format!("bad method {:?}", config.method)));
    }
    for (name, value) in &config.headers {
        if !is_token(name) || value.contains(['\r', '\n']) {
            return Err(usage(format!("bad header {name:?}: {value:?}")));
        }
    }
    if let Some(host) = &config.host {
        if host.is_empty() || host.contains(['\r', '\n', ' ']) {
            return Err(usage(format!("bad host {host:?}")));
        }
    }
    if let Some(name) = &config.tally_header {
        if !is_token(name) {
            return Err(usage(format!("bad tally header name {name:?}")));
        }
    }
    if config.connections == 0 {
        return Err(usage("connections (-c) must be at least 1"));
    }
    if config.threads == 0 {
        return Err(usage("threads must be at least 1"));
    }
    if config.pipeline == 0 {
        return Err(usage("pipeline depth must be at least 1"));
    }
    if config.pipeline > 1 && !config.keep_alive {
        return Err(usage("--pipeline needs keep-alive; drop --disable-keepalive"));
    }
    if config.requests == Some(0) {
        return Err(usage("requests (-n) must be at least 1"));
    }
    if config.duration.is_some_and(|d| d.is_zero()) {
        return Err(usage("duration (-z) must be positive"));
    }
    if config.timeout.is_zero() {
        return Err(usage("timeout (-t) must be positive: every request is bounded"));
    }
    for (name, rate) in [("--rate", config.rate), ("-q", config.connection_rate)] {
        if rate.is_some_and(|r| !(r.is_finite() && r > 0.0)) {
            return Err(usage(format!("{name} must be a positive number")));
        }
    }
    if config.rate.is_some() && config.connection_rate.is_some() {
        return Err(usage("-q (closed loop, per connection) and --rate (open loop) exclude each other"));
    }
    if config.websocket {
        check_websocket(config)?;
    }
    if config.http2 {
        check_http2(config)?;
    } else if config.streams != 1 {
        return Err(usage("--streams needs --http2"));
    }
    for target in &config.targets {
        parse_url(&target.url, config.websocket)?;
    }
    Ok(())
}

/// What the WebSocket mode cannot do: its messages are binary, of one size, on sockets that stay
/// open, one at a time per socket.
fn check_websocket(config: &LoadConfig) -> anyhow::Result<()> {
    if !(1..=MAX_MESSAGE_SIZE).contains(&config.message_size) {
        return Err(usage(format!("--message-size must be between 1 and {MAX_MESSAGE_SIZE} bytes")));
    }
    let conflicts = [
        (config.pipeline > 1, "--pipeline"),
        (!config.keep_alive, "--disable-keepalive"),
        (config.method != "GET", "-m (a handshake is a GET)"),
        (!config.body.is_empty(), "-d/-D (messages are --message-size bytes)"),
        (config.tally_header.is_some(), "--tally-header"),
    ];
    match conflicts.iter().find(|(conflict, _)| *conflict) {
        Some((_, flag)) => Err(usage(format!("--websocket does not go with {flag}"))),
        None => Ok(()),
    }
}

fn check_http2(config: &LoadConfig) -> anyhow::Result<()> {
    if config.streams == 0 {
        return Err(usage("--streams must be at least 1"));
    }
    let conflicting = [
        (config.websocket, "--websocket"),
        (config.pipeline > 1, "--pipeline (HTTP/2 multiplexes: use --streams)"),
        (!config.keep_alive, "--disable-keepalive"),
    ];
    match conflicting.iter().find(|(set, _)| *set) {
        Some((_, flag)) => Err(usage(format!("--http2 does not go with {flag}"))),
        None => Ok(()),
    }
}

fn parse_url(text: &str, websocket: bool) -> anyhow::Result<url::Url> {
    let url = url::Url::parse(text).map_err(|err| usage(format!("bad URL {text:?}: {err}")))?;
    match (url.scheme(), websocket) {
        ("http" | "https", false) | ("ws" | "wss", true) => {}
        ("ws" | "wss", false) => return Err(usage(format!("{text}: ws:// and wss:// URLs need --websocket"))),
        ("http" | "https", true) => return Err(usage(format!("{text}: --websocket needs ws:// or wss:// URLs"))),
        (other, _) => {
            return Err(usage(format!(
                "{text}: unsupported scheme {other:?} (http:// or https://, or ws:// or wss:// with --websocket)"
            )))
        }
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(usage(format!("bad URL {text:?}: no host")));
    }
    Ok(url)
}

async fn resolve(host_port: &str, dns: &mut PhaseAccum) -> anyhow::Result<Endpoint> {
    let started = Instant::now();
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host(host_port)
        .await
        .map_err(|err| anyhow::anyhow!("cannot resolve {host_port}: {err}"))?
        .collect();
    dns.add(started.elapsed());
    // One address for the whole run. IPv4 first: "localhost" often resolves to ::1 first while
    // test and benchmark servers listen on 127.0.0.1.
    let addr = addrs
        .iter()
        .find(|a| a.is_ipv4())
        .or(addrs.first())
        .ok_or_else(|| anyhow::anyhow!("cannot resolve {host_port}: no address"))?;
    Ok(Endpoint::Tcp(*addr))
}

/// An HTTP token (RFC 9110 5.6.2): what a method or a header name may be made of.
fn is_token(text: &str) -> bool {
    !text.is_empty() && text.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}
