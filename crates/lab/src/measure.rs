//! One measured case as a [`Row`]: what was asked, the ideal for it, and what the server did
//! (throughput, latency percentiles and their ratio to the ideal — over every answer, per status
//! class and per path — the long tail, errors, peak memory, CPU time per request, each worker's
//! share of the requests).

use std::collections::BTreeMap;

use headway_load::{LatencyStats, Report, TargetReport};
use serde::{Deserialize, Serialize};

use crate::cpu::{CpuUse, HostCpu};
use crate::ideal::{Ideal, Service};

/// The percentiles of the tables (those of Puma PR #3678): 10 % to 100 %.
pub const TABLE_PERCENTILES: [f64; 8] = [10.0, 25.0, 50.0, 75.0, 90.0, 95.0, 99.0, 100.0];

/// The parameters of one case, as they appear in its row.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CaseParams {
    /// A short name for the case within its scenario (e.g. "200 ms, keep-alive, 2.0 x").
    pub label: String,
    /// Closed-loop clients (or the connection count of an open loop).
    pub connections: usize,
    /// connections / slots, for the sweeps.
    pub mult: Option<f64>,
    pub keep_alive: bool,
    /// The endpoint's fixed delay, when there is one.
    pub delay_ms: Option<f64>,
    /// A name for the workload when a scenario has several (e.g. "50+250").
    pub workload: Option<String>,
    /// Open loop: requests per second sent whatever happens.
    pub rate: Option<f64>,
}

/// Latency percentiles in seconds at [`TABLE_PERCENTILES`].
fn table_percentiles(stats: &LatencyStats) -> Vec<f64> {
    TABLE_PERCENTILES.iter().map(|&p| stats.percentile(p).unwrap_or(f64::NAN)).collect()
}

/// The value at `percent` (one of [`TABLE_PERCENTILES`]) of percentiles listed in that order.
fn at_percent(latency_secs: &[f64], percent: f64) -> Option<f64> {
    let index = TABLE_PERCENTILES.iter().position(|&p| p == percent)?;
    latency_secs.get(index).copied()
}

/// One path of a weighted mix: its answers and their latency.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PathLatency {
    /// The request path (with its query), e.g. "/sleep/20".
    pub path: String,
    /// Answers (any status).
    pub requests: u64,
    /// Percentiles in seconds at [`TABLE_PERCENTILES`]; empty when nothing was answered.
    pub latency_secs: Vec<f64>,
}

impl PathLatency {
    fn of(target: &TargetReport) -> PathLatency {
        // The lab's URLs are http://host:port/path.
        let after_scheme = target.url.split_once("://").map_or(target.url.as_str(), |(_, rest)| rest);
        let path = after_scheme.find('/').map_or("/", |start| &after_scheme[start..]);
        let latency_secs = if target.requests > 0 { table_percentiles(&target.latency) } else { Vec::new() };
        PathLatency { path: path.to_owned(), requests: target.requests, latency_secs }
    }
}

/// Each worker's share of the requests, from the `X-Worker-Pid` of the responses.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkerShare {
    /// Requests per worker, most first.
    pub requests: Vec<u64>,
    /// Each worker's deviation from a fair share, in % of the fair share (PR #3678's
    /// "% deviation from 12.50 %"), lowest first.
    pub deviation_pct: Vec<f64>,
    /// Standard deviation of `deviation_pct`.
    pub stdev_pct: f64,
}

impl WorkerShare {
    /// `tally`: responses by worker pid; `workers`: how many there should be (workers that
    /// served nothing count as zero). `None` with one worker, where fairness means nothing.
    pub fn of(tally: &BTreeMap<String, u64>, workers: usize) -> Option<WorkerShare> {
        let mut requests: Vec<u64> = tally.iter().filter(|(pid, _)| !pid.is_empty()).map(|(_, n)| *n).collect();
        let total: u64 = requests.iter().sum();
        if workers < 2 || total == 0 {
            return None;
        }
        requests.resize(requests.len().max(workers), 0);
        requests.sort_unstable_by(|a, b| b.cmp(a));
        let fair = total as f64 / requests.len() as f64;
        let mut deviation_pct: Vec<f64> = requests.iter().map(|&n| (n as f64 - fair) / fair * 100.0).collect();
        deviation_pct.sort_by(f64::total_cmp);
        let variance = deviation_pct.iter().map(|d| d * d).sum::<f64>() / deviation_pct.len() as f64;
        Some(WorkerShare { requests, deviation_pct, stdev_pct: variance.sqrt() })
    }
}

