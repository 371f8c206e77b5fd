//! The `headway` command line, defined once. The standalone binary (`src/main.rs`) and the
//! Python extension of a pip install (`crates/extension`, whose `main` the `headway` script calls)
//! both hand their arguments to [`run`], so `headway --help` is the same however it was built.
//! Each subcommand lives in its own crate; this file only parses the command line and hands
//! over, so the whole product shows in one place.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{CommandFactory as _, FromArgMatches as _, Parser, Subcommand};

mod allocator;

use allocator::{give_back_memory, Allocator};

/// Declared here, so the standalone binary and the Python extension (front and native worker)
/// both use it ([`allocator`]).
#[global_allocator]
static ALLOCATOR: Allocator = Allocator;

/// What `headway --version` prints after the name: the version, the commit and the target this
/// was built for (from `build.rs`), so a bug report says which build it is about. The binary and
/// the Python extension both show this line.
pub const VERSION: &str =
    concat!(env!("CARGO_PKG_VERSION"), " (commit ", env!("HEADWAY_COMMIT"), ", ", env!("HEADWAY_TARGET"), ")");

#[derive(Parser)]
#[command(name = "headway", version = VERSION, about = "An application server with one queue", long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve a WSGI or ASGI app (or any HTTP server given with --cmd) behind one FIFO queue.
    // Boxed, as `Load`: their many flags make them far larger than the other commands.
    Serve(Box<headway_server::ServeArgs>),
    /// Print the stats of a running server, read from its --control address.
    Stats(headway_server::StatsArgs),
    /// Ask a running server for one worker more (add) or fewer (remove), on its --control
    /// address; as SIGTTIN and SIGTTOU.
    Workers(headway_server::WorkersArgs),
    /// Generate HTTP load and report latency percentiles (hey-compatible output).
    Load(Box<headway_load::LoadArgs>),
    /// Run the seed experiments against headway and the peer servers.
    Lab(headway_lab::LabArgs),
}

/// How this process was started, for the subcommands that start headway or its worker again.
pub struct Invocation {
    /// The command that runs headway: this binary, or the `headway` script of a pip install.
    pub program: PathBuf,
    /// The interpreter that has the `headway` package, when it is known for sure (inside it);
    /// otherwise `serve` looks for one (`--python`, `$HEADWAY_PYTHON`, next to the program).
    pub python: Option<PathBuf>,
}

/// Runs the command line `args` (the program name first) and returns the exit status. Nothing
/// here exits the process: a usage error or `--help` is printed and its status returned.
pub fn run(mut args: Vec<OsString>, invocation: Invocation) -> u8 {
    if args.get(1).is_some_and(|command| command == "load") {
        // hey's one-dash long flags (-host, -disable-keepalive), so hey command lines work as is.
        args = headway_load::hey_style_args(args);
    }
    let serving = args.get(1).is_some_and(|command| command == "serve");
    let parsed = Cli::command().try_get_matches_from(args).and_then(|matches| {
        let cli = Cli::from_arg_matches(&matches)?;
        Ok((matches, cli))
    });
    let (matches, cli) = match parsed {
        Ok(parsed) => parsed,
        Err(mut err) => {
            if serving {
                point_to_bind(&mut err);
            }
            let _ = err.print();
            return u8::try_from(err.exit_code()).unwrap_or(2);
        }
    };
    let result = match cli.command {
        // `serve` takes what clap matched: settings not given as flags come from the environment
        // and a config file, and only the matches tell which were given.
        Command::Serve(_) => {
            let matched = matches.subcommand_matches("serve").expect("serve was matched");
            headway_server::serve(matched, invocation.python, give_back_memory)
        }
        Command::Stats(args) => headway_server::stats(args),
        Command::Workers(args) => headway_server::workers(args),
        Command::Load(args) => headway_load::run(*args),
        Command::Lab(args) => headway_lab::run(args, &invocation.program),
    };
    match result {
        Ok(code) => status_of(code),
        Err(err) => {
            eprintln!("headway: {err:#}");
            1
        }
    }
}

/// uvicorn's and granian's `--host` and `--port` are one flag in `headway serve`, as in gunicorn:
/// the error for either names it, rather than a flag whose name merely looks alike.
fn point_to_bind(err: &mut clap::Error) {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    let Some(ContextValue::String(given)) = err.get(ContextKind::InvalidArg) else { return };
    let flag = given.split('=').next().unwrap_or_default();
    if err.kind() == ErrorKind::UnknownArgument && ["--host", "--port"].contains(&flag) {
        let tip = format!("the address is one flag: '-b HOST:PORT' (--bind), e.g. -b 0.0.0.0:8000, not {flag}");
        err.insert(ContextKind::Suggested, ContextValue::StyledStrs(vec![tip.into()]));
    }
}

/// The number behind an [`ExitCode`] (the subcommands return one; a caller such as the Python
/// extension needs the number).
fn status_of(code: ExitCode) -> u8 {
    (0..=u8::MAX).find(|&n| ExitCode::from(n) == code).unwrap_or(1)
}
