//! `daily` (issue 54, adaptive W): a day in a few minutes. The load steps from 15 % of a fixed
//! `-w 2` server's capacity to 150 % and back to 15 %, on the demo's `/sleep/100` (I/O-bound: the
//! slots, not the CPUs, are the limit), against headway with `-w 2` (too few at noon), `-w 8`
//! (eight copies of the app all night) and `-w 2:8` (as many as the queue's wait asks for). Each
//! step is a case on the same running server, so the pool the peak grew is the one the evening
//! starts with. The tables give each step's served p99 and goodput, and the workers alive x time
//! the server counts (its stats' `worker_seconds`), then the whole day of each server beside
//! fixed `-w 8`'s: the adaptive pool should come within 1.1 x of its p99 and goodput at no more
//! than 60 % of its worker-seconds.

use std::time::Duration;

use headway_load::Arrival;

use super::plan::{sleep_path, Case, Group, LoadSpec, Scenario, Size, Work};
use crate::chart::Chart;
use crate::ideal::{open_loop, Service};
use crate::measure::{distinct, CaseParams, Row};
use crate::rounds::Headline;
use crate::servers::ServerConfig;
use crate::table::{fixed, millis, Table};

pub const SCENARIO: Scenario = Scenario {
    name: "daily",
    seed: "",
    about: "a day's load, 15 % -> 150 % -> 15 % of a fixed -w 2 server's capacity, against headway -w 2, -w 8 \
            and -w 2:8: served p99, goodput and worker-seconds",
    sizes: "headway only, --preload; 4 slots a worker; GET /sleep/100 (-w 2: capacity 80/s); open loops of 12/s \
            for 30 s, 120/s for 30 s, 12/s for 60 s (Poisson arrivals) over up to 200 connections on one running \
            server; -w 2:8 with --worker-idle-timeout 10 (--quick: 3 s, 5 s and 5 s steps, --worker-idle-timeout 2)",
    plan,
    tables,
    charts,
    headline: Headline::TailLatency,
};

const DELAY_MS: u32 = 100;
const THREADS: usize = 4;
/// The fixed server whose capacity the steps are shares of, and the adaptive range.
const FEWEST: usize = 2;
const MOST: usize = 8;
/// The steps: a name, the share of `-w 2`'s capacity, and seconds (full, quick).
const STEPS: [(&str, f64, f64, f64); 3] =
    [("morning", 0.15, 30.0, 3.0), ("noon", 1.5, 30.0, 5.0), ("evening", 0.15, 60.0, 5.0)];
const CONNECTIONS: usize = 200;

fn plan(size: Size, cores: usize) -> Vec<Group> {
    let service = Service::waiting_ms(DELAY_MS as f64);
    let base = Group::new(ServerConfig::new(FEWEST, THREADS)).capacity(cores).max_throughput(service);
    let idle_timeout = if size.quick { "2" } else { "10" };
    // Each forked from a preloaded parent: a worker added serves within milliseconds.
    let fixed =
        |workers| ServerConfig { headway_flags: vec!["--preload".into()], ..ServerConfig::new(workers, THREADS) };
    let mut adaptive = ServerConfig { workers_max: Some(MOST), ..fixed(FEWEST) };
    adaptive.headway_flags.extend(["--worker-idle-timeout".into(), idle_timeout.into()]);
    let configs = [fixed(FEWEST), fixed(MOST), adaptive];
    configs
        .into_iter()
        .map(|config| {
            let mut group = Group::new(config);
            group.headway_only = true;
            if let Some(max) = group.config.workers_max {
                group.label = format!("{FEWEST} to {max} workers x {THREADS} slots (-w {FEWEST}:{max})");
            }
            let capacity = group.capacity(cores);
            for (step, share, full_secs, quick_secs) in STEPS {
                let rate = share * base;
                let secs = if size.quick { quick_secs } else { full_secs };
                let params = CaseParams {
                    label: format!("{step}: {rate:.0}/s for {secs:.0} s ({:.0} %)", share * 100.0),
                    connections: CONNECTIONS,
                    keep_alive: true,
                    delay_ms: Some(DELAY_MS as f64),
                    rate: Some(rate),
                    ..CaseParams::default()
                };
                let targets = vec![(sleep_path(DELAY_MS), 1)];
                let duration = Duration::from_secs_f64(secs);
                let spec =
                    LoadSpec::open(targets, CONNECTIONS, rate, duration, Arrival::Poisson, Duration::from_secs(10));
                let ideal = open_loop(capacity, service, rate);
                group.cases.push(Case { params, service, ideal, work: Work::Load(spec) });
            }
            group
        })
        .collect()
}

/// Answers with a 2xx status.
fn served(row: &Row) -> u64 {
    row.status_codes.iter().filter(|(code, _)| (200..300).contains(*code)).map(|(_, n)| n).sum()
}

