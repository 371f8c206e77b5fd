//! One transport's requests, as the ASGI side of the worker sees them: the request head in the
//! shape of an ASGI `http` scope, the body as `read` calls, and the response as a head followed
//! by body pieces. Served by a slot thread, every method is called on that thread, and the ones
//! that may wait let go of the GIL while they do (the transport's rule), so the asyncio loop
//! runs other requests meanwhile. Served by the loop itself ([`Channel::on_loop`], over the
//! hop), no method waits: `read` raises BlockingIOError when nothing has come yet, and output
//! that cannot go at once waits for `flush`; the loop runs those two on another thread.

use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList};

use crate::http::reader::RECV_BYTES;
use crate::http::request::{parse_request, Request};
use crate::http::HttpError;
use crate::transport::{Next, Transport};
use crate::wsgi::environ::bytes_of_latin1;
use crate::wsgi::input::read_error;
use crate::wsgi::response::validate;

const OVER: &str = "the connection this belongs to is over";

/// What a request's head gives the ASGI scope: method, raw path, query string, HTTP version,
/// headers (lowercased names), scheme, client address, and whether a body follows.
type Head<'py> = (
    String,
    Bound<'py, PyBytes>,
    Bound<'py, PyBytes>,
    &'static str,
    Bound<'py, PyList>,
    &'static str,
    Option<String>,
    bool,
);

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
    /// Served on the loop's thread: operations may not wait.
    on_loop: bool,
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
            on_loop: false,
        }
    }

    /// A channel served on the asyncio loop's thread, which must never wait.
    pub fn on_loop(mut transport: Box<dyn Transport>) -> Self {
        transport.set_waiting(false);
        Channel { on_loop: true, ..Channel::new(transport) }
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
            self.transport()?.body_wanted(py)?;
        }
        let mut data = Vec::new();
        let limit = self.body_left.map_or(RECV_BYTES, |left| left.min(RECV_BYTES as u64) as usize);
        let read = self.transport()?.read_body(py, limit, &mut data).map_err(read_error)?;
        self.body_left = self.body_left.map(|left| left.saturating_sub(read as u64));
        self.body_done = read == 0 || self.body_left == Some(0);
        Ok((PyBytes::new(py, &data), !self.body_done))
    }

    fn start(&mut self, request: &Request) {
        self.is_head = request.is_head();
        self.body_left = request.content_length;
        self.body_done = !request.chunked && request.content_length.unwrap_or(0) == 0;
        self.body_wanted = false;
        self.head_sent = false;
    }
}

#[pymethods]
impl Channel {
    /// The next request's head, or None when no more come this way (a malformed one is
    /// answered here, with the status it deserves).
    fn next_request<'py>(&mut self, py: Python<'py>) -> PyResult<Option<Head<'py>>> {
        let request = match self.transport()?.next_request(py) {
            Next::Request(request) => request,
            Next::Refused(error) => {
                self.transport()?.send_error(py, &error, false);
                return Ok(None);
            }
            Next::Closed => return Ok(None),
        };
        self.start(&request);
        scope_head(py, request, !self.body_done).map(Some)
    }

    /// The hop slot this channel's requests come through, when they come through the hop.
    #[getter]
    fn slot(&self) -> Option<usize> {
        self.transport.as_ref().and_then(|transport| transport.hop_slot())
    }

    /// The next piece of the request body and whether more follows (`(b"", False)` at its end).
    /// On the loop, `wait` lets it wait for the piece (call it on another thread then).
    #[pyo3(signature = (wait=false))]
    fn read<'py>(&mut self, py: Python<'py>, wait: bool) -> PyResult<(Bound<'py, PyBytes>, bool)> {
        if !wait || !self.on_loop {
            return self.read_body(py);
        }
        self.transport()?.set_waiting(true);
        let read = self.read_body(py);
        self.transport()?.set_waiting(false);
        read
    }

    /// Whether output waits for `flush`.
    #[getter]
    fn pending(&self) -> bool {
        self.transport.as_ref().is_some_and(|transport| transport.pending())
    }

    /// Sends the output kept back, waiting as long as it takes (call it off the loop's thread).
    fn flush(&mut self, py: Python<'_>) -> PyResult<()> {
        Ok(self.transport()?.flush(py)?)
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
        self.transport()?.send_head(py, &head, length, data)?;
        if !more {
            self.transport()?.end_response(py)?;
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
            transport.send_body(py, data)?;
        }
        if !more {
            transport.end_response(py)?;
        }
        Ok(())
    }

    /// The app failed or returned without finishing its response: a 500 if nothing was sent,
    /// else the response is cut so the client cannot take it for complete.
    fn fail(&mut self, py: Python<'_>) -> PyResult<()> {
        let (head_sent, is_head) = (self.head_sent, self.is_head);
        let transport = self.transport()?;
        if head_sent {
            transport.abandon(py);
        } else {
            transport.send_error(py, &HttpError::new(500, "Internal Server Error"), is_head);
        }
        Ok(())
    }

    /// After a complete response: whether another request can come this way.
    fn finish(&mut self, py: Python<'_>) -> PyResult<bool> {
        Ok(self.transport()?.finish(py))
    }
}

/// A request head's own name (lowercased, as ASGI wants it) from its CGI environ key.
fn header_name(key: &str) -> Vec<u8> {
    let name = key.strip_prefix("HTTP_").unwrap_or(key);
    name.bytes().map(|b| if b == b'_' { b'-' } else { b.to_ascii_lowercase() }).collect()
}

/// The head of a request that came on a connection of its own (a WebSocket handshake), in the
/// shape `Channel.next_request` gives; a malformed one raises ValueError with what is wrong.
#[pyfunction]
pub fn parse_head<'py>(py: Python<'py>, head: &[u8]) -> PyResult<Head<'py>> {
    let request = parse_request(head).map_err(|error| PyValueError::new_err(error.message))?;
    scope_head(py, request, false)
}

fn scope_head(py: Python<'_>, request: Request, has_body: bool) -> PyResult<Head<'_>> {
    let headers = PyList::empty(py);
    for (key, value) in &request.headers {
        headers.append((PyBytes::new(py, &header_name(key)), PyBytes::new(py, &bytes_of_latin1(value))))?;
    }
    let scheme = if request.is_https() { "https" } else { "http" };
    let client = request.client().map(str::to_owned);
    Ok((
        request.method,
        PyBytes::new(py, &bytes_of_latin1(&request.path)),
        PyBytes::new(py, &bytes_of_latin1(&request.query)),
        request.version.as_str().trim_start_matches("HTTP/"),
        headers,
        scheme,
        client,
        has_body,
    ))
}
