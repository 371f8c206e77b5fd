//! `start_response` and `write`: the checks PEP 3333 asks of a server, with the messages of
//! the Python worker this replaced, and the hand-over of head and body to the transport.
//!
//! The app gets this object itself as `start_response` (it is callable); calling it returns
//! the bound `write`. Once the head is on the wire, `exc_info` re-raises (PEP 3333).

use std::io;

use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyString, PyTuple};
use pyo3::{ffi, intern};

use super::file_wrapper::FileWrapper;
use crate::log::Gil;
use headway_http1::fields::{self, is_token};
use headway_worker_core::http::reader::ReadError;
use headway_worker_core::http::response::{field_size, is_hop_by_hop, put_field, ResponseHead};
use headway_worker_core::http::HttpError;
use headway_worker_core::transport::Transport;
use http::StatusCode;

const NO_START: &str = "the app returned without calling start_response";
const OVER: &str = "the request this belongs to is over";

#[pyclass(module = "headway._native", name = "StartResponse")]
pub struct Response {
    /// Some while the request runs.
    transport: Option<Box<dyn Transport>>,
    head: Option<ResponseHead>,
    headers_sent: bool,
    /// A send failed: the client is gone.
    broken: bool,
    /// What was wrong with the request body, when reading it failed that way.
    body_error: Option<HttpError>,
}

#[pymethods]
impl Response {
    #[pyo3(signature = (status, headers, exc_info=None))]
    fn __call__<'py>(
        slf: &Bound<'py, Self>,
        status: &Bound<'py, PyAny>,
        headers: &Bound<'py, PyAny>,
        exc_info: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        {
            let this = slf.borrow();
            match exc_info {
                Some(exc_info) if this.headers_sent => {
                    let value = exc_info.get_item(1)?;
                    let value = value.call_method1(intern!(py, "with_traceback"), (exc_info.get_item(2)?,))?;
                    return Err(PyErr::from_value(value));
                }
                Some(_) => {}
                None if this.head.is_some() => {
                    return Err(PyRuntimeError::new_err("start_response called a second time without exc_info"))
                }
                None => {}
            }
        }
        let head = validate(status, headers)?;
        slf.borrow_mut().head = Some(head);
        slf.getattr(intern!(py, "write"))
    }

    /// The write() callable of start_response.
    fn write(&mut self, py: Python<'_>, data: &Bound<'_, PyAny>) -> PyResult<()> {
        self.write_bytes(py, data)
    }
}

impl Response {
    pub fn new(transport: Box<dyn Transport>) -> Self {
        Response { transport: Some(transport), head: None, headers_sent: false, broken: false, body_error: None }
    }

    pub fn take_transport(&mut self) -> Option<Box<dyn Transport>> {
        self.transport.take()
    }

    pub fn headers_sent(&self) -> bool {
        self.headers_sent
    }

    pub fn broken(&self) -> bool {
        self.broken
    }

    #[cfg(test)]
    pub fn current_head(&self) -> Option<ResponseHead> {
        self.head.clone()
    }

    #[cfg(test)]
    pub fn mark_headers_sent(&mut self) {
        self.headers_sent = true;
    }

    pub fn body_error(&self) -> Option<HttpError> {
        self.body_error.clone()
    }

    fn transport(&mut self) -> PyResult<&mut Box<dyn Transport>> {
        self.transport.as_mut().ok_or_else(|| PyRuntimeError::new_err(OVER))
    }

