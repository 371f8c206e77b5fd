//! One request of the `http` scope that the asyncio loop serves itself, from the hop: the app's
//! `receive` and `send`, native, on the loop's thread.
//!
//! Each does its work at once and returns an awaitable that is already done ([`Ready`]): a body
//! record is on the ring (the front puts a small body there before it publishes the request), a
//! response fits the ring. Only when it cannot (a body many rings long that the front is still
//! writing, a response larger than the ring) does it return an asyncio future, and asks the front
//! to ring the loop's work bell when the ring moves ([`Exchange::arm_for_body`],
//! [`Exchange::arm_for_output`]); the loop's turn then pokes the cycle ([`HttpCycle::poke`]),
//! which carries on and settles the future. No thread takes part, and no message passes through
//! Python code of ours.
//!
//! The front marks a request whose client has gone and rings the bell too: `receive` says
//! `http.disconnect` from then on and `send` raises `ConnectionError`, so an endless stream ends
//! and frees its place. After the response is complete, `receive` says `http.disconnect` too.

use std::borrow::Cow;
use std::io;
use std::sync::Arc;

use pyo3::exceptions::{PyConnectionError, PyRuntimeError, PyTypeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyDict, PyString};

use super::loop_side::LoopSide;
use super::ready::Ready;
use crate::log::{log, print_traceback, Gil};
use crate::wsgi::input::read_error;
use crate::wsgi::response::{check_name, repr, type_name};
use headway_http1::fields;
use headway_worker_core::hop::Exchange;
use headway_worker_core::http::reader::ReadError;
use headway_worker_core::http::HttpError;
use headway_worker_core::transport::Transport;
use http::StatusCode;

#[pyclass(module = "headway._native", name = "HttpCycle")]
pub struct HttpCycle {
    exchange: Exchange,
    /// What the cycle needs of the loop: shared by every cycle, holding none of them.
    side: Arc<LoopSide>,
    /// The app has had the last piece of the body.
    request_read: bool,
    /// `http.response.start`, checked, kept until the first body piece goes with it.
    start: Option<Start>,
    head_sent: bool,
    complete: bool,
    disconnected: bool,
    /// The app has returned (or raised).
    over: bool,
    /// What a `receive` waiting for the next body piece awaits.
    receiving: Option<Py<PyAny>>,
    /// What a `send` whose output was kept back (the ring was full) awaits.
    sending: Option<Py<PyAny>>,
    /// What a `receive` after the whole body awaits: the end of the exchange.
    finished: Option<Py<PyAny>>,
    /// The task that runs the app, until it has: asyncio itself holds a task only weakly, and an
    /// app awaiting a future nothing else holds would let it be collected mid-request. The task's
    /// frame holds the cycle back, a loop the garbage collector cannot see: `finish`, which the
    /// task runs last, breaks it.
    task: Option<Py<PyAny>>,
}

/// The response head as the app gave it.
struct Start {
    code: StatusCode,
    /// The fields' names and values, one after the other, ...
    bytes: Vec<u8>,
    /// ... and where each field's name ends and its value ends in `bytes`.
    fields: Vec<(usize, usize)>,
    content_length: Option<u64>,
}

impl Start {
    fn fields(&self) -> impl Iterator<Item = (&[u8], &[u8])> + Clone {
        let mut start = 0;
        self.fields.iter().map(move |&(name_end, value_end)| {
            let field = (&self.bytes[start..name_end], &self.bytes[name_end..value_end]);
            start = value_end;
            field
        })
    }
}

impl HttpCycle {
    pub fn new(exchange: Exchange, side: Arc<LoopSide>) -> HttpCycle {
        HttpCycle {
            exchange,
            side,
            request_read: false,
            start: None,
            head_sent: false,
            complete: false,
            disconnected: false,
            over: false,
            receiving: None,
            sending: None,
            finished: None,
            task: None,
        }
    }

    /// Keeps the task that runs the app (see `task`).
    pub fn hold(&mut self, task: Py<PyAny>) {
        if !self.over {
            self.task = Some(task);
        }
    }

