//! The worker's own lines and the app's tracebacks, on Python's `sys.stderr`, and the GIL as the
//! worker core's [`Runtime`]. The front collects the worker's stderr, and going through
//! `sys.stderr` keeps our lines in order with whatever the app writes there.

use headway_worker_core::runtime::Runtime;
use pyo3::prelude::*;
use pyo3::{intern, PyErr};

/// One line, `headway worker: MESSAGE`, flushed at once.
pub fn log(py: Python<'_>, message: &str) {
    let line = format!("headway worker: {message}\n");
    let written = (|| -> PyResult<()> {
        let stderr = py.import(intern!(py, "sys"))?.getattr(intern!(py, "stderr"))?;
        stderr.call_method1(intern!(py, "write"), (&line,))?;
        stderr.call_method0(intern!(py, "flush"))?;
        Ok(())
    })();
    if written.is_err() {
        eprint!("{line}"); // sys.stderr is gone (closed or replaced by something broken)
    }
}

/// The exception's traceback, as Python prints it, on `sys.stderr`. Unlike `PyErr_Print`, this
/// never exits the process when the exception is a `SystemExit`.
pub fn print_traceback(py: Python<'_>, error: &PyErr) {
    error.display(py);
}

/// A Python slot thread as the worker core sees it: waits run with the GIL let go, lines go to
/// `sys.stderr` ([`log`]).
#[derive(Clone, Copy)]
pub struct Gil<'py>(pub Python<'py>);

impl Runtime for Gil<'_> {
    fn unlocked(&self, wait: &mut (dyn FnMut() + Send)) {
        self.0.detach(wait);
    }

    fn log(&self, message: &str) {
        log(self.0, message);
    }
}
