//! The `headway` command: one binary for the server (`serve`, `stats`), the load generator
//! (`load`) and the lab (`lab`). Each subcommand lives in its own crate; this file only parses
//! the command line and hands over, so `headway --help` shows the whole product in one place.

use std::process::ExitCode;

use clap::{CommandFactory as _, FromArgMatches as _, Parser, Subcommand};

#[derive(Parser)]
#[command(name = "headway", version, about = "An application server with one queue", long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve a WSGI app (or any HTTP server given with --cmd) behind one FIFO queue.
    Serve(headway_server::ServeArgs),
    /// Print the stats of a running server, read from its --control address.
    Stats(headway_server::StatsArgs),
    /// Generate HTTP load and report latency percentiles (hey-compatible output).
    Load(headway_load::LoadArgs),
    /// Run the seed experiments against headway and the peer servers.
    Lab(headway_lab::LabArgs),
}

fn main() -> ExitCode {
    let mut args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if args.get(1).is_some_and(|command| command == "load") {
        // hey's one-dash long flags (-host, -disable-keepalive), so hey command lines work as is.
        args = headway_load::hey_style_args(args);
    }
    let matches = Cli::command().get_matches_from(args);
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|err| err.exit());
    let result = match cli.command {
        // `serve` takes what clap matched: settings not given as flags come from the environment
        // and a config file, and only the matches tell which were given.
        Command::Serve(_) => headway_server::serve(matches.subcommand_matches("serve").expect("serve was matched")),
        Command::Stats(args) => headway_server::stats(args),
        Command::Load(args) => headway_load::run(args),
        Command::Lab(args) => headway_lab::run(args),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("headway: {err:#}");
            ExitCode::FAILURE
        }
    }
}
