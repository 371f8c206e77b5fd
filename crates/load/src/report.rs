//! The result of a run: [`Report`] holds everything measured (it is what `--output json` prints
//! and what the lab reads), and [`Report::to_hey_text`] prints it in hey's layout so scripts
//! that parse hey keep working.
//!
//! Besides the latency of every answer (hey's figure), the report splits it by status class (a
//! server's refusals, often fast, must not blur what the served requests experienced) and by URL
//! (a weighted mix is judged per endpoint).
//!
//! In the WebSocket mode an answer is a message's echo: `requests`, the latencies and the series
//! count echoes, `status_codes` counts the sockets' handshakes, and `connections_opened` the
//! sockets.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::time::Duration;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::plan::{LoadModel, Plan};
use crate::record::{latency_histogram, ErrorCount, ErrorKind, LazyHistogram, PhaseAccum, SecondStats, Totals};
use crate::settings::Arrival;

/// Percentiles reported by name (hey's seven, then the tail).
pub const PERCENTILES: [f64; 10] = [10.0, 25.0, 50.0, 75.0, 90.0, 95.0, 99.0, 99.9, 99.99, 100.0];
/// Buckets of hey's response-time bar chart (its marks are the 10 steps plus the slowest).
const HISTOGRAM_STEPS: usize = 10;
/// Resolution of the full spectrum: HdrHistogram's classic 5 ticks per halving of the tail.
const SPECTRUM_TICKS: u32 = 5;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub settings: Settings,
    /// Wall time from the start to the last answer.
    pub total_secs: f64,
    /// Requests answered (any status).
    pub requests: u64,
    /// Requests that got no answer (see `errors_by_kind`).
    pub errors: u64,
    /// Answered requests per second of `total_secs`.
    pub rps: f64,
    /// Response body bytes, after transfer decoding.
    pub bytes: u64,
    pub bytes_per_request: u64,
    pub connections_opened: u64,
    /// Open loop: answered requests taken up more than `late_after_secs` after their intended
    /// send time (all connections were busy, or the generator fell behind).
    pub late_sends: u64,
    pub late_after_secs: f64,
    /// Latency of every answer, whatever its status (hey's figures).
    pub latency: LatencyStats,
    /// Latency of the answers of each status class ("2xx", "5xx", ...) that occurred.
    pub latency_by_class: BTreeMap<String, LatencyStats>,
    /// hey's response-time histogram: 11 marks, each counting the latencies up to it.
    pub histogram: Vec<HistogramBucket>,
    pub phases: Phases,
    pub status_codes: BTreeMap<u16, u64>,
    pub errors_by_kind: BTreeMap<ErrorKind, ErrorCount>,
    pub targets: Vec<TargetReport>,
    /// Responses by the value of the `settings.tally_header` response header ("" = absent).
    pub tally: BTreeMap<String, u64>,
    /// One entry per second of the run.
    pub series: Vec<SecondStats>,
    /// CPU time (user + system) the load threads used from the start to the end of the run: the
    /// generator's own cost. Where it runs on the server's machine, this is what it took from
    /// the server, and near `settings.threads` seconds a second it was the bottleneck itself.
    /// 0 in reports from before it was measured.
    #[serde(default)]
    pub cpu_secs: f64,
}

/// What was run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    /// "closed" or "open".
    pub model: String,
    /// "send time" (closed loop) or "intended send time" (open loop).
    pub latency_from: String,
    pub urls: Vec<String>,
    pub method: String,
    pub connections: usize,
    pub threads: usize,
    pub pipeline: usize,
    pub keep_alive: bool,
    pub rate: Option<f64>,
    pub arrival: Option<Arrival>,
    pub connection_rate: Option<f64>,
    pub requests_limit: Option<u64>,
    pub duration_limit_secs: Option<f64>,
    pub timeout_secs: f64,
    pub unix_socket: Option<String>,
    pub tally_header: Option<String>,
    /// WebSocket mode: the size of each message; `None` in the HTTP mode.
    #[serde(default)]
    pub websocket_message_size: Option<usize>,
    /// HTTP/2 mode: the requests in flight at once on each connection; `None` for HTTP/1.1.
    #[serde(default)]
    pub http2_streams: Option<usize>,
    /// `-k/--insecure`: https targets' certificates were not checked.
    #[serde(default)]
    pub insecure: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LatencyStats {
    pub min_secs: f64,
    pub mean_secs: f64,
    pub max_secs: f64,
    pub stdev_secs: f64,
    /// The named percentiles of [`PERCENTILES`].
    pub percentiles: Vec<Percentile>,
    /// The whole distribution, denser towards the tail (HdrHistogram's percentile output).
    pub spectrum: Vec<SpectrumPoint>,
}

