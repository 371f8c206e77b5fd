//! The `headway load` command line: hey's flags where hey has them, plus the open loop,
//! pipelining, unix sockets, threads and JSON. Turns the arguments into a [`LoadConfig`].

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use crate::settings::{Arrival, Identity, LoadConfig, Target, TlsOptions, UsageError, DEFAULT_MESSAGE_SIZE};

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OutputFormat {
    /// hey's summary layout (with 99.9 % and 99.99 % added).
    Text,
    /// The whole report as JSON: percentile spectrum, latency per status class and per URL,
    /// phases, per-second series.
    Json,
}

/// Generate HTTP/1.1, HTTP/2 or WebSocket load and report latency percentiles.
///
/// Closed loop by default (like hey and ab: each connection sends when its previous answer
/// arrived); `--rate` switches to an open loop that measures latency from each request's
/// intended send time, so a server that stalls cannot hide the stall. With `--websocket`, each
/// connection is a WebSocket and each request a message timed until its echo.
#[derive(clap::Args, Debug, Clone)]
#[command(
    after_help = "hey's one-dash long flags (-host, -disable-keepalive, -cpus) are spelled with two dashes here."
)]
pub struct LoadArgs {
    /// URLs to request (http://, or ws:// with --websocket). Several URLs are requested in turn,
    /// in proportion to --weights.
    #[arg(value_name = "URL", required = true)]
    pub urls: Vec<String>,

    /// WebSocket mode: each connection is a WebSocket (ws:// URLs) that sends binary messages of
    /// --message-size bytes and times each echo; -n, -z, --rate and -q count messages.
    #[arg(long)]
    pub websocket: bool,

    /// HTTP/2: each connection (-c) carries --streams requests at once; h2 by ALPN for https://
    /// URLs, with prior knowledge (h2c) for http://. Like h2load -c N -m M.
    #[arg(long, conflicts_with = "websocket")]
    pub http2: bool,

    /// With --http2: requests in flight at once on each connection.
    #[arg(long, value_name = "M", default_value_t = 1, requires = "http2")]
    pub streams: usize,

    /// Bytes of each WebSocket message.
    #[arg(long, value_name = "BYTES", default_value_t = DEFAULT_MESSAGE_SIZE, requires = "websocket")]
    pub message_size: usize,

    /// Relative weights of the URLs, one per URL, comma-separated (e.g. 3,1). Default: all 1.
    #[arg(long, value_delimiter = ',', value_name = "W,...")]
    pub weights: Vec<u32>,

    /// Number of requests to send. Default 200 unless -z is given; with -z, whichever ends first.
    #[arg(short = 'n', long = "requests", value_name = "N")]
    pub requests: Option<u64>,

    /// Number of concurrent connections.
    #[arg(short = 'c', long = "connections", value_name = "C", default_value_t = 50)]
    pub connections: usize,

    /// How long to send requests, e.g. 10s, 2m, 1m30s, 500ms (a bare number is seconds).
    #[arg(short = 'z', long = "duration", value_name = "DURATION", value_parser = parse_duration)]
    pub duration: Option<Duration>,

    /// Closed loop: at most this many requests per second per connection (hey's -q).
    #[arg(short = 'q', long = "qps", value_name = "QPS")]
    pub qps: Option<f64>,

    /// Open loop: send this many requests per second in total, whatever the answers do, and
    /// measure latency from each request's intended send time.
    #[arg(long, value_name = "R")]
    pub rate: Option<f64>,

    /// Open loop spacing of send times.
    #[arg(long, value_enum, default_value_t = Arrival::Constant, requires = "rate")]
    pub arrival: Arrival,

    /// HTTP method.
    #[arg(short = 'm', long = "method", default_value = "GET")]
    pub method: String,

    /// Request header, "Name: value". Repeat for more.
    #[arg(short = 'H', long = "header", value_name = "NAME: VALUE")]
    pub headers: Vec<String>,

    /// Request body.
    #[arg(short = 'd', long = "body", value_name = "BODY", conflicts_with = "body_file")]
    pub body: Option<String>,

    /// Request body read from a file.
    #[arg(short = 'D', long = "body-file", value_name = "FILE")]
    pub body_file: Option<PathBuf>,

