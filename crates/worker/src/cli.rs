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
    let invocation = headway::Invocation {
        program: this_program(argv.first().map(Path::new)),
        python: python.filter(|path| !path.as_os_str().is_empty()),
    };
    Ok(py.detach(move || headway::run(argv, invocation)))
}

/// The command that runs headway again: the script we were started as, when it is one.
fn this_program(argv0: Option<&Path>) -> PathBuf {
    argv0
        .filter(|path| path.is_file() && path.extension().is_none_or(|ext| ext != "py"))
        .and_then(|path| std::path::absolute(path).ok())
        .or_else(|| std::env::current_exe().ok())
        .unwrap_or_else(|| "headway".into())
}
