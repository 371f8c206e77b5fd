//! One connection's requests on the worker's own socket (the worker run without the front), as
//! the ASGI side sees them: each request's scope, the body as `read` calls, and the response as a
//! head followed by body pieces. Every method is called on the slot thread that took the
//! connection, and the ones that may wait let go of the GIL while they do (the transport's rule),
//! so the asyncio loop runs other requests meanwhile.

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use super::scope::{Head, ScopeMaker};
use crate::log::Gil;
use crate::wsgi::input::read_error;
use crate::wsgi::response::validate;
use headway_http1::body::BodyKind;
use headway_worker_core::http::reader::RECV_BYTES;
use headway_worker_core::http::request::Request;
use headway_worker_core::http::HttpError;
use headway_worker_core::transport::{Next, Transport};

const OVER: &str = "the connection this belongs to is over";

#[pyclass(module = "headway._native", name = "Channel")]
pub struct Channel {
    /// Some until the channel is given back to the slot.
    transport: Option<Box<dyn Transport>>,
    is_head: bool,
    /// Request body bytes not read yet, when the request said how many.
    body_left: Option<u64>,
    /// The body has been read to its end.
    body_done: bool,
    /// The transport has been told that the app reads the body.
    body_wanted: bool,
    head_sent: bool,
}

impl Channel {
    pub fn new(transport: Box<dyn Transport>) -> Self {
        Channel {
            transport: Some(transport),
            is_head: false,
            body_left: None,
            body_done: true,
            body_wanted: false,
            head_sent: false,
        }
    }

    pub fn take_transport(&mut self) -> Option<Box<dyn Transport>> {
        self.transport.take()
    }

    fn transport(&mut self) -> PyResult<&mut Box<dyn Transport>> {
        self.transport.as_mut().ok_or_else(|| PyRuntimeError::new_err(OVER))
    }

    fn read_body<'py>(&mut self, py: Python<'py>) -> PyResult<(Bound<'py, PyBytes>, bool)> {
        if self.body_done {
            return Ok((PyBytes::new(py, b""), false));
        }
        if !self.body_wanted {
            self.body_wanted = true;
            self.transport()?.body_wanted(&Gil(py))?;
        }
        let mut data = Vec::new();
        let limit = self.body_left.map_or(RECV_BYTES, |left| left.min(RECV_BYTES as u64) as usize);
        let read = self.transport()?.read_body(&Gil(py), limit, &mut data).map_err(read_error)?;
        self.body_left = self.body_left.map(|left| left.saturating_sub(read as u64));
        self.body_done = read == 0 || self.body_left == Some(0);
        Ok((PyBytes::new(py, &data), !self.body_done))
    }

    fn start(&mut self, request: &Request) {
        self.is_head = request.is_head();
        (self.body_left, self.body_done) = match request.body {
            BodyKind::Length(length) => (Some(length), false),
            BodyKind::Chunked | BodyKind::UntilClose => (None, false),
            BodyKind::Empty => (Some(0), true),
        };
        self.body_wanted = false;
        self.head_sent = false;
    }
}

#[pymethods]
impl Channel {
    /// The next request's scope (with a copy of the lifespan `state`, under `root_path`) and
    /// whether a body follows, or None when no more come this way (a malformed one is answered
    /// here, with the status it deserves).
    fn next_request<'py>(
        &mut self,
        py: Python<'py>,
        state: Py<PyDict>,
        root_path: String,
    ) -> PyResult<Option<(Bound<'py, PyDict>, bool)>> {
        let request = match self.transport()?.next_request(&Gil(py)) {
            Next::Request(request) => request,
            Next::Refused(error) => {
                self.transport()?.send_error(&Gil(py), &error, false);
                return Ok(None);
            }
            Next::Closed => return Ok(None),
        };
        self.start(&request);
        let scope = ScopeMaker::new(py, false, state, root_path)?.make(py, &Head::from_request(&request))?;
        Ok(Some((scope, !self.body_done)))
    }

    /// The next piece of the request body and whether more follows (`(b"", False)` at its end).
    fn read<'py>(&mut self, py: Python<'py>) -> PyResult<(Bound<'py, PyBytes>, bool)> {
        self.read_body(py)
    }

    /// Sends the response head (`status` as `"200 OK"`, `headers` as a list of str pairs, checked
    /// as for WSGI) with the first body piece; `more` is false when that piece is the whole body.
    fn respond(
        &mut self,
        py: Python<'_>,
        status: &Bound<'_, PyAny>,
        headers: &Bound<'_, PyAny>,
        data: &[u8],
        more: bool,
    ) -> PyResult<()> {
        let head = validate(status, headers)?;
        let length = (!more).then_some(data.len() as u64);
        self.head_sent = true;
        self.transport()?.send_head(&Gil(py), &head, length, data)?;
        if !more {
            self.transport()?.end_response(&Gil(py))?;
        }
        Ok(())
    }

    /// Sends more of the body; `more` false ends it.
    fn send(&mut self, py: Python<'_>, data: &[u8], more: bool) -> PyResult<()> {
        if !self.head_sent {
            return Err(PyRuntimeError::new_err("a response body before its head"));
        }
        let transport = self.transport()?;
        if !data.is_empty() {
            transport.send_body(&Gil(py), data)?;
        }
        if !more {
            transport.end_response(&Gil(py))?;
        }
        Ok(())
    }

    /// The app failed or returned without finishing its response: a 500 if nothing was sent,
    /// else the response is cut so the client cannot take it for complete.
    fn fail(&mut self, py: Python<'_>) -> PyResult<()> {
        let (head_sent, is_head) = (self.head_sent, self.is_head);
        let transport = self.transport()?;
        if head_sent {
            transport.abandon(&Gil(py));
        } else {
            transport.send_error(
                &Gil(py),
                &HttpError::new(http::StatusCode::INTERNAL_SERVER_ERROR, "Internal Server Error"),
                is_head,
            );
        }
        Ok(())
    }

    /// After a complete response: whether another request can come this way.
    fn finish(&mut self, py: Python<'_>) -> PyResult<bool> {
        Ok(self.transport()?.finish(&Gil(py)))
    }
}