    /// Content-Type of the body (sent only when given; hey always sends text/html).
    #[arg(short = 'T', long = "content-type", value_name = "TYPE")]
    pub content_type: Option<String>,

    /// Timeout of each request (connect, write and answer), e.g. 20, 1.5, 500ms.
    #[arg(short = 't', long = "timeout", value_name = "SECS", default_value = "20", value_parser = parse_duration)]
    pub timeout: Duration,

    /// Host header value, instead of the URL's host.
    #[arg(long = "host", value_name = "HOST")]
    pub host: Option<String>,

    /// Open a new connection for every request (and send Connection: close).
    #[arg(long = "disable-keepalive")]
    pub disable_keepalive: bool,

    /// Write K requests back to back on a connection, then read the K answers in order.
    #[arg(long, value_name = "K", default_value_t = 1)]
    pub pipeline: usize,

    /// Connect to this unix socket instead of the URL's host (the URL gives path and Host).
    #[arg(long, value_name = "PATH")]
    pub unix_socket: Option<PathBuf>,

    /// Accept any server certificate for https:// and wss:// URLs (curl -k); by default it is
    /// checked against the system's roots and --cacert.
    #[arg(short = 'k', long)]
    pub insecure: bool,

    /// Trust the CA certificates in this PEM file too, for https:// and wss:// URLs.
    #[arg(long, value_name = "FILE")]
    pub cacert: Option<PathBuf>,

    /// Show this client certificate (PEM, with its chain) to servers that ask for one (curl
    /// --cert).
    #[arg(short = 'E', long, value_name = "FILE")]
    pub cert: Option<PathBuf>,

    /// The private key of --cert (PEM), if it is not in the --cert file itself.
    #[arg(long, value_name = "FILE", requires = "cert")]
    pub key: Option<PathBuf>,

    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = OutputFormat::Text)]
    pub output: OutputFormat,

    /// Load threads, each with its own event loop and share of the connections (hey: -cpus).
    #[arg(long, value_name = "N", default_value_t = 1, alias = "cpus")]
    pub threads: usize,

    /// Count responses by the value of this response header (e.g. X-Worker-Pid).
    #[arg(long, value_name = "NAME")]
    pub tally_header: Option<String>,

    /// Seed of the Poisson arrivals.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

impl LoadArgs {
    pub fn to_config(&self) -> anyhow::Result<LoadConfig> {
        let usage = |message: String| anyhow::Error::from(UsageError(message));
        if !self.weights.is_empty() && self.weights.len() != self.urls.len() {
            return Err(usage(format!("--weights gives {} weights for {} URLs", self.weights.len(), self.urls.len())));
        }
        let weight = |i: usize| self.weights.get(i).copied().unwrap_or(1);
        let mut headers = self
            .headers
            .iter()
            .map(|h| parse_header(h).ok_or_else(|| usage(format!("bad header {h:?}: expected \"Name: value\""))))
            .collect::<anyhow::Result<Vec<_>>>()?;
        if let Some(content_type) = &self.content_type {
            headers.push(("Content-Type".into(), content_type.clone()));
        }
        let body = match (&self.body, &self.body_file) {
            (Some(body), _) => body.clone().into_bytes(),
            (None, Some(path)) => {
                std::fs::read(path).map_err(|err| usage(format!("cannot read body file {}: {err}", path.display())))?
            }
            (None, None) => Vec::new(),
        };
        Ok(LoadConfig {
            targets: self
                .urls
                .iter()
                .enumerate()
                .map(|(i, url)| Target { url: url.clone(), weight: weight(i) })
                .collect(),
            method: self.method.clone(),
            headers,
            body,
            connections: self.connections,
            requests: self.requests,
            duration: self.duration,
            rate: self.rate,
            arrival: self.arrival,
            connection_rate: self.qps,
            keep_alive: !self.disable_keepalive,
            pipeline: self.pipeline,
            unix_socket: self.unix_socket.clone(),
            tls: TlsOptions {
                insecure: self.insecure,
                ca_cert: self.cacert.clone(),
                identity: self
                    .cert
                    .clone()
                    .map(|cert| Identity { key: self.key.clone().unwrap_or_else(|| cert.clone()), cert }),
            },
            timeout: self.timeout,
            host: self.host.clone(),
            tally_header: self.tally_header.clone(),
            threads: self.threads,
            seed: self.seed,
            websocket: self.websocket,
            message_size: self.message_size,
            http2: self.http2,
            streams: self.streams,
        })
    }
}

