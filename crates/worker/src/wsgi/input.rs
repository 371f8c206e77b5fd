//! `wsgi.input`: the request body, read from the transport only as the app asks for it, with
//! exact sizes (`read(n)` returns n bytes unless the body ends first) and the line methods of
//! a file. The first read that needs bytes from the client tells the transport, which sends
//! `100 Continue` if the client waits for it.

use pyo3::create_exception;
use pyo3::exceptions::{PyConnectionError, PyException};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use super::response::Response;
use headway_worker_core::http::reader::{ReadError, RECV_BYTES};

create_exception!(
    _native,
    PeerClosed,
    PyConnectionError,
    "The client closed the connection in the middle of the request body."
);
create_exception!(_native, HttpBodyError, PyException, "The request body is malformed (a bad chunked encoding).");

#[pyclass(module = "headway._native", name = "Input")]
pub struct Input {
    response: Py<Response>,
    /// Read from the transport, not yet given to the app.
    buffer: Vec<u8>,
    /// The transport has been told that the app reads the body.
    wanted: bool,
}

impl Input {
    pub fn new(response: Py<Response>) -> Self {
        Input { response, buffer: Vec::new(), wanted: false }
    }

    /// Appends up to `limit` bytes of the body to the buffer; 0 at its end.
    fn read_some(&mut self, py: Python<'_>, limit: usize) -> PyResult<usize> {
        let mut response = self.wanted_by(py)?;
        response.read_body(py, limit, &mut self.buffer).map_err(read_error)
    }

    /// With nothing buffered and the length of the body's rest known, reads up to `size` bytes
    /// (all, for `None`) straight into the `bytes` the app gets, not through the buffer: one copy
    /// fewer for a large upload. `None`: the length is not known, or the read is small (the
    /// buffer serves those, a large read's worth at a time).
    fn read_direct<'py>(&mut self, py: Python<'py>, size: Option<usize>) -> PyResult<Option<Bound<'py, PyBytes>>> {
        let left = self.response.try_borrow(py)?.body_left();
        let Some(left) = left.map(|left| usize::try_from(left).unwrap_or(usize::MAX)) else { return Ok(None) };
        let count = size.map_or(left, |size| size.min(left));
        if count < RECV_BYTES {
            return Ok(None);
        }
        let mut response = self.wanted_by(py)?;
        let bytes = PyBytes::new_with(py, count, |out| {
            let mut filled = 0;
            while filled < count {
                match response.read_body_into(py, &mut out[filled..]).map_err(read_error)? {
                    0 => return Err(read_error(ReadError::PeerClosed)), // ended short of its length
                    read => filled += read,
                }
            }
            Ok(())
        })?;
        Ok(Some(bytes))
    }

    /// The response, once the transport has been told that the app reads the body.
    fn wanted_by<'py>(&mut self, py: Python<'py>) -> PyResult<PyRefMut<'py, Response>> {
        let mut response = self.response.bind(py).try_borrow_mut()?;
        if !self.wanted {
            self.wanted = true;
            response.body_wanted(py)?;
        }
        Ok(response)
    }

    /// Hands the first `count` buffered bytes to the app.
    fn take<'py>(&mut self, py: Python<'py>, count: usize) -> Bound<'py, PyBytes> {
        let bytes = PyBytes::new(py, &self.buffer[..count]);
        self.buffer.drain(..count);
        bytes
    }
}

/// A failed read of the request body, as the app sees it.
pub fn read_error(error: ReadError) -> PyErr {
    match error {
        ReadError::Http(error) => HttpBodyError::new_err(error.reason),
        ReadError::PeerClosed => PeerClosed::new_err("the client closed the connection in the middle of the body"),
        ReadError::Io(error) => PyErr::from(error),
    }
}

/// A size argument as Python file objects take it: None or negative means "all".
fn limit(size: Option<isize>) -> Option<usize> {
    size.and_then(|size| usize::try_from(size).ok())
}

#[pymethods]
impl Input {
    #[pyo3(signature = (size=-1))]
    fn read<'py>(&mut self, py: Python<'py>, size: Option<isize>) -> PyResult<Bound<'py, PyBytes>> {
        let size = limit(size);
        if self.buffer.is_empty() {
            if let Some(bytes) = self.read_direct(py, size)? {
                return Ok(bytes);
            }
        }
        while size.is_none_or(|size| self.buffer.len() < size) {
            let want = size.map_or(RECV_BYTES, |size| size - self.buffer.len());
            if self.read_some(py, want)? == 0 {
                break;
            }
        }
        let count = size.map_or(self.buffer.len(), |size| size.min(self.buffer.len()));
        Ok(self.take(py, count))
    }

    #[pyo3(signature = (size=-1))]
    fn readline<'py>(&mut self, py: Python<'py>, size: Option<isize>) -> PyResult<Bound<'py, PyBytes>> {
        let size = limit(size);
        let mut searched = 0;
        let end = loop {
            if let Some(newline) = memchr::memchr(b'\n', &self.buffer[searched..]) {
                break searched + newline + 1;
            }
            if size.is_some_and(|size| size <= self.buffer.len()) {
                break self.buffer.len();
            }
            searched = self.buffer.len();
            if self.read_some(py, RECV_BYTES)? == 0 {
                break self.buffer.len();
            }
        };
        let end = size.map_or(end, |size| size.min(end));
        Ok(self.take(py, end))
    }

    #[pyo3(signature = (hint=-1))]
    fn readlines<'py>(slf: &Bound<'py, Self>, hint: Option<isize>) -> PyResult<Vec<Bound<'py, PyBytes>>> {
        let py = slf.py();
        let hint = limit(hint).filter(|&hint| hint > 0);
        let mut lines = Vec::new();
        let mut total = 0;
        loop {
            let line = slf.borrow_mut().readline(py, None)?;
            if line.as_bytes().is_empty() {
                return Ok(lines);
            }
            total += line.as_bytes().len();
            lines.push(line);
            if hint.is_some_and(|hint| hint <= total) {
                return Ok(lines);
            }
        }
    }

    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__<'py>(&mut self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyBytes>>> {
        let line = self.readline(py, None)?;
        Ok((!line.as_bytes().is_empty()).then_some(line))
    }
}