/// What the server did in one case.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Row {
    pub scenario: String,
    pub server: String,
    /// The server configuration's label (e.g. "2 workers x 4 slots").
    pub group: String,
    pub workers: usize,
    pub threads: usize,
    /// The app the server ran: the demo app, another WSGI app (Flask), or the demo's twin.
    pub app: String,
    pub case: CaseParams,
    pub service: Service,
    pub ideal: Ideal,
    /// Requests answered (any status) and requests that got no answer.
    pub requests: u64,
    pub errors: u64,
    pub rps: f64,
    /// rps as % of the ideal rps.
    pub rps_pct: f64,
    /// Latency percentiles in seconds, at [`TABLE_PERCENTILES`], over every answer.
    pub latency_secs: Vec<f64>,
    /// The same for the answers of each status class that occurred ("2xx", "5xx", ...).
    pub latency_by_class_secs: BTreeMap<String, Vec<f64>>,
    /// Each path of the load, in the order of its targets (empty for pipelining cases).
    pub paths: Vec<PathLatency>,
    /// p100 / p10.
    pub long_tail: f64,
    pub status_codes: BTreeMap<u16, u64>,
    pub errors_by_kind: BTreeMap<String, u64>,
    /// Peak of the RSS summed over all the server's processes during the case.
    pub peak_rss_bytes: u64,
    /// CPU time of all the server's processes during the case (none when nothing was answered).
    pub cpu: Option<CpuUse>,
    /// The load generator's CPU time per request answered, in microseconds: it runs in the lab's
    /// process on the same cores, so what a server's answers cost it is taken from the server.
    /// None without answers, for pipelining cases, and in reports from before it was measured.
    #[serde(default)]
    pub load_us_per_request: Option<f64>,
    /// How the machine's cores spent the case: idle, and stolen by the hypervisor (all servers'
    /// and the load generator's time is the rest). Absent in reports from before it was measured.
    #[serde(default)]
    pub host: Option<HostCpu>,
    pub worker_share: Option<WorkerShare>,
    /// hey's response-time histogram: (upper mark in seconds, count).
    pub histogram: Vec<(f64, u64)>,
    /// headway only: the longest its queue was during the case.
    pub queue_high_water: Option<u64>,
    /// headway only: workers alive x time during the case (absent in reports from before it was
    /// measured).
    #[serde(default)]
    pub worker_secs: Option<f64>,
    /// headway only: whether its lanes were on (absent in reports from before there were lanes).
    #[serde(default)]
    pub lanes: Option<bool>,
    /// Pipelining: whether every response came back for its own request, in order.
    pub in_order: Option<bool>,
    pub elapsed_secs: f64,
    /// The machine's 1-minute load average when the case ended: on a shared machine, how much
    /// else was running.
    pub load_average: f64,
    /// Which round of the run measured it, from 1 ([`crate::rounds`]).
    #[serde(default)]
    pub round: usize,
}

/// Who ran what: the fields of a row that do not come from the measurement.
pub struct RowContext<'a> {
    pub scenario: &'a str,
    pub server: &'a str,
    pub group: &'a str,
    pub workers: usize,
    pub threads: usize,
    pub app: &'a str,
    pub case: &'a CaseParams,
    pub service: Service,
    pub ideal: Ideal,
    pub peak_rss_bytes: u64,
}

impl Row {
    pub fn from_report(context: RowContext<'_>, report: &Report) -> Row {
        let latency_secs = table_percentiles(&report.latency);
        let workers = context.workers;
        let mut row = Row::empty(context);
        row.requests = report.requests;
        row.errors = report.errors;
        row.rps = report.rps;
        row.rps_pct = percent(report.rps, row.ideal.rps);
        row.long_tail = latency_secs[7] / latency_secs[0];
        row.latency_secs = latency_secs;
        row.latency_by_class_secs =
            report.latency_by_class.iter().map(|(class, stats)| (class.clone(), table_percentiles(stats))).collect();
        row.paths = report.targets.iter().map(PathLatency::of).collect();
        row.status_codes = report.status_codes.clone();
        row.errors_by_kind =
            report.errors_by_kind.iter().map(|(kind, count)| (kind.describe().to_owned(), count.count)).collect();
        row.worker_share = WorkerShare::of(&report.tally, workers);
        row.histogram = report.histogram.iter().map(|b| (b.mark_secs, b.count)).collect();
        row.elapsed_secs = report.total_secs;
        row.load_us_per_request = (report.requests > 0).then(|| report.cpu_secs * 1e6 / report.requests as f64);
        row
    }