fn parse_header(text: &str) -> Option<(String, String)> {
    let (name, value) = text.split_once(':')?;
    let name = name.trim();
    (!name.is_empty()).then(|| (name.to_string(), value.trim().to_string()))
}

/// Parses "1h2m3.5s", "500ms", "250us", or a bare number of seconds.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let bad = || format!("bad duration {text:?} (examples: 10s, 1m30s, 500ms, 2.5)");
    if text.is_empty() {
        return Err(bad());
    }
    if let Ok(secs) = text.parse::<f64>() {
        return Duration::try_from_secs_f64(secs).map_err(|_| bad());
    }
    let mut total = 0.0;
    let mut rest = text;
    while !rest.is_empty() {
        let number_len = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).ok_or_else(bad)?;
        let (number, after) = rest.split_at(number_len);
        let number: f64 = number.parse().map_err(|_| bad())?;
        let unit_len = after.find(|c: char| c.is_ascii_digit() || c == '.').unwrap_or(after.len());
        let (unit, after) = after.split_at(unit_len);
        let scale = match unit {
            "h" => 3600.0,
            "m" => 60.0,
            "s" => 1.0,
            "ms" => 1e-3,
            "us" | "µs" => 1e-6,
            "ns" => 1e-9,
            _ => return Err(bad()),
        };
        total += number * scale;
        rest = after;
    }
    Duration::try_from_secs_f64(total).map_err(|_| bad())
}

/// hey's one-dash long flags that `headway load` also has.
const HEY_LONG_FLAGS: [&str; 3] = ["host", "disable-keepalive", "cpus"];

/// Rewrites hey's one-dash long flags (`-host`, `-disable-keepalive`, `-cpus`, also `-host=x`)
/// that follow the `load` subcommand into clap's two-dash form, so a hey command line works
/// after `s/hey/headway load/`. Meant for `Cli::parse_from(hey_style_args(std::env::args_os()))`
/// in the binary; everything else passes through untouched.
pub fn hey_style_args<I, T>(args: I) -> Vec<OsString>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString>,
{
    let mut in_load = false;
    let mut options_ended = false;
    args.into_iter()
        .map(Into::into)
        .map(|arg| {
            let text = arg.to_str().unwrap_or_default();
            if !in_load {
                in_load = text == "load";
                return arg;
            }
            if options_ended || text == "--" {
                options_ended = true;
                return arg;
            }
            let Some(flag) = text.strip_prefix('-').filter(|t| !t.starts_with('-')) else { return arg };
            let name = flag.split_once('=').map_or(flag, |(name, _)| name);
            if HEY_LONG_FLAGS.contains(&name) {
                OsString::from(format!("-{text}"))
            } else {
                arg
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_in_go_and_plain_forms() {
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2.5"), Ok(Duration::from_millis(2500)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert!(parse_duration("10x").is_err());
        assert!(parse_duration("s").is_err());
        assert!(parse_duration("-1").is_err());
        assert!(parse_duration("").is_err());
    }

    #[test]
    fn hey_flags_get_two_dashes_after_load_only() {
        let args =
            ["headway", "-host", "load", "-host", "x.test", "-disable-keepalive", "-cpus=2", "-n", "5", "--", "-host"];
        let rewritten: Vec<String> = hey_style_args(args).into_iter().map(|a| a.into_string().unwrap()).collect();
        assert_eq!(
            rewritten,
            [
                "headway",
                "-host",
                "load",
                "--host",
                "x.test",
                "--disable-keepalive",
                "--cpus=2",
                "-n",
                "5",
                "--",
                "-host"
            ]
        );
    }

    #[test]
    fn headers_need_a_name_and_a_colon() {
        assert_eq!(parse_header("X-A:  b c "), Some(("X-A".into(), "b c".into())));
        assert_eq!(parse_header("no colon"), None);
        assert_eq!(parse_header(": value"), None);
    }
}
