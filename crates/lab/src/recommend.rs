//! `headway lab recommend`: the question every seed author asked, "how many workers and how many
//! threads for my app?", answered from a measurement instead of a rule of thumb.
//!
//! 1. Serve the app with headway (W = cores) and load it; headway's stats give, per worker, the
//!    time its slots spent running requests (`busy_secs`) and the CPU its processes used
//!    (`cpu_secs`): per request, the service time S and its CPU part.
//! 2. A process runs Python (or Ruby) on one core at a time, so W = cores keeps every core
//!    busy, fewer if memory is short; a thread is on the CPU a share CPU/S of its time, so
//!    T = S/CPU threads keep its process's core busy, and more only queue for the GIL.
//! 3. Confirm with a short sweep of T/2, T and 2T threads at the same load.

use std::io::Write as _;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use headway_load::{LoadConfig, Target};
use serde::Serialize;

use crate::ideal::{closed_loop, Capacity, Service};
use crate::report::meminfo_bytes;
use crate::servers::{detect, HeadwayBinary, RunningServer, ServerConfig, ServerKind};
use crate::table::{fixed, megabytes, millis, Table};
use crate::usage::UsageError;

/// Most threads suggested per worker: beyond this an app is almost all waiting, and an async
/// server (or a bigger T chosen by hand) fits it better.
const MAX_THREADS: usize = 32;
/// Share of the available memory the suggested workers may take.
const MEMORY_SHARE: f64 = 0.5;

#[derive(clap::Args, Debug)]
pub struct RecommendArgs {
    /// The WSGI app, as module:callable [default: the demo app]
    #[arg(value_name = "APP")]
    app: Option<String>,

    /// A path to request, e.g. '/orders?page=2'; repeat for a mix [default: the demo's
    /// /fake_work?cpu_ms=50&iowait_ms=250&bytes=20000]
    #[arg(long = "path", value_name = "PATH")]
    paths: Vec<String>,

    /// Seconds of load for the measurement and for each configuration of the sweep
    #[arg(long, default_value_t = 6.0, value_name = "SECS")]
    seconds: f64,

    /// Print the measurement, the suggestion and the sweep as JSON
    #[arg(long)]
    json: bool,

    #[command(flatten)]
    binary: HeadwayBinary,
}