    /// Runs a send; a failure means the client is gone.
    fn sending(
        &mut self,
        py: Python<'_>,
        send: impl FnOnce(&mut dyn Transport, Python<'_>) -> io::Result<()>,
    ) -> PyResult<()> {
        let result = send(self.transport()?.as_mut(), py);
        result.map_err(|error| {
            self.broken = true;
            PyErr::from(error)
        })
    }

    /// Sends the head with the first body bytes `data`, then runs `then`; `missing` is the
    /// error when start_response was not called.
    fn send_head(
        &mut self,
        py: Python<'_>,
        missing: &'static str,
        body_length: Option<u64>,
        data: &[u8],
        then: impl FnOnce(&mut dyn Transport, Python<'_>) -> io::Result<()>,
    ) -> PyResult<()> {
        let Some(head) = self.head.as_ref() else { return Err(PyRuntimeError::new_err(missing)) };
        let transport = self.transport.as_mut().ok_or_else(|| PyRuntimeError::new_err(OVER))?;
        self.headers_sent = true;
        let result = transport.send_head(&Gil(py), head, body_length, data).and_then(|()| then(transport.as_mut(), py));
        result.map_err(|error| {
            self.broken = true;
            PyErr::from(error)
        })
    }

    /// Sends one piece of body: the head goes with the first non-empty one (PEP 3333).
    pub fn write_bytes(&mut self, py: Python<'_>, data: &Bound<'_, PyAny>) -> PyResult<()> {
        let bytes = body_bytes(data)?.as_bytes();
        if self.head.is_none() {
            return Err(PyRuntimeError::new_err("the app sent body bytes before calling start_response"));
        }
        if bytes.is_empty() {
            Ok(())
        } else if self.headers_sent {
            self.sending(py, |transport, py| transport.send_body(&Gil(py), bytes))
        } else {
            self.send_head(py, "", None, bytes, |_, _| Ok(()))
        }
    }

    /// A list or tuple of bytes: its size is known, so it gets a Content-Length and one send.
    pub fn send_sequence(&mut self, py: Python<'_>, result: &Bound<'_, PyAny>) -> PyResult<()> {
        if self.head.is_none() {
            return Err(PyRuntimeError::new_err(NO_START));
        }
        let items: Vec<Bound<'_, PyBytes>> = match result.cast_exact::<PyList>() {
            Ok(list) => list.iter().map(|item| body_bytes(&item).cloned()).collect::<PyResult<_>>()?,
            Err(_) => result
                .cast_exact::<PyTuple>()?
                .iter()
                .map(|item| body_bytes(&item).cloned())
                .collect::<PyResult<_>>()?,
        };
        let total: usize = items.iter().map(|item| item.as_bytes().len()).sum();
        let joined;
        let body: &[u8] = match items.as_slice() {
            [] => b"",
            [one] => one.as_bytes(),
            many => {
                joined = many.iter().flat_map(|item| item.as_bytes()).copied().collect::<Vec<u8>>();
                &joined
            }
        };
        self.send_head(py, NO_START, Some(total as u64), body, |_, _| Ok(()))?;
        self.end(py)
    }

    /// Sends a `wsgi.file_wrapper` with sendfile; false if that is not possible (no
    /// Content-Length, or a file-like object without a real file behind it).
    pub fn send_file(&mut self, py: Python<'_>, wrapper: &FileWrapper) -> PyResult<bool> {
        if self.headers_sent || self.head.as_ref().is_none_or(|head| head.content_length.is_none()) {
            return Ok(false);
        }
        let filelike = wrapper.filelike().bind(py);
        let position = (|| -> PyResult<(i32, u64)> {
            let fd = filelike.call_method0(intern!(py, "fileno"))?.extract()?;
            let offset = filelike.call_method0(intern!(py, "tell"))?.extract()?;
            Ok((fd, offset))
        })();
        let (fd, offset) = match position {
            Ok(position) => position,
            Err(error)
                if error.is_instance_of::<pyo3::exceptions::PyAttributeError>(py)
                    || error.is_instance_of::<pyo3::exceptions::PyOSError>(py)
                    || error.is_instance_of::<PyValueError>(py) =>
            {
                return Ok(false); // io.UnsupportedOperation is both OSError and ValueError
            }
            Err(error) => return Err(error),
        };
        self.send_head(py, NO_START, None, b"", |transport, py| transport.send_file(&Gil(py), fd, offset))?;
        Ok(true)
    }

    /// Ends the response: the head if nothing was sent yet, then what ends the body.
    pub fn end(&mut self, py: Python<'_>) -> PyResult<()> {
        if !self.headers_sent {
            self.send_head(py, NO_START, Some(0), b"", |_, _| Ok(()))?;
        }
        self.sending(py, |transport, py| transport.end_response(&Gil(py)))
    }

    /// Appends up to `limit` bytes of the request body to `out` (for wsgi.input).
    pub fn read_body(&mut self, py: Python<'_>, limit: usize, out: &mut Vec<u8>) -> Result<usize, ReadError> {
        let transport = self.transport.as_mut().ok_or(ReadError::PeerClosed)?;
        let result = transport.read_body(&Gil(py), limit, out);
        if let Err(ReadError::Http(error)) = &result {
            self.body_error = Some(error.clone());
        }
        result
    }

    /// As [`Response::read_body`], into memory the caller made to size ([`Transport::read_body_into`]).
    pub fn read_body_into(&mut self, py: Python<'_>, out: &mut [u8]) -> Result<usize, ReadError> {
        let transport = self.transport.as_mut().ok_or(ReadError::PeerClosed)?;
        transport.read_body_into(&Gil(py), out)
    }

    /// The body's bytes left to read, when the transport knows it exactly.
    pub fn body_left(&self) -> Option<u64> {
        self.transport.as_ref().and_then(|transport| transport.body_left())
    }

    /// Before the first read of the body (sends `100 Continue` when the client waits for it).
    pub fn body_wanted(&mut self, py: Python<'_>) -> PyResult<()> {
        if self.headers_sent {
            return Ok(());
        }
        self.sending(py, |transport, py| transport.body_wanted(&Gil(py)))
    }
}

/// A piece of body, which must be exactly `bytes`.
fn body_bytes<'a, 'py>(data: &'a Bound<'py, PyAny>) -> PyResult<&'a Bound<'py, PyBytes>> {
    data.cast_exact::<PyBytes>()
        .map_err(|_| PyTypeError::new_err(format!("a WSGI response body must be bytes, not {}", type_name(data))))
}

pub fn type_name(value: &Bound<'_, PyAny>) -> String {
    value.get_type().name().map(|name| name.to_string()).unwrap_or_else(|_| "?".to_owned())
}

pub fn repr(value: &Bound<'_, PyAny>) -> String {
    value.repr().map(|repr| repr.to_string()).unwrap_or_else(|_| "?".to_owned())
}

/// The latin-1 bytes of a str, or the UnicodeEncodeError of a str that has other characters.
fn latin1_bytes<'py>(text: &Bound<'py, PyString>) -> PyResult<Bound<'py, PyBytes>> {
    // SAFETY: `text` is a live str; the call returns a new reference or NULL with an exception set.
    unsafe {
        Bound::from_owned_ptr_or_err(text.py(), ffi::PyUnicode_AsLatin1String(text.as_ptr()))
            .map(|bytes| bytes.cast_into_unchecked())
    }
}

