//! An awaitable whose result is already there: what `receive` and `send` return when they could
//! do their work at once, which under load is nearly always. Awaiting it gives its result without
//! a trip through the event loop, and it costs no coroutine frame (granian's `receive` and `send`
//! work the same way).

use pyo3::exceptions::PyStopIteration;
use pyo3::prelude::*;

#[pyclass(module = "headway._native", name = "Ready", frozen, freelist = 64)]
pub struct Ready {
    /// None: awaiting gives None.
    result: Option<Py<PyAny>>,
}

impl Ready {
    pub fn new(result: Option<Py<PyAny>>) -> Ready {
        Ready { result }
    }
}

#[pymethods]
impl Ready {
    fn __await__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    /// Ends the iteration at once: the await's value travels in the StopIteration.
    fn __next__(&self, py: Python<'_>) -> PyResult<Option<()>> {
        match &self.result {
            None => Ok(None),
            Some(result) => Err(PyStopIteration::new_err((result.clone_ref(py),))),
        }
    }
}