    /// A row with the context filled in and nothing measured yet.
    pub fn empty(context: RowContext<'_>) -> Row {
        Row {
            scenario: context.scenario.to_owned(),
            server: context.server.to_owned(),
            group: context.group.to_owned(),
            workers: context.workers,
            threads: context.threads,
            app: context.app.to_owned(),
            case: context.case.clone(),
            service: context.service,
            ideal: context.ideal,
            requests: 0,
            errors: 0,
            rps: 0.0,
            rps_pct: 0.0,
            latency_secs: Vec::new(),
            latency_by_class_secs: BTreeMap::new(),
            paths: Vec::new(),
            long_tail: f64::NAN,
            status_codes: BTreeMap::new(),
            errors_by_kind: BTreeMap::new(),
            peak_rss_bytes: context.peak_rss_bytes,
            cpu: None,
            load_us_per_request: None,
            host: None,
            worker_share: None,
            histogram: Vec::new(),
            queue_high_water: None,
            worker_secs: None,
            lanes: None,
            in_order: None,
            elapsed_secs: 0.0,
            load_average: load_average(),
            round: 1,
        }
    }

    /// The server as charts name it: headway with its lanes off is `headway, lanes off`.
    pub fn server_label(&self) -> String {
        match self.lanes {
            Some(false) => format!("{}, lanes off", self.server),
            _ => self.server.clone(),
        }
    }

    /// The latency at `percent` (one of [`TABLE_PERCENTILES`]) in seconds.
    pub fn latency(&self, percent: f64) -> Option<f64> {
        at_percent(&self.latency_secs, percent)
    }

    /// The latency at `percent` of the answers of status class `class` ("2xx"), if any came.
    pub fn class_latency(&self, class: &str, percent: f64) -> Option<f64> {
        at_percent(self.latency_by_class_secs.get(class)?, percent)
    }

    /// The latency at `percent` of the answers to `path`, if any came.
    pub fn path_latency(&self, path: &str, percent: f64) -> Option<f64> {
        at_percent(&self.paths.iter().find(|p| p.path == path)?.latency_secs, percent)
    }

    /// Answers with this status.
    pub fn status(&self, code: u16) -> u64 {
        self.status_codes.get(&code).copied().unwrap_or(0)
    }

    /// Answers that were not 2xx.
    pub fn non_2xx(&self) -> u64 {
        self.status_codes.iter().filter(|(code, _)| !(200..300).contains(*code)).map(|(_, n)| n).sum()
    }

    /// Requests that got no answer because they timed out.
    pub fn timeouts(&self) -> u64 {
        self.errors_by_kind
            .iter()
            .filter(|(kind, _)| kind.contains("timeout") || kind.contains("aborted"))
            .map(|(_, n)| n)
            .sum()
    }
}

/// The 1-minute load average (NaN where /proc/loadavg cannot be read).
pub fn load_average() -> f64 {
    let text = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    text.split(' ').next().and_then(|n| n.parse().ok()).unwrap_or(f64::NAN)
}

pub fn percent(measured: f64, ideal: f64) -> f64 {
    if ideal > 0.0 {
        measured / ideal * 100.0
    } else {
        f64::NAN
    }
}

/// Rows by server, in the order the servers first appear, each server's in the order they ran:
/// headway with its lanes off right after headway.
pub fn rows_by_server(rows: &[Row]) -> Vec<&Row> {
    let servers = distinct(rows, |row| row.server.clone());
    let mut all = rows_where(rows, |_| true);
    all.sort_by_key(|row| servers.iter().position(|server| *server == row.server));
    all
}

/// The rows `keep` accepts, in the order they ran.
pub fn rows_where(rows: &[Row], keep: impl Fn(&Row) -> bool) -> Vec<&Row> {
    rows.iter().filter(|row| keep(row)).collect()
}