/// Validates what the app gave start_response and encodes it.
pub fn validate(status: &Bound<'_, PyAny>, headers: &Bound<'_, PyAny>) -> PyResult<ResponseHead> {
    let (status, code) = validate_status(status)?;
    let Ok(headers) = headers.cast_exact::<PyList>() else {
        return Err(PyTypeError::new_err("response headers must be a list of (name, value) tuples"));
    };
    let mut content_length = None;
    let mut has_date = false;
    let mut names = Vec::with_capacity(headers.len());
    for header in headers.iter() {
        let pair = match header.cast_exact::<PyTuple>() {
            Ok(pair) if pair.len() == 2 => pair.clone(),
            _ => {
                return Err(PyTypeError::new_err(format!(
                    "each response header must be a (name, value) tuple, not {}",
                    repr(&header)
                )))
            }
        };
        let name = pair.get_item(0)?;
        let value = pair.get_item(1)?;
        let name_bytes = header_name(&name)?;
        if name_bytes.as_bytes().eq_ignore_ascii_case(b"content-length") {
            let length = content_length_value(&value)?;
            if content_length.is_some_and(|seen| seen != length) {
                return Err(PyValueError::new_err("conflicting Content-Length headers"));
            }
            content_length = Some(length);
        } else if name_bytes.as_bytes().eq_ignore_ascii_case(b"date") {
            has_date = true;
        }
        names.push((name_bytes, value));
    }
    let header_block = encode_headers(&names)?;
    Ok(ResponseHead { status, code, header_block, content_length, has_date })
}

