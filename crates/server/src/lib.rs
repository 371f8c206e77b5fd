//! The serving core of headway: a front that owns every client connection, one FIFO queue,
//! and W worker processes with T slots each.
//!
//! A request's path, in the order the modules are met:
//! [`front`] accepts it on a [`listener`] and reads it completely (the rules for that are in
//! the `headway_http1` crate), builds a job and puts it in the [`queue`]; a free slot of some worker
//! ([`workers`]) takes the oldest job, runs it on the worker's process, and passes the response
//! back (the body through a [`spool`]); the front writes it to the client. The workers'
//! supervisor keeps their processes running; [`ops`] counts what happens and shows it; [`config`]
//! is where every setting comes from, and [`server`] puts the parts together.

pub mod byte_budget;
pub mod config;
pub mod front;
pub mod listener;
pub mod ops;
pub mod queue;
pub mod read_ahead;
mod server;
pub mod spool;
pub mod tally;
pub mod workers;

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

pub use config::ServeArgs;
pub use ops::control::{stats, workers, StatsArgs, WorkersArgs};

/// Runs `headway serve`. `given`: the command line as clap matched it; the settings it does not
/// give come from the environment and the config file (see [`config::layers`]). `python`: the
/// interpreter that runs this code (when headway was started from Python), the worker's
/// interpreter unless another is set.
/// `give_back_memory`: has the allocator return to the system what it has held free for a while
/// (the front calls it every second; see [`server::run`]).
pub fn serve(given: &clap::ArgMatches, python: Option<PathBuf>, give_back_memory: fn()) -> anyhow::Result<ExitCode> {
    let (mut args, sources) = config::layers::resolve(given)?;
    args.python = args.python.or(python);
    let print_config = args.print_config;
    if print_config {
        print!("{}", sources.render());
    }
    let (log_level, log_format) = (args.log_level.clone(), args.log_format);
    let config = config::Config::from_args(args).map_err(|err| match sources.origin_of_flag_in(&err.to_string()) {
        Some(origin) => anyhow::anyhow!("{err:#} ({origin})"),
        None => err,
    })?;
    if print_config {
        return Ok(ExitCode::SUCCESS);
    }
    init_logging(&log_level, log_format)?;
    raise_open_files_limit();
    // Both change the environment, which is sound only while this is the only thread.
    let from_systemd =
        server::FromSystemd { notifier: ops::systemd::Notifier::from_env(), sockets: listener::take_listen_fds()? };
    front_runtime(config.front_threads).build()?.block_on(server::run(config, from_systemd, give_back_memory))
}

/// The runtime the front runs on, with `threads` threads.
pub(crate) fn front_runtime(threads: usize) -> tokio::runtime::Builder {
    let mut runtime = match threads {
        1 => tokio::runtime::Builder::new_current_thread(),
        threads => {
            let mut builder = tokio::runtime::Builder::new_multi_thread();
            builder.worker_threads(threads);
            builder
        }
    };
    // A front thread with nothing left to do yields its CPU before it sleeps. Where workers and
    // clients share the cores with it, they run first, and the thread comes back to a batch of
    // responses and requests instead of being woken for each one (a doorbell, a client's bytes),
    // preempting a worker that may hold the GIL. Alone on its CPU, it costs one system call.
    // docs/design/scheduling.md, "The front yields before it sleeps", has what it changed.
    runtime.on_thread_park(std::thread::yield_now);
    runtime.enable_all();
    runtime
}

/// Every client connection holds a descriptor, and an open WebSocket two (the client's and the
/// worker's): the soft limit many systems start processes with (1024) would turn clients away
/// long before the machine is busy. Raised to the hard limit, as Go's runtime and nginx's
/// `worker_rlimit_nofile` do; the workers inherit it.
fn raise_open_files_limit() {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit and setrlimit read and write only the struct they are given.
    let raised = unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0
            && (limit.rlim_cur >= limit.rlim_max || {
                let wanted = libc::rlimit { rlim_cur: limit.rlim_max, rlim_max: limit.rlim_max };
                libc::setrlimit(libc::RLIMIT_NOFILE, &wanted) == 0
            })
    };
    if !raised {
        tracing::warn!("cannot raise the open files limit ({}): {}", limit.rlim_cur, std::io::Error::last_os_error());
    }
}

fn init_logging(level: &str, format: config::LogFormat) -> anyhow::Result<()> {
    let filter = tracing_subscriber::EnvFilter::try_new(format!("headway_server={level}"))
        .map_err(|_| anyhow::anyhow!("--log-level must be error, warn, info, debug or trace, not '{level}'"))?;
    let log = tracing_subscriber::fmt().with_env_filter(filter).with_target(false).with_writer(std::io::stderr);
    match format {
        config::LogFormat::Text => log.with_ansi(std::io::stderr().is_terminal()).init(),
        config::LogFormat::Json => log.json().flatten_event(true).init(),
    }
    Ok(())
}
