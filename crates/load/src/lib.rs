//! `headway load`: an HTTP/1.1 and HTTP/2 load generator that measures tails honestly.
//!
//! Closed loop like hey (`-c`, `-n`, `-z`), open loop like wrk2 (`--rate`, latency from the
//! intended send time), keep-alive on or off, pipelining, unix sockets, https ([`tls`]), HDR
//! histograms whose memory does not grow with the number of requests, hey-compatible text and
//! full JSON. With `--websocket`, the same loops send messages on WebSockets and time their
//! echoes; with `--http2`, each connection carries `--streams` requests at once ([`http2`]).
//!
//! The `headway` binary calls [`run`] with the parsed [`LoadArgs`]; the lab builds a
//! [`LoadConfig`] and awaits [`run_load`] for a [`Report`].

mod cli;
mod client;
mod conn;
mod http1;
mod http2;
mod plan;
mod progress;
mod record;
mod report;
mod runner;
mod schedule;
mod settings;
mod thread;
mod tls;
mod websocket;

use std::io::Write;
use std::process::ExitCode;

pub use cli::{hey_style_args, parse_duration, LoadArgs, OutputFormat};
pub use record::{ErrorCount, ErrorKind, SecondStats};
pub use report::{
    HistogramBucket, LatencyStats, Percentile, PhaseStats, Phases, Report, Settings, SpectrumPoint, TargetReport,
    PERCENTILES,
};
pub use settings::{Arrival, LoadConfig, Target, TlsOptions, UsageError, DEFAULT_MESSAGE_SIZE, DEFAULT_REQUESTS};

/// Runs a load and returns its report. Awaitable from any tokio runtime: the load itself runs on
/// `config.threads` threads of its own, each with a current-thread runtime, so the caller's
/// runtime only waits. Fails if the configuration is wrong ([`UsageError`]) or no connection
/// could be made at all.
pub async fn run_load(config: LoadConfig) -> anyhow::Result<Report> {
    runner::execute(config, false).await
}

/// `headway load`: runs, prints the report (hey text or JSON) on stdout. A wrong option or an
/// unreachable target prints one line on stderr and exits non-zero (2 for options, 1 otherwise).
pub fn run(args: LoadArgs) -> anyhow::Result<ExitCode> {
    let outcome = args.to_config().and_then(|config| {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        runtime.block_on(runner::execute(config, progress::wanted()))
    });
    let report = match outcome {
        Ok(report) => report,
        Err(err) => {
            eprintln!("headway load: {err:#}");
            let usage = err.downcast_ref::<UsageError>().is_some();
            return Ok(ExitCode::from(if usage { 2 } else { 1 }));
        }
    };
    let text = match args.output {
        OutputFormat::Text => report.to_hey_text(),
        OutputFormat::Json => serde_json::to_string_pretty(&report)? + "\n",
    };
    std::io::stdout().lock().write_all(text.as_bytes())?;
    Ok(ExitCode::SUCCESS)
}