    /// The ring moved, or a client left (the work bell rang): carries on with what waited, and
    /// settles what was awaited. Returns whether the cycle is over: the app has returned and
    /// every record of the exchange is written, so its place is free.
    pub fn poke(&mut self, py: Python<'_>) -> bool {
        if !self.disconnected && self.exchange.is_client_gone() {
            self.gone(py);
        }
        if let Some(receiving) = self.receiving.take() {
            match self.try_receive(py) {
                Ok(Some(message)) => settle(py, &receiving, Ok(message.into_any())),
                Ok(None) => self.receiving = Some(receiving),
                Err(error) => settle(py, &receiving, Err(error)),
            }
        }
        match self.try_flush(py) {
            Ok(true) => {
                if let Some(sending) = self.sending.take() {
                    settle(py, &sending, Ok(py.None().into_bound(py)));
                }
            }
            Ok(false) => {}
            Err(error) => {
                if let Some(sending) = self.sending.take() {
                    settle(py, &sending, Err(error));
                } else {
                    log(py, &format!("cannot end the exchange over the hop: {error}"));
                }
            }
        }
        self.over && !self.exchange.pending()
    }

    /// The next `http.request` message, if its piece is on the ring; else the front is asked to
    /// ring when it writes more.
    fn try_receive<'py>(&mut self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        if self.disconnected {
            return Ok(Some(disconnect(py)?));
        }
        loop {
            match self.exchange.body_piece(&Gil(py), usize::MAX) {
                Ok(piece) => {
                    let body = PyBytes::new(py, piece);
                    let more = self.exchange.body_remains();
                    self.request_read = !more;
                    let message = PyDict::new(py);
                    message.set_item(intern!(py, "type"), intern!(py, "http.request"))?;
                    message.set_item(intern!(py, "body"), body)?;
                    message.set_item(intern!(py, "more_body"), more)?;
                    return Ok(Some(message));
                }
                Err(ReadError::Io(error)) if error.kind() == io::ErrorKind::WouldBlock => {
                    if self.exchange.arm_for_body() {
                        return Ok(None);
                    }
                }
                // The client went away before it sent the whole body.
                Err(ReadError::PeerClosed) => {
                    self.disconnected = true;
                    return Ok(Some(disconnect(py)?));
                }
                Err(error) => return Err(read_error(error)),
            }
        }
    }

    /// Writes what was kept back; returns whether nothing is kept back any more (else the front
    /// is asked to ring when it has read some).
    fn try_flush(&mut self, py: Python<'_>) -> PyResult<bool> {
        loop {
            if self.exchange.try_flush(&Gil(py))? {
                return Ok(true);
            }
            if self.exchange.arm_for_output() {
                return Ok(false);
            }
        }
    }

    /// The client has gone: `receive` says `http.disconnect`, and `send` raises.
    fn gone(&mut self, py: Python<'_>) {
        self.disconnected = true;
        for waiting in [self.receiving.take(), self.finished.take()].into_iter().flatten() {
            settle(py, &waiting, disconnect(py).map(Bound::into_any));
        }
    }

    /// The exchange has ended (the response is complete, or the app returned): a `receive`
    /// waiting for that says `http.disconnect`.
    fn ended(&mut self, py: Python<'_>) {
        if let Some(finished) = self.finished.take() {
            settle(py, &finished, disconnect(py).map(Bound::into_any));
        }
    }

    /// What a `send` returns: done, or a future done once the output kept back is written.
    fn sent(&mut self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        if !self.try_flush(py)? {
            return awaited(&self.side, &mut self.sending, py);
        }
        Ok(self.side.done(py))
    }

    fn new_future(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.side.new_future(py)
    }

    fn send_body(&mut self, py: Python<'_>, body: &[u8], more: bool) -> PyResult<()> {
        if self.exchange.is_client_gone() {
            self.gone(py);
            return Err(PyConnectionError::new_err("the client is gone"));
        }
        let sent = if self.head_sent {
            if body.is_empty() {
                Ok(())
            } else {
                self.exchange.send_body(&Gil(py), body)
            }
        } else {
            let start = self.start.as_ref().expect("checked by the caller");
            let length = (!more).then_some(body.len() as u64);
            self.head_sent = true;
            self.exchange.respond(&Gil(py), start.code, start.fields(), start.content_length, length, body)
        };
        let ended = sent.and_then(|()| if more { Ok(()) } else { self.exchange.end_response(&Gil(py)) });
        if let Err(error) = ended {
            self.gone(py);
            return Err(error.into());
        }
        if !more {
            self.complete = true;
            self.ended(py);
        }
        Ok(())
    }
}

