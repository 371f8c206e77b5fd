//! `headway lab`: the seed experiments as named scenarios, run against headway (with its Python
//! worker, its Rack worker, or Puma inside) and whichever peers are installed (Puma, gunicorn,
//! granian, uvicorn, Node), each started by the lab with the same W processes x T request slots
//! and the same app on 127.0.0.1, and each measured against the ideal of a server with one FIFO
//! queue. `recommend` answers the seeds' common question: how many workers and threads for my app
//! on this machine?
//!
//! The `headway` binary calls [`run`] with the parsed [`LabArgs`].

mod chart;
mod cpu;
mod html;
mod ideal;
mod measure;
mod pipeline;
mod process_tree;
mod progress;
mod recommend;
mod report;
mod rounds;
mod scenarios;
mod servers;
mod table;
mod twins;
mod usage;

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{bail, Context as _};

pub use recommend::RecommendArgs;

use crate::progress::Progress;
use crate::report::{describe_servers, describe_sessions, LabReport, Machine, ServerInfo};
use crate::scenarios::Size;
use crate::servers::{detect, Environment, HeadwayBinary, Peer, ServerKind};
use crate::usage::UsageError;

#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:\n  headway lab list\n  \
    headway lab run keepalive-tail\n  \
    headway lab run long-tail-sweep mixed-tail --servers headway,puma,headway+puma --report lab-report\n  \
    headway lab run keepalive-tail --servers headway-rack,puma\n  \
    headway lab run all --quick --json\n  \
    headway lab recommend --path '/fake_work?cpu_ms=50&iowait_ms=250'")]
pub struct LabArgs {
    #[command(subcommand)]
    command: LabCommand,
}

#[derive(clap::Subcommand, Debug)]
enum LabCommand {
    /// List the scenarios, what each runs, and which servers this machine has
    List(ListArgs),
    /// Run scenarios against headway and the peers, and compare each row with the ideal
    Run(RunArgs),
    /// Measure an app's CPU / I/O mix and suggest workers x threads for this machine
    Recommend(RecommendArgs),
}

#[derive(clap::Args, Debug)]
struct ListArgs {
    #[command(flatten)]
    binary: HeadwayBinary,
}

#[derive(clap::Args, Debug)]
struct RunArgs {
    /// Scenarios to run, in order (`headway lab list` shows them), or `all`
    #[arg(required = true, value_name = "SCENARIO")]
    scenarios: Vec<String>,

    /// Servers to compare, comma-separated: headway, headway+puma, headway-rack, puma, gunicorn,
    /// granian, hypercorn, uvicorn, node [default: every one that is installed]
    #[arg(long, value_delimiter = ',', value_name = "NAMES")]
    servers: Vec<String>,

    /// Small sizes (a few seconds per server): to try the lab, or for tests
    #[arg(long)]
    quick: bool,

    /// Multiply the number of requests of each case
    #[arg(long, default_value_t = 1.0, value_name = "FACTOR")]
    scale: f64,

    /// Run each server configuration N times, the servers in turn (their order reversed every
    /// other round), and show each row's median round: on a shared machine one run is a sample.
    /// Every round is in --json and --report. scale-out runs once whatever N is
    #[arg(long, default_value_t = 1, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    rounds: u16,

    /// Write an HTML report with charts (DIR/index.html) and the results (DIR/results.json)
    #[arg(long, value_name = "DIR")]
    report: Option<PathBuf>,

    /// Print the results as JSON on stdout instead of the tables
    #[arg(long)]
    json: bool,

    /// Start each server in a session of its own. With the kernel's autogroup on (Linux's
    /// default) a session is one scheduling group, as a service in a cgroup of its own is: the
    /// server's processes together get a fair share of the CPUs against the lab's load
    /// generator. By default the servers share the lab's session, and each thread is scheduled
    /// on its own
    #[arg(long)]
    own_sessions: bool,

    #[command(flatten)]
    binary: HeadwayBinary,
}

/// `headway lab`. A wrong scenario or server name prints one line and exits with 2; a run in
/// which a server did not start or a case failed exits with 1 after printing what it measured.
/// `this_program` is the command that runs headway again (what `headway serve` is started with).
pub fn run(args: LabArgs, this_program: &Path) -> anyhow::Result<ExitCode> {
    let outcome = match args.command {
        LabCommand::List(args) => list(&args, this_program),
        LabCommand::Run(args) => run_scenarios(&args, this_program),
        LabCommand::Recommend(args) => recommend::run(&args, this_program),
    };
    match outcome {
        Ok(code) => Ok(code),
        Err(err) if err.downcast_ref::<UsageError>().is_some() => {
            eprintln!("headway lab: {err}");
            Ok(ExitCode::from(2))
        }
        Err(err) => Err(err),
    }
}

fn list(args: &ListArgs, this_program: &Path) -> anyhow::Result<ExitCode> {
    let env = args.binary.environment(this_program)?;
    let mut out = String::from("Scenarios (headway lab run NAME):\n");
    for scenario in scenarios::ALL {
        let seed = if scenario.seed.is_empty() { String::new() } else { format!(" (seed {})", scenario.seed) };
        out.push_str(&format!("\n  {}{seed}\n    {}\n    sizes: {}\n", scenario.name, scenario.about, scenario.sizes));
    }
    out.push_str("\nServers (--servers):\n");
    for kind in ServerKind::all() {
        match detect(kind, &env) {
            Ok(peer) => out.push_str(&format!("  {:<13} {} ({})\n", kind.name(), peer.version, peer.found)),
            Err(skipped) => out.push_str(&format!("  {:<13} {skipped}\n", kind.name())),
        }
    }
    std::io::stdout().lock().write_all(out.as_bytes())?;
    Ok(ExitCode::SUCCESS)
}

