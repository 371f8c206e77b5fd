//! `headway` as installed by pip: the `headway` script calls [`main`], which runs the same
//! command line as the standalone binary (`headway::run`).
//!
//! maturin puts one kind of artifact in a wheel (PyO3/maturin#368), so the command ships inside
//! the extension rather than as a second binary. The front never runs Python: the GIL is let go
//! for the whole run. Python's SIGINT handler would turn Ctrl-C into a KeyboardInterrupt once
//! the command returns (after the front drained), so SIGINT goes back to the default first and
//! the front installs its own handlers exactly as in the binary.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use pyo3::prelude::*;

/// Runs the headway command line `argv` (as `sys.argv`); returns the exit status.
#[pyfunction]
pub fn main(py: Python<'_>, argv: Vec<OsString>) -> PyResult<u8> {
    let signal = py.import("signal")?;
    signal.call_method1("signal", (signal.getattr("SIGINT")?, signal.getattr("SIG_DFL")?))?;
    let python: Option<PathBuf> = py.import("sys")?.getattr("executable")?.extract::<Option<PathBuf>>()?;
    let python = python.filter(|path| !path.as_os_str().is_empty());
    let invocation =
        headway::Invocation { program: this_program(argv.first().map(Path::new), python.as_deref()), python };
    Ok(py.detach(move || headway::run(argv, invocation)))
}

/// The command that runs headway again: the script we were started as, else (`python -m
/// headway`) the `headway` script installed next to the interpreter.
fn this_program(argv0: Option<&Path>, python: Option<&Path>) -> PathBuf {
    let script = argv0.filter(|path| path.is_file() && path.extension().is_none_or(|ext| ext != "py"));
    let beside_python = python.and_then(Path::parent).map(|dir| dir.join("headway")).filter(|path| path.is_file());
    script
        .and_then(|path| std::path::absolute(path).ok())
        .or(beside_python)
        .or_else(|| std::env::current_exe().ok())
        .unwrap_or_else(|| "headway".into())
}