#[pymethods]
impl HttpCycle {
    /// The app's `receive`.
    fn receive(&mut self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        if !self.request_read || self.disconnected {
            if self.receiving.is_some() {
                return Err(PyRuntimeError::new_err("receive() awaited again before the last one returned"));
            }
            return match self.try_receive(py)? {
                Some(message) => Ok(ready(py, message.into_any())?),
                None => {
                    let future = self.new_future(py)?;
                    self.receiving = Some(future.clone_ref(py));
                    Ok(future)
                }
            };
        }
        // Nothing more comes from the client: what is left to tell is that the exchange ended.
        if self.complete || self.over {
            return ready(py, disconnect(py)?.into_any());
        }
        awaited(&self.side, &mut self.finished, py)
    }

    /// The app's `send`.
    fn send(slf: &Bound<'_, Self>, message: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        let py = slf.py();
        let mut this = slf.borrow_mut();
        let message = message
            .cast::<PyDict>()
            .map_err(|_| PyTypeError::new_err(format!("an ASGI message must be a dict, not {}", type_name(message))))?;
        let kind = message
            .get_item(intern!(py, "type"))?
            .ok_or_else(|| PyValueError::new_err("an ASGI message without a 'type'"))?;
        let kind_text = kind.cast::<PyString>().map(|text| text.to_cow()).ok().transpose()?.unwrap_or_default();
        if this.disconnected {
            return Err(PyConnectionError::new_err("the client is gone"));
        }
        if this.complete {
            return Err(PyRuntimeError::new_err(format!(
                "unexpected ASGI message {} after the response was complete",
                repr(&kind)
            )));
        }
        match kind_text.as_ref() {
            "http.response.start" => {
                if this.start.is_some() {
                    return Err(PyRuntimeError::new_err("http.response.start sent twice"));
                }
                this.start = Some(response_start(message)?);
                Ok(this.side.done(py))
            }
            "http.response.body" => {
                if this.start.is_none() {
                    return Err(PyRuntimeError::new_err("http.response.body before http.response.start"));
                }
                let body = message.get_item(intern!(py, "body"))?;
                let body: &[u8] = match &body {
                    Some(body) => body.extract()?,
                    None => b"",
                };
                let more = match message.get_item(intern!(py, "more_body"))? {
                    Some(more) => more.is_truthy()?,
                    None => false,
                };
                this.send_body(py, body, more)?;
                this.sent(py)
            }
            "http.response.pathsend" => {
                if this.start.is_none() || this.head_sent {
                    return Err(PyRuntimeError::new_err(
                        "http.response.pathsend must follow http.response.start, alone",
                    ));
                }
                let path = message
                    .get_item(intern!(py, "path"))?
                    .ok_or_else(|| PyValueError::new_err("http.response.pathsend without a 'path'"))?;
                let send_file = this.side.send_file(py);
                drop(this);
                Ok(send_file.call1((slf, path))?.unbind())
            }
            _ => Err(PyRuntimeError::new_err(format!("unexpected ASGI message {} in an http scope", repr(&kind)))),
        }
    }

    /// The app returned, or raised `error`: the exchange ends (a 500 if nothing was sent, a cut
    /// response if it was incomplete), and the cycle's place is free once the exchange's last
    /// record is written.
    #[pyo3(signature = (error=None))]
    pub fn finish(slf: &Bound<'_, Self>, error: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
        let py = slf.py();
        let side = {
            let mut this = slf.borrow_mut();
            this.over = true;
            this.task = None;
            match error {
                Some(error) if !this.disconnected => {
                    log(py, "the app failed:");
                    print_traceback(py, &PyErr::from_value(error.clone()));
                }
                None if !this.complete && !this.disconnected => {
                    log(py, "the app returned without completing its response")
                }
                _ => {}
            }
            if !this.complete {
                // The exchange must end even if the client is gone.
                if this.head_sent {
                    this.exchange.abandon(&Gil(py));
                } else {
                    let is_head = this.exchange.is_head();
                    this.exchange.send_error(
                        &Gil(py),
                        &HttpError::new(StatusCode::INTERNAL_SERVER_ERROR, "Internal Server Error"),
                        is_head,
                    );
                }
            }
            this.ended(py);
            if let Some(receiving) = this.receiving.take() {
                settle(py, &receiving, disconnect(py).map(Bound::into_any));
            }
            this.side.clone()
        };
        side.turn(py)
    }
}

