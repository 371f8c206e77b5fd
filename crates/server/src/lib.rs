//! The serving core of headway: a front that owns every client connection, one FIFO queue,
//! and W worker processes with T slots each.
//!
//! A request's path, in the order the modules are met:
//! [`front`] accepts and reads it completely (the rules for that are in [`http1`]), builds a
//! [`job`] and puts it in the [`queue`]; a free [`slot`] of some [`worker`] takes the oldest
//! job, runs it on its worker, and passes the response back (the body through a [`spool`]);
//! the front writes it to the client. The [`supervisor`] keeps the workers running; [`stats`]
//! counts what happens and [`control`] shows it.

pub mod access_log;
pub mod config;
pub mod control;
pub mod front;
pub mod http1;
pub mod job;
pub mod queue;
mod server;
pub mod slot;
pub mod spool;
pub mod stats;
pub mod supervisor;
pub mod tally;
pub mod worker;

use std::io::IsTerminal;
use std::process::ExitCode;

pub use config::ServeArgs;
pub use control::{stats, StatsArgs};

/// Runs `headway serve`.
pub fn serve(args: ServeArgs) -> anyhow::Result<ExitCode> {
    init_logging(&args.log_level)?;
    let config = config::Config::from_args(args)?;
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(server::run(config))
}

fn init_logging(level: &str) -> anyhow::Result<()> {
    let filter = tracing_subscriber::EnvFilter::try_new(format!("headway_server={level}"))
        .map_err(|_| anyhow::anyhow!("--log-level must be error, warn, info, debug or trace, not '{level}'"))?;
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_target(false)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr)
        .init();
    Ok(())
}