/// Requests sent: answered or not.
fn sent(row: &Row) -> u64 {
    row.requests + row.errors
}

/// A whole day of one server: its steps together.
struct Day {
    group: String,
    sent: u64,
    served: u64,
    /// The worst step's served p99: the day's is at most that.
    p99: f64,
    worker_secs: f64,
}

impl Day {
    fn of(rows: &[&Row]) -> Day {
        Day {
            group: rows[0].group.clone(),
            sent: rows.iter().map(|row| sent(row)).sum(),
            served: rows.iter().map(|row| served(row)).sum(),
            p99: rows.iter().filter_map(|row| row.class_latency("2xx", 99.0)).fold(f64::NAN, f64::max),
            worker_secs: rows.iter().filter_map(|row| row.worker_secs).sum(),
        }
    }

    /// Served as a share of sent.
    fn goodput(&self) -> f64 {
        self.served as f64 / self.sent.max(1) as f64
    }
}

fn tables(rows: &[Row]) -> Vec<Table> {
    let header = ["server", "step", "sent", "2xx", "503", "timeouts", "goodput %", "2xx p99 ms", "worker-s", "mean W"];
    let mut steps = Table::new(
        format!("daily: each step, GET /sleep/{DELAY_MS}, {THREADS} slots a worker (-w {FEWEST}: capacity 80/s)"),
        &header,
        2,
    );
    for row in rows {
        let worker_secs = row.worker_secs.unwrap_or(f64::NAN);
        steps.push(vec![
            row.group.clone(),
            row.case.label.clone(),
            sent(row).to_string(),
            served(row).to_string(),
            row.status(503).to_string(),
            row.timeouts().to_string(),
            fixed(served(row) as f64 / sent(row).max(1) as f64 * 100.0, 0),
            millis(row.class_latency("2xx", 99.0).unwrap_or(f64::NAN)),
            fixed(worker_secs, 0),
            fixed(worker_secs / row.elapsed_secs, 1),
        ]);
    }
    let steps = steps
        .note("goodput = 2xx as % of the requests sent; worker-s = workers alive x time, as the server counts them")
        .note("each step runs on the server the step before left: the evening starts with the pool noon grew");

    let days: Vec<Day> = distinct(rows, |row| row.group.clone())
        .iter()
        .map(|group| Day::of(&rows.iter().filter(|row| &row.group == group).collect::<Vec<_>>()))
        .collect();
    let reference = days.iter().find(|day| day.group.starts_with(&format!("{MOST} workers")));
    let header = [
        "server",
        "sent",
        "2xx",
        "goodput %",
        "2xx p99 ms",
        "worker-s",
        "p99 / -w 8",
        "goodput / -w 8",
        "worker-s / -w 8",
    ];
    let mut whole = Table::new("daily: the whole day, beside fixed -w 8", &header, 1);
    for day in &days {
        let against = |value: f64, of: fn(&Day) -> f64| reference.map_or(f64::NAN, |reference| value / of(reference));
        whole.push(vec![
            day.group.clone(),
            day.sent.to_string(),
            day.served.to_string(),
            fixed(day.goodput() * 100.0, 0),
            millis(day.p99),
            fixed(day.worker_secs, 0),
            fixed(against(day.p99, |day| day.p99), 2),
            fixed(against(day.goodput(), Day::goodput), 2),
            fixed(against(day.worker_secs, |day| day.worker_secs), 2),
        ]);
    }
    let whole =
        whole.note("the day's p99 is the worst step's (noon's, which holds most of the requests)").note(format!(
            "the aim: -w {FEWEST}:{MOST} within 1.1 x of -w {MOST}'s p99 and goodput, at no more than 0.60 x its \
             worker-seconds; -w {FEWEST} for contrast"
        ));
    vec![steps, whole]
}

fn charts(_rows: &[Row]) -> Vec<Chart> {
    Vec::new()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn three_servers_each_run_the_three_steps() {
        let groups = plan(Size { quick: false, scale: 1.0, rounds: 1 }, 2);
        let labels: Vec<&str> = groups.iter().map(|group| group.label.as_str()).collect();
        assert_eq!(labels, ["2 workers x 4 slots", "8 workers x 4 slots", "2 to 8 workers x 4 slots (-w 2:8)"]);
        assert!(groups.iter().all(|group| group.headway_only));
        let rates: Vec<Option<f64>> = groups[2].cases.iter().map(|case| case.params.rate).collect();
        assert_eq!(rates, [Some(12.0), Some(120.0), Some(12.0)], "15 %, 150 %, 15 % of 80/s");
        assert_eq!(groups[2].config.workers_max, Some(8));
        assert_eq!(groups[0].config.workers_max, None);
    }
}