/// `http.response.start`, checked: a status of three digits, headers as `(bytes, bytes)` pairs
/// with token names, no hop-by-hop fields and no CR or LF in values.
fn response_start(message: &Bound<'_, PyDict>) -> PyResult<Start> {
    let py = message.py();
    let status = message
        .get_item(intern!(py, "status"))?
        .ok_or_else(|| PyValueError::new_err("http.response.start without a 'status'"))?;
    let Some(code) = status.extract::<u16>().ok().and_then(|code| StatusCode::from_u16(code).ok()) else {
        return Err(PyValueError::new_err(format!("bad status {}: expected an int of three digits", repr(&status))));
    };
    let mut start = Start { code, bytes: Vec::new(), fields: Vec::new(), content_length: None };
    if let Some(headers) = message.get_item(intern!(py, "headers"))? {
        for pair in headers.try_iter()? {
            let (name, value) = header_pair(&pair?)?;
            let name_bytes = header_bytes(&name)?;
            let value_bytes = header_bytes(&value)?;
            check_name(&name_bytes, &name, "an app")?;
            if value_bytes.iter().any(|&b| b == b'\r' || b == b'\n') {
                return Err(PyValueError::new_err("a response header value contains CR or LF"));
            }
            if name_bytes.eq_ignore_ascii_case(b"content-length") {
                let length = fields::content_length([&value_bytes[..]])
                    .ok()
                    .flatten()
                    .ok_or_else(|| PyValueError::new_err(format!("bad Content-Length header {}", repr(&value))))?;
                if start.content_length.is_some_and(|seen| seen != length) {
                    return Err(PyValueError::new_err("conflicting Content-Length headers"));
                }
                start.content_length = Some(length);
            }
            start.bytes.extend_from_slice(&name_bytes);
            let name_end = start.bytes.len();
            start.bytes.extend_from_slice(&value_bytes);
            start.fields.push((name_end, start.bytes.len()));
        }
    }
    Ok(start)
}

/// A header as ASGI gives it: any iterable of exactly two items (`(name, value)` mostly, but
/// `[name, value]` lists too, as datasette sends them and uvicorn takes them).
fn header_pair<'py>(pair: &Bound<'py, PyAny>) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
    if let Ok(tuple) = pair.extract() {
        return Ok(tuple);
    }
    let not_a_pair =
        || PyTypeError::new_err(format!("each response header must be a (name, value) pair, not {}", repr(pair)));
    let mut items = pair.try_iter().map_err(|_| not_a_pair())?;
    match (items.next(), items.next(), items.next()) {
        (Some(name), Some(value), None) => Ok((name?, value?)),
        _ => Err(not_a_pair()),
    }
}

/// A header name or value, which ASGI gives as bytes (a bytearray does too).
fn header_bytes<'a>(value: &'a Bound<'_, PyAny>) -> PyResult<Cow<'a, [u8]>> {
    if let Ok(bytes) = value.cast::<PyBytes>() {
        return Ok(Cow::Borrowed(bytes.as_bytes()));
    }
    if let Ok(bytes) = value.cast::<PyByteArray>() {
        return Ok(Cow::Owned(bytes.to_vec()));
    }
    Err(PyTypeError::new_err(format!("response headers must be bytes, not {}", type_name(value))))
}

/// The future in `waiting`, made there first if there is none: what every caller that waits for
/// the same thing awaits.
fn awaited(side: &LoopSide, waiting: &mut Option<Py<PyAny>>, py: Python<'_>) -> PyResult<Py<PyAny>> {
    if let Some(future) = waiting {
        return Ok(future.clone_ref(py));
    }
    let future = side.new_future(py)?;
    *waiting = Some(future.clone_ref(py));
    Ok(future)
}

fn disconnect(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let message = PyDict::new(py);
    message.set_item(intern!(py, "type"), intern!(py, "http.disconnect"))?;
    Ok(message)
}

fn ready(py: Python<'_>, result: Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
    Ok(Py::new(py, Ready::new(Some(result.unbind())))?.into_any())
}

/// Settles an asyncio future awaited by the app, unless the app gave up on it (cancelled).
fn settle(py: Python<'_>, future: &Py<PyAny>, result: PyResult<Bound<'_, PyAny>>) {
    let future = future.bind(py);
    let settled = (|| -> PyResult<()> {
        if future.call_method0(intern!(py, "cancelled"))?.is_truthy()? {
            return Ok(());
        }
        match result {
            Ok(value) => future.call_method1(intern!(py, "set_result"), (value,))?,
            Err(error) => future.call_method1(intern!(py, "set_exception"), (error.into_value(py),))?,
        };
        Ok(())
    })();
    if let Err(error) = settled {
        log(py, "cannot settle a future of the app's:");
        print_traceback(py, &error);
    }
}
