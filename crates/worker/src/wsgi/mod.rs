//! PEP 3333: the environ, `start_response` and `write`, `wsgi.input`, `wsgi.file_wrapper`, and
//! the running of the app for one request; knows nothing of sockets or HTTP framing, only the
//! [`Transport`] that carries the request and the response.

pub mod environ;
pub mod file_wrapper;
pub mod input;
pub mod response;
#[cfg(test)]
mod tests;

use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};
use pyo3::{intern, Py, PyRefMut};

use crate::app::{request_object, Application};
use crate::log::{log, print_traceback, Gil};
use file_wrapper::FileWrapper;
use headway_worker_core::http::request::Request;
use headway_worker_core::http::HttpError;
use headway_worker_core::transport::{serve_each, Transport};
use input::{HttpBodyError, Input, PeerClosed};
use response::Response;

/// What every request of this worker shares: the app and the environ keys that never change.
pub struct App {
    pub app: Py<PyAny>,
    pub base_environ: Py<PyDict>,
    /// `--root-path`: SCRIPT_NAME, taken off PATH_INFO ("" for none).
    pub root_path: String,
}

impl Application for App {
    /// Serves the requests that come through `transport` until it ends or must be closed; gives
    /// the transport back, unless it was lost with a Python object that could not be made.
    fn serve(&self, py: Python<'_>, transport: Box<dyn Transport>) -> Option<Box<dyn Transport>> {
        serve_each(&Gil(py), transport, &mut |transport, request| self.handle(py, transport, request))
    }
}

impl App {
    /// Runs the app for one request; returns the transport and whether it can carry another.
    fn handle(
        &self,
        py: Python<'_>,
        transport: Box<dyn Transport>,
        request: Request,
    ) -> Option<(Box<dyn Transport>, bool)> {
        let is_head = request.is_head();
        let response = request_object(py, Py::new(py, Response::new(transport)))?;
        let outcome = self.run_app(py, &response, &request);
        let mut state = state(py, &response);
        let mut transport = state.take_transport()?;
        let keep = match outcome {
            Ok(()) => transport.finish(&Gil(py)),
            Err(error) => {
                state.app_failed(py, transport.as_mut(), &error, is_head);
                transport.abandon(&Gil(py));
                false
            }
        };
        Some((transport, keep))
    }

    fn run_app(&self, py: Python<'_>, response: &Py<Response>, request: &Request) -> PyResult<()> {
        let input = Py::new(py, Input::new(response.clone_ref(py)))?;
        let environ = environ::build(py, self.base_environ.bind(py), &self.root_path, request, input)?;
        let result = self.app.bind(py).call1((environ, response.clone_ref(py)))?;
        let sent = send_result(py, response, &result);
        let closed = close_result(py, &result);
        sent.and(closed)
    }
}

/// The response's state. An app thread that kept `start_response` or `wsgi.input` may hold it
/// while it waits inside a send or a read (without the GIL): wait for it, without the GIL too.
fn state<'py>(py: Python<'py>, response: &'py Py<Response>) -> PyRefMut<'py, Response> {
    loop {
        if let Ok(state) = response.try_borrow_mut(py) {
            return state;
        }
        py.detach(std::thread::yield_now);
    }
}

/// Sends the iterable the app returned, then ends the response.
fn send_result(py: Python<'_>, response: &Py<Response>, result: &Bound<'_, PyAny>) -> PyResult<()> {
    let headers_sent = state(py, response).headers_sent();
    if !headers_sent && (result.is_exact_instance_of::<PyList>() || result.is_exact_instance_of::<PyTuple>()) {
        return state(py, response).send_sequence(py, result);
    }
    if let Ok(wrapper) = result.cast_exact::<FileWrapper>() {
        if state(py, response).send_file(py, &wrapper.borrow())? {
            return state(py, response).end(py);
        }
    }
    for data in result.try_iter()? {
        let data = data?;
        state(py, response).write_bytes(py, &data)?;
    }
    state(py, response).end(py)
}

/// PEP 3333: `close()` is called on the app's iterable whatever happened; an error in it is
/// the app's and is only logged.
fn close_result(py: Python<'_>, result: &Bound<'_, PyAny>) -> PyResult<()> {
    // A list or tuple, what most apps return, has none: asking would raise and catch an
    // AttributeError, a tenth of a hello world's time in the worker.
    if result.is_exact_instance_of::<PyList>() || result.is_exact_instance_of::<PyTuple>() {
        return Ok(());
    }
    let close = intern!(py, "close");
    if !result.hasattr(close).unwrap_or(false) {
        return Ok(());
    }
    if let Err(error) = result.call_method0(close) {
        if !error.is_instance_of::<PyException>(py) {
            return Err(error);
        }
        log(py, "the app's iterable failed in close():");
        print_traceback(py, &error);
    }
    Ok(())
}

impl Response {
    /// Answers for an exception out of the app (the connection is closed after it).
    fn app_failed(&mut self, py: Python<'_>, transport: &mut dyn Transport, error: &PyErr, is_head: bool) {
        if !error.is_instance_of::<PyException>(py) {
            // SystemExit, KeyboardInterrupt and the like: the slot survives them all.
            log(py, "unexpected error on a connection; closing it:");
            print_traceback(py, error);
            return;
        }
        if self.broken() || error.is_instance_of::<PeerClosed>(py) {
            return; // the client went away: nothing to answer
        }
        if error.is_instance_of::<HttpBodyError>(py) {
            // A malformed chunked body, met while the app read it.
            if let (Some(body_error), false) = (self.body_error(), self.headers_sent()) {
                transport.send_error(&Gil(py), &body_error, is_head);
            }
            return;
        }
        print_traceback(py, error);
        if self.headers_sent() {
            log(py, "the app failed after the response started; closing the connection");
        } else {
            transport.send_error(
                &Gil(py),
                &HttpError::new(http::StatusCode::INTERNAL_SERVER_ERROR, "Internal Server Error"),
                is_head,
            );
        }
    }
}
