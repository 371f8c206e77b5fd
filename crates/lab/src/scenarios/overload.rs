//! `overload` (seed 004, "Lowering H12 errors on Heroku"): hundreds of clients at once, then an
//! open-loop rate of twice the capacity. A server must either queue (latency grows for as long as
//! the overload lasts, until clients time out, as Heroku's router does at 30 s) or turn the
//! excess away fast. The table shows which, with the memory it took, and keeps the served
//! requests' latency apart from the refusals' so that neither blurs the other.

use std::time::Duration;

use crate::chart::Chart;
use crate::ideal::{closed_loop, open_loop, Service};
use crate::measure::{CaseParams, Row};
use crate::scenarios::{distinct, rows_where, sleep_path, Case, Group, LoadSpec, Scenario, Size, Work};
use crate::servers::ServerConfig;
use crate::table::{fixed, megabytes, millis, Table};

pub const SCENARIO: Scenario = Scenario {
    name: "overload",
    seed: "004",
    about: "a burst far above capacity and an open loop at 2x capacity: served latency, 503s, timeouts, memory",
    sizes: "2 workers x 4 slots; GET /sleep/100 (capacity 80/s); a burst of 400 clients with one request each; \
            then 160 requests/s for 10 s over up to 400 connections; 10 s client timeout; headway with \
            --queue-timeout 2 (--quick: 40 clients, then 3 s over up to 240 connections, 5 s timeout)",
    plan,
    tables,
    charts,
};

const DELAY_MS: u32 = 100;
/// headway's queue deadline here: a request that cannot start within 2 s gets 503 at once.
const QUEUE_TIMEOUT_SECS: f64 = 2.0;

fn plan(size: Size, cores: usize) -> Vec<Group> {
    let mut group = Group::new(ServerConfig { queue_timeout: Some(QUEUE_TIMEOUT_SECS), ..ServerConfig::new(2, 4) });
    let service = Service::waiting_ms(DELAY_MS as f64);
    let capacity = group.capacity(cores);
    // The open loop's connections bound what can wait in a server's queue (connections - slots),
    // so even the quick run keeps enough of them for waits past the queue deadline, and 503s.
    let (burst, open_connections, open_secs, timeout) = if size.quick {
        (40, 240, 3.0, 5)
    } else {
        let clients = size.requests(400.0, 10) as usize;
        (clients, clients, 10.0, 10)
    };
    let timeout = Duration::from_secs(timeout);

    let ideal = closed_loop(capacity, service, burst);
    let params = CaseParams {
        label: format!("burst of {burst} clients"),
        connections: burst,
        mult: Some(burst as f64 / capacity.slots() as f64),
        delay_ms: Some(DELAY_MS as f64),
        ..CaseParams::default()
    };
    let mut spec = LoadSpec::closed(&sleep_path(DELAY_MS), burst, false, burst as u64, Duration::from_secs(60));
    spec.timeout = timeout;
    group.cases.push(Case { params, service, ideal, work: Work::Load(spec) });

    let rate = 2.0 * capacity.max_throughput(service);
    let ideal = open_loop(capacity, service, rate);
    let params = CaseParams {
        label: format!("{rate:.0}/s for {open_secs:.0} s (2 x capacity)"),
        connections: open_connections,
        keep_alive: true,
        delay_ms: Some(DELAY_MS as f64),
        rate: Some(rate),
        ..CaseParams::default()
    };
    let spec = LoadSpec {
        targets: vec![(sleep_path(DELAY_MS), 1)],
        connections: open_connections,
        keep_alive: true,
        requests: Some((rate * open_secs) as u64),
        duration: Some(Duration::from_secs_f64(open_secs)),
        rate: Some(rate),
        timeout,
    };
    group.cases.push(Case { params, service, ideal, work: Work::Load(spec) });
    vec![group]
}

fn tables(rows: &[Row]) -> Vec<Table> {
    let header = [
        "server",
        "case",
        "sent",
        "2xx",
        "503",
        "timeouts",
        "other",
        "2xx/s",
        "ideal/s",
        "2xx p50 ms",
        "2xx p99 ms",
        "2xx max ms",
        "5xx p50 ms",
        "5xx p99 ms",
        "MB",
        "queue max",
    ];
    let mut table = Table::new("overload: 2 workers x 4 slots, GET /sleep/100 (capacity 80 requests/s)", &header, 2);
    for row in rows {
        let ok: u64 = row.status_codes.iter().filter(|(code, _)| (200..300).contains(*code)).map(|(_, n)| n).sum();
        let timeouts = row.timeouts();
        let other = row.errors.saturating_sub(timeouts) + row.non_2xx().saturating_sub(row.status(503));
        table.push(vec![
            row.server.clone(),
            row.case.label.clone(),
            (row.requests + row.errors).to_string(),
            ok.to_string(),
            row.status(503).to_string(),
            timeouts.to_string(),
            other.to_string(),
            fixed(ok as f64 / row.elapsed_secs, 1),
            fixed(row.ideal.rps, 1),
            millis(row.class_latency("2xx", 50.0).unwrap_or(f64::NAN)),
            millis(row.class_latency("2xx", 99.0).unwrap_or(f64::NAN)),
            millis(row.class_latency("2xx", 100.0).unwrap_or(f64::NAN)),
            millis(row.class_latency("5xx", 50.0).unwrap_or(f64::NAN)),
            millis(row.class_latency("5xx", 99.0).unwrap_or(f64::NAN)),
            megabytes(row.peak_rss_bytes),
            row.queue_high_water.map_or("-".into(), |n| n.to_string()),
        ]);
    }
    // Share of an open loop that no server can serve: what the ideal turns away.
    let excess = rows.iter().find_map(|row| Some(1.0 - row.ideal.rps / row.case.rate?));
    let mut table = table
        .note("2xx = latency of the served requests alone; 5xx = of the 5xx answers alone (headway's 503s); - = none came")
        .note("timeouts = no answer within the client's timeout")
        .note(format!(
            "headway runs with --queue-timeout {QUEUE_TIMEOUT_SECS}: a request whose turn would come later, judging by \
             recent service times, gets 503 on arrival; one not started within it (before the service time is known) \
             gets 503 then"
        ))
        .note("the burst's ideal: every request served, the last after (clients / slots) x 100 ms");
    if let Some(excess) = excess {
        table = table.note(format!(
            "the open loop's ideal: 80 served per second and {:.0} % turned away (no server can serve more)",
            excess * 100.0
        ));
    }
    vec![table]
}

fn charts(rows: &[Row]) -> Vec<Chart> {
    distinct(rows, |row| row.case.label.clone())
        .into_iter()
        .map(|case| {
            let picked = rows_where(rows, |row| row.case.label == case);
            let ok = |row: &Row| {
                row.status_codes.iter().filter(|(c, _)| (200..300).contains(*c)).map(|(_, n)| *n).sum::<u64>() as f64
            };
            Chart::Bars {
                title: format!("overload, {case}: outcome of each request"),
                y_label: "requests".into(),
                categories: picked.iter().map(|row| row.server.clone()).collect(),
                series: vec!["2xx".into(), "503".into(), "timeout".into()],
                values: vec![
                    picked.iter().map(|row| ok(row)).collect(),
                    picked.iter().map(|row| row.status(503) as f64).collect(),
                    picked.iter().map(|row| row.timeouts() as f64).collect(),
                ],
            }
        })
        .collect()
}