fn validate_status(status: &Bound<'_, PyAny>) -> PyResult<(Vec<u8>, StatusCode)> {
    let Ok(text) = status.cast_exact::<PyString>() else {
        return Err(PyTypeError::new_err(format!("status must be a str such as '200 OK', not {}", type_name(status))));
    };
    let bad =
        || PyValueError::new_err(format!("bad status {}: expected three digits, a space and a reason", repr(status)));
    let encoded = match latin1_bytes(text) {
        Ok(bytes) => bytes.as_bytes().to_vec(),
        Err(not_latin1) => {
            // The shape is judged first, as the characters say it.
            let text = text.to_cow()?;
            return Err(if status_shape_ok(text.as_bytes()) { not_latin1 } else { bad() });
        }
    };
    if !status_shape_ok(&encoded) {
        return Err(bad());
    }
    let code = encoded[..3].iter().fold(0u16, |code, digit| code * 10 + u16::from(digit - b'0'));
    let code = StatusCode::from_u16(code).map_err(|_| bad())?;
    Ok((encoded, code))
}

/// `[1-9][0-9]{2} [^\r\n]*`
pub fn status_shape_ok(status: &[u8]) -> bool {
    matches!(status, [b'1'..=b'9', b'0'..=b'9', b'0'..=b'9', b' ', rest @ ..] if !rest.iter().any(|&b| b == b'\r' || b == b'\n'))
}

fn header_name<'py>(name: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyBytes>> {
    let Ok(text) = name.cast::<PyString>() else {
        return Err(PyTypeError::new_err(format!("header name must be a str, not {}", type_name(name))));
    };
    // A name that is not latin-1 is no token either: check_name says so.
    let bytes = latin1_bytes(text).unwrap_or_else(|_| PyBytes::new(name.py(), b""));
    check_name(bytes.as_bytes(), name, "a WSGI app (PEP 3333)")?;
    Ok(bytes)
}

/// A response header name (its bytes, and as the app gave it, for the message) must be a token
/// and not one of the hop-by-hop fields: framing is the server's job (PEP 3333, and every ASGI
/// server takes it so). `whose` names the app's kind in the message.
pub fn check_name(bytes: &[u8], given: &Bound<'_, PyAny>, whose: &str) -> PyResult<()> {
    if !is_token(bytes) {
        return Err(PyValueError::new_err(format!("bad header name {}", repr(given))));
    }
    if is_hop_by_hop(bytes) {
        return Err(PyValueError::new_err(format!("hop-by-hop header {} is not allowed from {whose}", repr(given))));
    }
    Ok(())
}

fn content_length_value(value: &Bound<'_, PyAny>) -> PyResult<u64> {
    let bad = || PyValueError::new_err(format!("bad Content-Length header {}", repr(value)));
    let text = value.cast_exact::<PyString>().map_err(|_| bad())?;
    let bytes = latin1_bytes(text).map_err(|_| bad())?;
    fields::content_length([bytes.as_bytes()]).ok().flatten().ok_or_else(bad)
}

/// `Name: value\r\n` for each header, written straight from the latin-1 bytes Python encodes,
/// into one block made to size (a latin-1 str has a byte a character). Every value is checked to
/// be a str first, then for CR and LF, then for latin-1, so the error names the worst problem
/// whatever its position.
fn encode_headers(headers: &[(Bound<'_, PyBytes>, Bound<'_, PyAny>)]) -> PyResult<Vec<u8>> {
    let mut size = 0;
    for (name, value) in headers {
        let Ok(text) = value.cast::<PyString>() else {
            return Err(PyTypeError::new_err("response header values must be str"));
        };
        // Only a size to start from: a str subclass whose own `__len__` fails sizes it short.
        size += field_size(name.as_bytes().len(), text.len().unwrap_or(0));
    }
    let mut block = Vec::with_capacity(size);
    let mut not_latin1 = false;
    for (name, value) in headers {
        let text = value.cast::<PyString>()?;
        let utf8;
        let encoded = latin1_bytes(text);
        let bytes = match &encoded {
            Ok(bytes) => bytes.as_bytes(),
            Err(_) => {
                not_latin1 = true;
                utf8 = text.to_cow()?;
                utf8.as_bytes()
            }
        };
        if bytes.iter().any(|&b| b == b'\r' || b == b'\n') {
            return Err(PyValueError::new_err("a response header value contains CR or LF"));
        }
        put_field(&mut block, name.as_bytes(), bytes);
    }
    if not_latin1 {
        return Err(PyValueError::new_err("response headers must be latin-1 (PEP 3333)"));
    }
    Ok(block)
}
