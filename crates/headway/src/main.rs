//! The standalone `headway` binary (`cargo build`); the command line itself is in `lib.rs`.

use std::process::ExitCode;

fn main() -> ExitCode {
    let program = std::env::current_exe().unwrap_or_else(|_| "headway".into());
    let invocation = headway::Invocation { program, python: None };
    ExitCode::from(headway::run(std::env::args_os().collect(), invocation))
}