impl LatencyStats {
    /// The latency at `percent` if it is one of [`PERCENTILES`].
    pub fn percentile(&self, percent: f64) -> Option<f64> {
        self.percentiles.iter().find(|p| p.percent == percent).map(|p| p.secs)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Percentile {
    pub percent: f64,
    pub secs: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SpectrumPoint {
    pub percent: f64,
    pub secs: f64,
    /// Answers with a latency up to `secs`.
    pub count: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct HistogramBucket {
    pub mark_secs: f64,
    pub count: u64,
}

/// hey's "Details": where the time of a request went.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Phases {
    /// Name lookups, done once per host before the run.
    pub dns_lookup: PhaseStats,
    /// Connect time per answered request (zero when it reused a connection), as hey counts it.
    pub dns_dialup: PhaseStats,
    pub req_write: PhaseStats,
    /// From the request written to the first byte of the answer.
    pub resp_wait: PhaseStats,
    /// From the first to the last byte of the answer.
    pub resp_read: PhaseStats,
    /// Open loop: from the intended send time to the moment the client took the request up (before
    /// any connect): the part of the latency spent waiting for a free connection or for the
    /// timer. Zero in the closed loop.
    pub send_lag: PhaseStats,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PhaseStats {
    pub count: u64,
    pub mean_secs: f64,
    pub min_secs: f64,
    pub max_secs: f64,
}

impl From<&PhaseAccum> for PhaseStats {
    fn from(p: &PhaseAccum) -> PhaseStats {
        let mean = if p.count == 0 { 0.0 } else { p.sum_us as f64 / p.count as f64 };
        PhaseStats { count: p.count, mean_secs: mean / 1e6, min_secs: secs(p.min_us), max_secs: secs(p.max_us) }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TargetReport {
    pub url: String,
    pub weight: u32,
    pub requests: u64,
    pub errors: u64,
    pub status_codes: BTreeMap<u16, u64>,
    /// Latency of this URL's answers (all zero when it got none).
    pub latency: LatencyStats,
}

fn secs(us: u64) -> f64 {
    us as f64 / 1e6
}

impl Report {
    pub(crate) fn new(plan: &Plan, totals: &Totals, series: Vec<SecondStats>, elapsed: Duration) -> Report {
        let config = &plan.config;
        let total_secs = elapsed.as_secs_f64();
        let open = matches!(plan.model, LoadModel::Open { .. });
        let settings = Settings {
            model: if open { "open" } else { "closed" }.into(),
            latency_from: if open { "intended send time" } else { "send time" }.into(),
            urls: config.targets.iter().map(|t| t.url.clone()).collect(),
            method: config.method.clone(),
            connections: config.connections,
            threads: plan.threads,
            pipeline: config.pipeline,
            keep_alive: config.keep_alive,
            rate: config.rate,
            arrival: config.rate.map(|_| config.arrival),
            connection_rate: config.connection_rate,
            requests_limit: plan.requests,
            duration_limit_secs: config.duration.map(|d| d.as_secs_f64()),
            timeout_secs: config.timeout.as_secs_f64(),
            unix_socket: config.unix_socket.as_ref().map(|p| p.display().to_string()),
            tally_header: config.tally_header.clone(),
            websocket_message_size: config.websocket.then_some(config.message_size),
            http2_streams: config.http2.then_some(config.streams),
            insecure: config.tls.insecure,
        };
        let targets = plan
            .targets
            .iter()
            .zip(&totals.targets)
            .map(|(plan, counted)| {
                let status_codes = counted.statuses.to_map();
                TargetReport {
                    url: plan.url.clone(),
                    weight: plan.weight,
                    requests: counted.answered,
                    errors: counted.errors,
                    status_codes,
                    latency: lazy_latency_stats(&counted.latency),
                }
            })
            .collect();
        Report {
            settings,
            total_secs,
            requests: totals.responses,
            errors: totals.error_count(),
            rps: if total_secs > 0.0 { totals.responses as f64 / total_secs } else { 0.0 },
            bytes: totals.bytes,
            bytes_per_request: totals.bytes.checked_div(totals.responses).unwrap_or(0),
            connections_opened: totals.connections,
            late_sends: totals.late_sends,
            late_after_secs: crate::record::LATE_AFTER.as_secs_f64(),
            latency: latency_stats(&totals.latency),
            latency_by_class: totals
                .latency_by_class
                .iter()
                .enumerate()
                .filter_map(|(class, h)| Some((format!("{class}xx"), latency_stats(h.get()?))))
                .collect(),
            histogram: hey_histogram(&totals.latency),
            phases: Phases {
                dns_lookup: (&plan.dns).into(),
                dns_dialup: (&totals.connect).into(),
                req_write: (&totals.write).into(),
                resp_wait: (&totals.wait).into(),
                resp_read: (&totals.read).into(),
                send_lag: (&totals.send_lag).into(),
            },
            status_codes: totals.statuses.to_map(),
            errors_by_kind: totals.errors.clone(),
            targets,
            tally: totals.tally.iter().map(|(value, n)| (String::from_utf8_lossy(value).into_owned(), *n)).collect(),
            series,
            cpu_secs: totals.cpu_secs,
        }
    }

    /// The latency at `percent` if it is one of [`PERCENTILES`].
    pub fn percentile(&self, percent: f64) -> Option<f64> {
        self.latency.percentile(percent)
    }

    /// The report in hey's text layout, plus the 99.9 % and 99.99 % lines, and sections for the
    /// open loop and the tally at the end.
    pub fn to_hey_text(&self) -> String {
        let mut out = String::new();
        self.write_hey_text(&mut out).expect("writing to a String cannot fail");
        out
    }

    /// The blank lines (and the line of two spaces after Requests/sec) are hey's own, byte for
    /// byte, so line-oriented parsers see what they see with hey.
    fn write_hey_text(&self, out: &mut String) -> std::fmt::Result {
        let n = |x: f64| format!("{x:4.4}");
        let lat = &self.latency;
        writeln!(out, "\nSummary:")?;
        writeln!(out, "  Total:\t{} secs", n(self.total_secs))?;
        writeln!(out, "  Slowest:\t{} secs", n(lat.max_secs))?;
        writeln!(out, "  Fastest:\t{} secs", n(lat.min_secs))?;
        writeln!(out, "  Average:\t{} secs", n(lat.mean_secs))?;
        let (per_sec, sends) = match self.settings.websocket_message_size {
            Some(_) => ("Messages/sec", "messages"),
            None => ("Requests/sec", "requests"),
        };
        writeln!(out, "  {per_sec}:\t{}\n  ", n(self.rps))?;
        if self.bytes > 0 {
            writeln!(out, "  Total data:\t{} bytes", self.bytes)?;
            writeln!(out, "  Size/request:\t{} bytes", self.bytes_per_request)?;
        }
        writeln!(out, "\nResponse time histogram:")?;
        let tallest = self.histogram.iter().map(|b| b.count).max().unwrap_or(0);
        for bucket in &self.histogram {
            // hey rounds bar lengths to the nearest of 40 steps.
            let bar = (bucket.count * 40 + tallest / 2).checked_div(tallest).unwrap_or(0);
            writeln!(out, "  {:4.3} [{}]\t|{}", bucket.mark_secs, bucket.count, "■".repeat(bar as usize))?;
        }
        write!(out, "\n\nLatency distribution:")?;
        if self.requests > 0 {
            for p in lat.percentiles.iter().filter(|p| p.percent < 100.0) {
                write!(out, "\n  {}% in {} secs", p.percent, n(p.secs))?;
            }
        }
        writeln!(out, "\n\nDetails (average, fastest, slowest):")?;
        let phases = [
            ("DNS+dialup", &self.phases.dns_dialup),
            ("DNS-lookup", &self.phases.dns_lookup),
            ("req write", &self.phases.req_write),
            ("resp wait", &self.phases.resp_wait),
            ("resp read", &self.phases.resp_read),
        ];
        for (name, p) in phases {
            writeln!(out, "  {name}:\t{} secs, {} secs, {} secs", n(p.mean_secs), n(p.min_secs), n(p.max_secs))?;
        }
        let (answers, answer) = match self.settings.websocket_message_size {
            Some(_) => ("Handshake status distribution", "handshakes"),
            None => ("Status code distribution", "responses"),
        };
        write!(out, "\n{answers}:")?;
        for (code, count) in &self.status_codes {
            write!(out, "\n  [{code}]\t{count} {answer}")?;
        }
        write!(out, "\n\n")?;
        // Not hey's: printed only when more than one class occurred, so a plain run prints what
        // hey does.
        if self.latency_by_class.len() > 1 {
            write!(out, "Latency by status class (p50, p90, p99, slowest):")?;
            for (class, stats) in &self.latency_by_class {
                let at = |percent| n(stats.percentile(percent).unwrap_or(f64::NAN));
                let (p50, p90, p99) = (at(50.0), at(90.0), at(99.0));
                write!(out, "\n  [{class}]\t{p50} secs, {p90} secs, {p99} secs, {} secs", n(stats.max_secs))?;
            }
            write!(out, "\n\n")?;
        }
        if !self.errors_by_kind.is_empty() {
            write!(out, "Error distribution:")?;
            for error in self.errors_by_kind.values() {
                write!(out, "\n  [{}]\t{}", error.count, error.example)?;
            }
        }
        write!(out, "\n\n")?;
        if let (Some(rate), Some(arrival)) = (self.settings.rate, self.settings.arrival) {
            let arrival = match arrival {
                Arrival::Constant => "constant",
                Arrival::Poisson => "poisson",
            };
            writeln!(out, "Open loop (latency from the intended send time):")?;
            writeln!(out, "  Rate:\t{rate} {sends}/sec, {arrival} arrivals")?;
            let late_ms = self.late_after_secs * 1e3;
            let late = self.late_sends;
            writeln!(out, "  Sent late:\t{late} {sends} (more than {late_ms} ms after their intended time)")?;
            let lag = &self.phases.send_lag;
            writeln!(
                out,
                "  Send lag:\t{} secs, {} secs, {} secs\n",
                n(lag.mean_secs),
                n(lag.min_secs),
                n(lag.max_secs)
            )?;
        }
        if let Some(size) = self.settings.websocket_message_size {
            writeln!(out, "WebSocket (latency from each message's send to its echo):")?;
            writeln!(out, "  Sockets opened:\t{}", self.connections_opened)?;
            writeln!(out, "  Message size:\t{size} bytes\n")?;
        }
        if let Some(header) = &self.settings.tally_header {
            write!(out, "Responses by {header}:")?;
            for (value, count) in &self.tally {
                write!(out, "\n  [{value}]\t{count} responses")?;
            }
            write!(out, "\n\n")?;
        }
        Ok(())
    }
}

/// Stats of a histogram that may never have been allocated (nothing recorded: all zero).
fn lazy_latency_stats(h: &LazyHistogram) -> LatencyStats {
    match h.get() {
        Some(h) => latency_stats(h),
        None => latency_stats(&latency_histogram()),
    }
}

fn latency_stats(h: &Histogram<u64>) -> LatencyStats {
    let nonempty = |f: fn(&Histogram<u64>) -> f64| if h.is_empty() { 0.0 } else { f(h) };
    let mut seen = 0;
    LatencyStats {
        min_secs: nonempty(|h| secs(h.min())),
        mean_secs: nonempty(|h| h.mean() / 1e6),
        max_secs: nonempty(|h| secs(h.max())),
        stdev_secs: nonempty(|h| h.stdev() / 1e6),
        percentiles: PERCENTILES
            .iter()
            .map(|&percent| Percentile { percent, secs: secs(h.value_at_percentile(percent)) })
            .collect(),
        spectrum: h
            .iter_quantiles(SPECTRUM_TICKS)
            .map(|v| {
                seen += v.count_since_last_iteration();
                SpectrumPoint {
                    percent: v.quantile_iterated_to() * 100.0,
                    secs: secs(v.value_iterated_to()),
                    count: seen,
                }
            })
            .collect(),
    }
}

/// hey's bar chart from the HDR histogram: marks at fastest + i/10 of the range, each bucket
/// counting the latencies above the previous mark and up to its own.
fn hey_histogram(h: &Histogram<u64>) -> Vec<HistogramBucket> {
    if h.is_empty() {
        return Vec::new();
    }
    let (fastest, slowest) = (h.min(), h.max());
    let marks: Vec<u64> =
        (0..=HISTOGRAM_STEPS).map(|i| fastest + (slowest - fastest) * i as u64 / HISTOGRAM_STEPS as u64).collect();
    let mut counts = vec![0u64; marks.len()];
    let mut bucket = 0;
    for v in h.iter_recorded() {
        let value = h.lowest_equivalent(v.value_iterated_to());
        while bucket < marks.len() - 1 && value > marks[bucket] {
            bucket += 1;
        }
        counts[bucket] += v.count_at_value();
    }
    marks.iter().zip(counts).map(|(&mark, count)| HistogramBucket { mark_secs: secs(mark), count }).collect()
}