fn chosen_scenarios(names: &[String]) -> anyhow::Result<Vec<&'static scenarios::Scenario>> {
    if names.iter().any(|name| name == "all") {
        return Ok(scenarios::ALL.to_vec());
    }
    names
        .iter()
        .map(|name| {
            scenarios::find(name)
                .ok_or_else(|| UsageError(format!("unknown scenario '{name}' (headway lab list shows them)")).into())
        })
        .collect()
}

fn chosen_servers(names: &[String]) -> anyhow::Result<Vec<ServerKind>> {
    if names.is_empty() {
        return Ok(ServerKind::all().collect());
    }
    let mut kinds = Vec::new();
    for name in names {
        let kind = ServerKind::parse(name).ok_or_else(|| {
            let known: Vec<&str> = ServerKind::all().map(ServerKind::name).collect();
            UsageError(format!("unknown server '{name}' (one of {})", known.join(", ")))
        })?;
        if !kinds.contains(&kind) {
            kinds.push(kind);
        }
    }
    Ok(kinds)
}

/// Finds each server, printing a line for each one that is skipped.
fn installed(kinds: &[ServerKind], env: &Environment) -> (Vec<Peer>, Vec<servers::Skipped>) {
    let mut peers = Vec::new();
    let mut skipped = Vec::new();
    for &kind in kinds {
        match detect(kind, env) {
            Ok(peer) => peers.push(peer),
            Err(skip) => {
                eprintln!("{skip}");
                skipped.push(skip);
            }
        }
    }
    (peers, skipped)
}

fn run_scenarios(args: &RunArgs, this_program: &Path) -> anyhow::Result<ExitCode> {
    let chosen = chosen_scenarios(&args.scenarios)?;
    let kinds = chosen_servers(&args.servers)?;
    if !(args.scale.is_finite() && args.scale > 0.0) {
        return Err(UsageError(format!("--scale must be a positive number, not {}", args.scale)).into());
    }
    let started = Instant::now();
    let mut env = args.binary.environment(this_program)?;
    env.own_sessions = args.own_sessions;
    let machine = Machine::here(env.cores);
    let (peers, skipped) = installed(&kinds, &env);
    if peers.is_empty() {
        bail!("none of the chosen servers is installed");
    }
    let servers: Vec<ServerInfo> = peers.iter().map(ServerInfo::of).collect();
    eprint!(
        "{}\n{}\nservers:\n{}",
        machine.describe(),
        describe_sessions(args.own_sessions),
        describe_servers(&servers)
    );
    stop_servers_on_interrupt();

    let size = Size { quick: args.quick, scale: args.scale, rounds: usize::from(args.rounds) };
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let progress = Progress::new();
    let mut results = Vec::new();
    for scenario in chosen {
        let result = scenarios::run(scenario, size, &peers, &env, &runtime, &progress);
        eprintln!("{}: {} rows in {:.0} s", result.name, result.rows.len(), result.elapsed_secs);
        if !args.json {
            let mut out = std::io::stdout().lock();
            for table in &result.tables {
                writeln!(out, "{}", table.render())?;
            }
            out.flush()?;
        }
        results.push(result);
    }
    let failed = results.iter().any(|r| !r.failures.is_empty());
    let report = LabReport {
        headway_version: env!("CARGO_PKG_VERSION").into(),
        machine,
        own_sessions: args.own_sessions,
        size,
        servers,
        skipped,
        scenarios: results,
        elapsed_secs: started.elapsed().as_secs_f64(),
    };
    if args.json {
        let mut out = std::io::stdout().lock();
        serde_json::to_writer_pretty(&mut out, &report)?;
        writeln!(out)?;
    }
    if let Some(dir) = &args.report {
        write_report(dir, &report)?;
        eprintln!("report: {}", dir.join("index.html").display());
    }
    Ok(if failed { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}

fn write_report(dir: &Path, report: &LabReport) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let json = serde_json::to_string_pretty(report)? + "\n";
    std::fs::write(dir.join("results.json"), json).with_context(|| format!("cannot write into {}", dir.display()))?;
    std::fs::write(dir.join("index.html"), html::page(report))
        .with_context(|| format!("cannot write into {}", dir.display()))?;
    Ok(())
}

/// On Ctrl-C (or SIGTERM) kill every server the lab started, then exit: they run in process
/// groups of their own, so the terminal's signal does not reach them.
fn stop_servers_on_interrupt() {
    std::thread::spawn(|| {
        let Ok(runtime) = tokio::runtime::Builder::new_current_thread().enable_all().build() else { return };
        runtime.block_on(async {
            let Ok(mut terminate) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) else {
                return;
            };
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = terminate.recv() => {}
            }
            servers::stop_all_live();
            eprintln!("\nheadway lab: interrupted; the servers it started are stopped");
            std::process::exit(130);
        });
    });
}