/// What one request of the app costs, measured.
#[derive(Debug, Clone, Serialize)]
pub struct Mix {
    pub requests: u64,
    /// Mean seconds a request held a slot.
    pub service_secs: f64,
    /// Mean CPU seconds per request (of the worker processes).
    pub cpu_secs: f64,
    pub cpu_share: f64,
    /// Peak RSS of one worker (the largest), bytes.
    pub worker_rss_bytes: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Suggestion {
    pub workers: usize,
    pub threads: usize,
    pub reasons: Vec<String>,
    /// Requests per second the suggestion should reach (the ideal for it).
    pub capacity_rps: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct SweepPoint {
    pub workers: usize,
    pub threads: usize,
    pub clients: usize,
    pub rps: f64,
    pub ideal_rps: f64,
    pub p50_secs: f64,
    pub p99_secs: f64,
    pub errors: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Recommendation {
    pub cores: usize,
    pub available_memory_bytes: u64,
    pub mix: Mix,
    pub suggestion: Suggestion,
    pub sweep: Vec<SweepPoint>,
}

pub fn run(args: &RecommendArgs, this_program: &std::path::Path) -> anyhow::Result<ExitCode> {
    if !(args.seconds.is_finite() && args.seconds > 0.0 && args.seconds <= 600.0) {
        return Err(UsageError(format!("--seconds must be between 0 and 600, not {}", args.seconds)).into());
    }
    let env = args.binary.environment(this_program)?;
    let peer = detect(ServerKind::Headway, &env).map_err(|skip| anyhow::anyhow!("{skip}"))?;
    let paths = if args.paths.is_empty() {
        vec!["/fake_work?cpu_ms=50&iowait_ms=250&bytes=20000".to_owned()]
    } else {
        args.paths.clone()
    };
    if let Some(bad) = paths.iter().find(|p| !p.starts_with('/')) {
        return Err(UsageError(format!("--path must start with '/': {bad}")).into());
    }
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let duration = Duration::from_secs_f64(args.seconds);
    let cores = env.cores;
    let config = |workers, threads| ServerConfig { app: args.app.clone(), ..ServerConfig::new(workers, threads) };

    eprintln!("measuring the app's CPU / I/O mix: {cores} workers x 4 slots, {} s of load", args.seconds);
    let server = runtime.block_on(peer.start(&env, &config(cores, 4)))?;
    let mix = runtime.block_on(measure(&server, &paths, duration))?;
    server.stop();

    let available = meminfo_bytes("MemAvailable").unwrap_or(0);
    let suggestion = suggest(&mix, cores, available);
    let service = Service { mean_secs: mix.service_secs, cpu_secs: mix.cpu_secs };
    let mut sweep = Vec::new();
    let clients = 2 * suggestion.workers * suggestion.threads;
    for threads in neighbours(suggestion.threads) {
        eprintln!("confirming: {} workers x {threads} threads, {clients} clients", suggestion.workers);
        let server = runtime.block_on(peer.start(&env, &config(suggestion.workers, threads)))?;
        let report = runtime.block_on(headway_load::run_load(load(&server, &paths, clients, duration)))?;
        server.stop();
        let capacity = Capacity { workers: suggestion.workers, threads, cores };
        sweep.push(SweepPoint {
            workers: suggestion.workers,
            threads,
            clients,
            rps: report.rps,
            ideal_rps: closed_loop(capacity, service, clients).rps,
            p50_secs: report.percentile(50.0).unwrap_or(f64::NAN),
            p99_secs: report.percentile(99.0).unwrap_or(f64::NAN),
            errors: report.errors + report.status_codes.iter().filter(|(c, _)| **c >= 400).map(|(_, n)| n).sum::<u64>(),
        });
    }
    let recommendation = Recommendation { cores, available_memory_bytes: available, mix, suggestion, sweep };
    let mut out = std::io::stdout().lock();
    if args.json {
        serde_json::to_writer_pretty(&mut out, &recommendation)?;
        writeln!(out)?;
    } else {
        out.write_all(describe(&recommendation).as_bytes())?;
    }
    Ok(ExitCode::SUCCESS)
}

fn load(server: &RunningServer, paths: &[String], clients: usize, duration: Duration) -> LoadConfig {
    let mut config = LoadConfig::new(server.url(&paths[0]));
    config.targets = paths.iter().map(|path| Target { url: server.url(path), weight: 1 }).collect();
    config.connections = clients;
    config.duration = Some(duration);
    config.timeout = Duration::from_secs(30);
    config
}

/// Loads the server with enough clients to keep every slot busy and reads the workers' busy
/// time and CPU time before and after.
async fn measure(server: &RunningServer, paths: &[String], duration: Duration) -> anyhow::Result<Mix> {
    let before = worker_totals(server).await?;
    server.memory.take_peak();
    let clients = server.config.workers * server.config.threads;
    headway_load::run_load(load(server, paths, clients, duration)).await?;
    let after = worker_totals(server).await?;
    let requests = after.requests.saturating_sub(before.requests);
    anyhow::ensure!(requests > 0, "the app answered no request in {duration:?}");
    let service_secs = (after.busy_secs - before.busy_secs) / requests as f64;
    let cpu_secs = (after.cpu_secs - before.cpu_secs).max(0.0) / requests as f64;
    Ok(Mix {
        requests,
        service_secs,
        cpu_secs,
        cpu_share: (cpu_secs / service_secs).min(1.0),
        worker_rss_bytes: after.max_rss_bytes,
    })
}

struct WorkerTotals {
    requests: u64,
    busy_secs: f64,
    cpu_secs: f64,
    max_rss_bytes: u64,
}

async fn worker_totals(server: &RunningServer) -> anyhow::Result<WorkerTotals> {
    let stats = server.stats().await?.context("headway has no control address")?;
    let workers = &stats.workers;
    Ok(WorkerTotals {
        requests: workers.iter().map(|w| w.requests).sum(),
        busy_secs: workers.iter().map(|w| w.busy_secs).sum(),
        cpu_secs: workers.iter().map(|w| w.usage.cpu_secs).sum(),
        max_rss_bytes: workers.iter().map(|w| w.usage.rss_bytes).max().unwrap_or(0),
    })
}

/// Workers x threads for `mix` on a machine with `cores` and `available` bytes of memory.
pub fn suggest(mix: &Mix, cores: usize, available: u64) -> Suggestion {
    let mut reasons = Vec::new();
    let mut workers = cores.max(1);
    reasons
        .push(format!("{cores} cores: one worker process per core (a process runs its Python on one core at a time)"));
    if mix.worker_rss_bytes > 0 && available > 0 {
        let fits = ((available as f64 * MEMORY_SHARE) / mix.worker_rss_bytes as f64).floor() as usize;
        if fits < workers {
            workers = fits.max(1);
            reasons.push(format!(
                "memory: {} MB per worker and {} MB available: at most {workers} workers in half of it",
                megabytes(mix.worker_rss_bytes),
                megabytes(available)
            ));
        }
    }
    let share = mix.cpu_share.max(1.0 / MAX_THREADS as f64);
    let threads = ((1.0 / share).round() as usize).clamp(1, MAX_THREADS);
    reasons.push(format!(
        "a request spends {:.0} % of its {} ms on the CPU: {threads} threads keep one core busy (S / CPU = {}), more would only wait for the GIL",
        mix.cpu_share * 100.0,
        millis(mix.service_secs),
        fixed(mix.service_secs / mix.cpu_secs.max(1e-9), 1)
    ));
    if mix.cpu_share < 1.0 / MAX_THREADS as f64 {
        reasons.push(format!(
            "capped at {MAX_THREADS} threads: an app this I/O-bound may be better served by an async server"
        ));
    }
    let capacity = Capacity { workers, threads, cores };
    let service = Service { mean_secs: mix.service_secs, cpu_secs: mix.cpu_secs };
    Suggestion { workers, threads, reasons, capacity_rps: capacity.max_throughput(service) }
}

/// T/2, T and 2T (without repeats).
fn neighbours(threads: usize) -> Vec<usize> {
    let mut values = vec![(threads / 2).max(1), threads, (threads * 2).min(2 * MAX_THREADS)];
    values.dedup();
    values
}

fn describe(r: &Recommendation) -> String {
    let mix = &r.mix;
    let mut out = format!(
        "measured: {} requests, service time {} ms of which CPU {} ms ({:.0} %), worker RSS {} MB\n\n",
        mix.requests,
        millis(mix.service_secs),
        millis(mix.cpu_secs),
        mix.cpu_share * 100.0,
        megabytes(mix.worker_rss_bytes)
    );
    let s = &r.suggestion;
    out.push_str(&format!("suggestion: headway serve -w {} -t {}\n", s.workers, s.threads));
    for reason in &s.reasons {
        out.push_str(&format!("  - {reason}\n"));
    }
    out.push_str(&format!("  - expected capacity: {} requests/s\n\n", fixed(s.capacity_rps, 1)));
    let header = ["workers", "threads", "clients", "rps", "ideal rps", "p50 ms", "p99 ms", "errors"];
    let mut table = Table::new("confirmation: the same load on T/2, T and 2T threads", &header, 0);
    for p in &r.sweep {
        table.push(vec![
            p.workers.to_string(),
            p.threads.to_string(),
            p.clients.to_string(),
            fixed(p.rps, 1),
            fixed(p.ideal_rps, 1),
            millis(p.p50_secs),
            millis(p.p99_secs),
            p.errors.to_string(),
        ]);
    }
    out.push_str(
        &table.note("the suggestion is right when T reaches (nearly) the rps of 2T with a lower p99 than T/2").render(),
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mix(service_ms: f64, cpu_ms: f64, rss_mb: u64) -> Mix {
        Mix {
            requests: 100,
            service_secs: service_ms / 1e3,
            cpu_secs: cpu_ms / 1e3,
            cpu_share: cpu_ms / service_ms,
            worker_rss_bytes: rss_mb << 20,
        }
    }

    #[test]
    fn seed_001_fake_work_gets_six_threads_per_core() {
        // 50 ms CPU + 250 ms I/O: a thread is on the CPU 1/6 of the time.
        let s = suggest(&mix(300.0, 50.0, 40), 2, 8 << 30);
        assert_eq!((s.workers, s.threads), (2, 6));
        // 12 slots / 0.3 s = 40/s, and the CPU allows 2 / 0.05 = 40/s.
        assert!((s.capacity_rps - 40.0).abs() < 1e-6, "{}", s.capacity_rps);
    }

    #[test]
    fn cpu_bound_apps_get_one_thread_and_io_bound_apps_are_capped() {
        assert_eq!(suggest(&mix(101.0, 100.0, 40), 4, 8 << 30).threads, 1);
        let io_bound = suggest(&mix(500.0, 1.0, 40), 2, 8 << 30);
        assert_eq!(io_bound.threads, MAX_THREADS);
        assert!(io_bound.reasons.iter().any(|r| r.contains("async")));
    }

    #[test]
    fn memory_limits_the_workers() {
        // 1 GiB workers, 3 GiB available: half of it holds one.
        let s = suggest(&mix(300.0, 50.0, 1024), 8, 3 << 30);
        assert_eq!(s.workers, 1);
        assert!(s.reasons.iter().any(|r| r.starts_with("memory")));
    }

    #[test]
    fn the_sweep_brackets_the_suggestion() {
        assert_eq!(neighbours(6), vec![3, 6, 12]);
        assert_eq!(neighbours(1), vec![1, 2]);
    }
}