/// Distinct values of `key` over `rows`, in first-seen order.
pub fn distinct<'a, T: PartialEq>(rows: impl IntoIterator<Item = &'a Row>, key: impl Fn(&Row) -> T) -> Vec<T> {
    let mut values = Vec::new();
    for row in rows {
        let value = key(row);
        if !values.contains(&value) {
            values.push(value);
        }
    }
    values
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tally(counts: &[(&str, u64)]) -> BTreeMap<String, u64> {
        counts.iter().map(|(pid, n)| (pid.to_string(), *n)).collect()
    }

    #[test]
    fn share_deviation_is_relative_to_the_fair_share() {
        // PR #3678's last row: 8 workers, 2000 requests, deviations -50 .. +30 %, std dev 25.98.
        let counts = [125u64, 200, 225, 225, 275, 300, 325, 325];
        let tally: BTreeMap<String, u64> = counts.iter().enumerate().map(|(i, n)| (i.to_string(), *n)).collect();
        let share = WorkerShare::of(&tally, 8).expect("8 workers");
        assert_eq!(share.deviation_pct, vec![-50.0, -20.0, -10.0, -10.0, 10.0, 20.0, 30.0, 30.0]);
        assert!((share.stdev_pct - 25.98).abs() < 0.01, "{}", share.stdev_pct);
    }

    #[test]
    fn a_worker_that_served_nothing_counts() {
        let share = WorkerShare::of(&tally(&[("101", 10)]), 2).expect("2 workers");
        assert_eq!(share.requests, vec![10, 0]);
        assert_eq!(share.deviation_pct, vec![-100.0, 100.0]);
    }

    /// Latency stats whose percentile p is p x `scale` seconds.
    fn stats(scale: f64) -> LatencyStats {
        LatencyStats {
            min_secs: 0.0,
            mean_secs: 0.0,
            max_secs: scale * 100.0,
            stdev_secs: 0.0,
            percentiles: headway_load::PERCENTILES
                .iter()
                .map(|&percent| headway_load::Percentile { percent, secs: percent * scale })
                .collect(),
            spectrum: Vec::new(),
        }
    }

    #[test]
    fn paths_and_classes_keep_their_own_percentiles() {
        let target = |url: &str, requests: u64, scale: f64| TargetReport {
            url: url.into(),
            weight: 1,
            requests,
            errors: 0,
            status_codes: [(200, requests)].into_iter().collect(),
            latency: stats(scale),
        };
        let fast = PathLatency::of(&target("http://127.0.0.1:8080/sleep/20?n=1", 9, 0.001));
        assert_eq!(fast.path, "/sleep/20?n=1");
        let expected: Vec<f64> = TABLE_PERCENTILES.iter().map(|p| p * 0.001).collect();
        assert_eq!(fast.latency_secs, expected, "10 % .. 100 %, the 99.9 and 99.99 % left out");
        let unanswered = PathLatency::of(&target("http://127.0.0.1:8080/sleep/500", 0, 0.0));
        assert!(unanswered.latency_secs.is_empty(), "no answers, no percentiles (not zeros)");

        let case = CaseParams::default();
        let context = RowContext {
            scenario: "s",
            server: "headway",
            group: "g",
            workers: 1,
            threads: 1,
            app: "demo",
            case: &case,
            service: Service::waiting_ms(20.0),
            ideal: Ideal { rps: 1.0, latency_secs: 1.0 },
            peak_rss_bytes: 0,
        };
        let mut row = Row::empty(context);
        row.paths = vec![fast, unanswered];
        row.latency_by_class_secs.insert("5xx".into(), table_percentiles(&stats(0.002)));
        assert_eq!(row.path_latency("/sleep/20?n=1", 99.0), Some(99.0 * 0.001));
        assert_eq!(row.path_latency("/sleep/500", 50.0), None);
        assert_eq!(row.path_latency("/other", 50.0), None);
        assert_eq!(row.class_latency("5xx", 50.0), Some(50.0 * 0.002));
        assert_eq!(row.class_latency("2xx", 50.0), None);
    }

    #[test]
    fn one_worker_has_no_share_to_judge() {
        assert_eq!(WorkerShare::of(&tally(&[("101", 10)]), 1), None);
        assert_eq!(WorkerShare::of(&BTreeMap::new(), 4), None);
    }
}
