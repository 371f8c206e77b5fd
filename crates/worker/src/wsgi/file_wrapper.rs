//! `wsgi.file_wrapper`: lets the worker send a file with sendfile when it can (a real file,
//! a known Content-Length). Iterating it reads blocks, which is what happens otherwise.

use pyo3::prelude::*;
use pyo3::{intern, Py};

#[pyclass(module = "headway._native", name = "FileWrapper")]
pub struct FileWrapper {
    filelike: Py<PyAny>,
    blksize: isize,
}

impl FileWrapper {
    pub fn filelike(&self) -> &Py<PyAny> {
        &self.filelike
    }
}

#[pymethods]
impl FileWrapper {
    #[new]
    #[pyo3(signature = (filelike, blksize=64 * 1024))]
    fn new(filelike: Py<PyAny>, blksize: isize) -> Self {
        FileWrapper { filelike, blksize }
    }

    #[getter(filelike)]
    fn get_filelike(&self, py: Python<'_>) -> Py<PyAny> {
        self.filelike.clone_ref(py)
    }

    #[getter]
    fn blksize(&self) -> isize {
        self.blksize
    }

    /// Closes the file, if it can be closed.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let filelike = self.filelike.bind(py);
        if filelike.hasattr(intern!(py, "close"))? {
            filelike.call_method0(intern!(py, "close"))?;
        }
        Ok(())
    }

    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        let data = self.filelike.bind(py).call_method1(intern!(py, "read"), (self.blksize,))?;
        Ok(data.is_truthy()?.then_some(data))
    }
}
