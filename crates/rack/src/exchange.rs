//! `Headway::Native::Exchange`: one request's way back, as the Ruby side answers through it. It
//! reads the request body as `rack.input` asks, checks the app's status and header fields, and
//! hands head, body pieces and files to the core's transport, which frames them (HTTP/1.1 on a
//! socket, records over the hop) and sends a `to_path` body's file without Ruby reading it.
//!
//! The Ruby side calls, for one request: `read` while the app reads its input; then either
//! `respond(status, headers, chunks)` (a body whose pieces are all known: one send, with its
//! length), `send_file(status, headers, path)`, or `start(status, headers)`, `write(chunk)` for
//! each piece as the body yields it, and `finish`; or `fail` when the app raised.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::sync::{Mutex, MutexGuard};

use headway_worker_core::http::reader::ReadError;
use headway_worker_core::http::response::ResponseHead;
use headway_worker_core::http::HttpError;
use headway_worker_core::transport::Transport;
use http::StatusCode;
use magnus::{Error, RArray, RString, Ruby};

use crate::gvl::Gvl;

#[magnus::wrap(class = "Headway::Native::Exchange", free_immediately, size)]
pub struct Exchange(Mutex<State>);

struct State {
    /// Some while the request runs.
    transport: Option<Box<dyn Transport>>,
    is_head: bool,
    /// The head `start` checked, sent with the first piece of body or by `finish`.
    head: Option<ResponseHead>,
    head_sent: bool,
    /// The transport was told that the app reads the body (it may send `100 Continue`).
    wanted: bool,
    /// The response cannot be complete (the app raised, the client went away): the channel
    /// carries no other request.
    failed: bool,
}

/// The app's header fields as the Ruby side passes them: an Array of `[name, value]` String
/// pairs (a field of several values is several pairs).
type Fields = RArray;

impl Exchange {
    pub fn new(transport: Box<dyn Transport>, is_head: bool) -> Exchange {
        Exchange(Mutex::new(State {
            transport: Some(transport),
            is_head,
            head: None,
            head_sent: false,
            wanted: false,
            failed: false,
        }))
    }

    /// The transport back once the request is over, and whether the response failed; None if
    /// the Ruby side still holds the exchange in a call (another thread of the app).
    pub fn take(&self) -> Option<(Box<dyn Transport>, bool)> {
        let mut state = self.0.try_lock().ok()?;
        let failed = state.failed;
        state.transport.take().map(|transport| (transport, failed))
    }

    /// The state, for one call of the Ruby side. A call from a second thread of the app while
    /// the first waits (without the GVL) in a call of its own is refused, not waited for: it
    /// would hold the GVL the first needs to return.
    fn state(&self, ruby: &Ruby) -> Result<MutexGuard<'_, State>, Error> {
        self.0.try_lock().map_err(|_| {
            Error::new(ruby.exception_runtime_error(), "the request is in use by another thread of the app")
        })
    }

    /// `read(limit)`: up to `limit` bytes of the request body (fewer if that is what is at hand),
    /// nil at its end.
    pub fn read(ruby: &Ruby, rb_self: &Self, limit: usize) -> Result<Option<RString>, Error> {
        let mut state = rb_self.state(ruby)?;
        let wanted = std::mem::replace(&mut state.wanted, true);
        let transport = state.transport(ruby)?;
        if !wanted {
            transport.body_wanted(&Gvl).map_err(|error| io_error(ruby, &error))?;
        }
        let mut out = Vec::new();
        match transport.read_body(&Gvl, limit, &mut out) {
            Ok(0) => Ok(None),
            Ok(_) => Ok(Some(ruby.str_from_slice(&out))),
            Err(ReadError::Http(error)) => Err(Error::new(ruby.exception_io_error(), error.reason)),
            Err(ReadError::PeerClosed) => Err(Error::new(
                ruby.exception_eof_error(),
                "the client closed the connection in the middle of the body",
            )),
            Err(ReadError::Io(error)) => Err(io_error(ruby, &error)),
        }
    }

    /// `respond(status, headers, chunks)`: the whole response at once, its length known.
    pub fn respond(ruby: &Ruby, rb_self: &Self, status: i64, headers: Fields, chunks: RArray) -> Result<(), Error> {
        let head = head(ruby, status, headers)?;
        let mut body = Vec::new();
        for index in 0..chunks.len() {
            let chunk: RString = chunks.entry(index as isize)?;
            // SAFETY: copied before any Ruby code runs.
            body.extend_from_slice(unsafe { chunk.as_slice() });
        }
        let mut state = rb_self.state(ruby)?;
        state.send(ruby, |transport| {
            transport.send_head(&Gvl, &head, Some(body.len() as u64), &body)?;
            transport.end_response(&Gvl)
        })
    }

    /// `start(status, headers)`: the head of a body that comes piece by piece.
    pub fn start(ruby: &Ruby, rb_self: &Self, status: i64, headers: Fields) -> Result<(), Error> {
        let head = head(ruby, status, headers)?;
        rb_self.state(ruby)?.head = Some(head);
        Ok(())
    }

    /// `write(chunk)`: one piece of the body, sent now (the head goes with the first).
    pub fn write(ruby: &Ruby, rb_self: &Self, chunk: RString) -> Result<(), Error> {
        // SAFETY: copied before any Ruby code runs; another thread may change the string while
        // the send waits without the GVL.
        let data = unsafe { chunk.as_slice() }.to_vec();
        let mut state = rb_self.state(ruby)?;
        if state.head_sent {
            return state.send(ruby, |transport| transport.send_body(&Gvl, &data));
        }
        let head = state.head.take().ok_or_else(|| Error::new(ruby.exception_runtime_error(), "write before start"))?;
        state.head_sent = true;
        state.send(ruby, |transport| transport.send_head(&Gvl, &head, None, &data))
    }

    /// `send_file(status, headers, path)`: a `to_path` body, sent from the file by the core
    /// (`sendfile` on a socket); its length is the file's unless the app gave one.
    pub fn send_file(ruby: &Ruby, rb_self: &Self, status: i64, headers: Fields, path: String) -> Result<(), Error> {
        let file = File::open(&path).map_err(|error| io_error(ruby, &error))?;
        let length = file.metadata().map_err(|error| io_error(ruby, &error))?.len().to_string();
        let mut head = head(ruby, status, headers)?;
        let has_body =
            !head.code.is_informational() && !matches!(head.code, StatusCode::NO_CONTENT | StatusCode::NOT_MODIFIED);
        if head.content_length.is_none() && has_body {
            let mut fields = fields_of(headers)?;
            fields.push((b"content-length".to_vec(), length.into_bytes()));
            head = of_fields(ruby, head.code, &fields)?;
        }
        let mut state = rb_self.state(ruby)?;
        state.head_sent = true;
        state.send(ruby, |transport| {
            transport.send_head(&Gvl, &head, None, b"")?;
            transport.send_file(&Gvl, file.as_raw_fd(), 0)?;
            transport.end_response(&Gvl)
        })
    }

    /// `finish`: ends a body sent piece by piece (the head too, if no piece came).
    pub fn finish(ruby: &Ruby, rb_self: &Self) -> Result<(), Error> {
        let mut state = rb_self.state(ruby)?;
        if !state.head_sent {
            let head =
                state.head.take().ok_or_else(|| Error::new(ruby.exception_runtime_error(), "finish before start"))?;
            state.head_sent = true;
            return state.send(ruby, |transport| {
                transport.send_head(&Gvl, &head, Some(0), b"")?;
                transport.end_response(&Gvl)
            });
        }
        state.send(ruby, |transport| transport.end_response(&Gvl))
    }

    /// `fail`: the app raised. A 500 if nothing was sent yet; else the response is cut short
    /// (the client sees it end early, never as complete).
    pub fn fail(&self) {
        self.fail_request();
    }

    /// As `fail`, from the native side.
    pub fn fail_request(&self) {
        let Ok(mut state) = self.0.try_lock() else { return };
        state.failed = true;
        let (head_sent, is_head) = (state.head_sent, state.is_head);
        let Some(transport) = state.transport.as_mut() else { return };
        if !head_sent {
            let error = HttpError::new(StatusCode::INTERNAL_SERVER_ERROR, "Internal Server Error");
            transport.send_error(&Gvl, &error, is_head);
        }
        transport.abandon(&Gvl);
    }

    /// `started?`: whether the head is sent (a 500 can no longer be).
    pub fn started(&self) -> bool {
        self.0.try_lock().map_or(true, |state| state.head_sent)
    }
}

impl State {
    fn transport(&mut self, ruby: &Ruby) -> Result<&mut Box<dyn Transport>, Error> {
        self.transport.as_mut().ok_or_else(|| Error::new(ruby.exception_runtime_error(), "the request is over"))
    }

    /// Runs a send; a failure means the client is gone: the response is failed, the app gets an
    /// IOError (a streaming body stops there, and its `close` runs).
    fn send(&mut self, ruby: &Ruby, send: impl FnOnce(&mut dyn Transport) -> io::Result<()>) -> Result<(), Error> {
        self.head_sent = true;
        let result = send(self.transport(ruby)?.as_mut());
        result.map_err(|error| {
            self.failed = true;
            io_error(ruby, &error)
        })
    }
}

/// The response head from the app's status and fields, checked ([`ResponseHead::of_fields`]).
fn head(ruby: &Ruby, status: i64, headers: Fields) -> Result<ResponseHead, Error> {
    let code = u16::try_from(status)
        .ok()
        .filter(|code| (100..=599).contains(code))
        .and_then(|code| StatusCode::from_u16(code).ok())
        .ok_or_else(|| Error::new(ruby.exception_arg_error(), format!("bad status {status}: expected 100 to 599")))?;
    of_fields(ruby, code, &fields_of(headers)?)
}

/// Header pairs as bytes of our own.
type OwnedFields = Vec<(Vec<u8>, Vec<u8>)>;

/// The bytes of the app's header pairs.
fn fields_of(headers: Fields) -> Result<OwnedFields, Error> {
    (0..headers.len())
        .map(|index| {
            let (name, value): (RString, RString) = headers.entry(index as isize)?;
            // SAFETY: each slice is copied before any Ruby code runs.
            Ok(unsafe { (name.as_slice().to_vec(), value.as_slice().to_vec()) })
        })
        .collect()
}

fn of_fields(ruby: &Ruby, code: StatusCode, fields: &[(Vec<u8>, Vec<u8>)]) -> Result<ResponseHead, Error> {
    let borrowed: Vec<(&[u8], &[u8])> = fields.iter().map(|(name, value)| (&name[..], &value[..])).collect();
    ResponseHead::of_fields(code, &borrowed).map_err(|message| Error::new(ruby.exception_arg_error(), message))
}

fn io_error(ruby: &Ruby, error: &io::Error) -> Error {
    Error::new(ruby.exception_io_error(), error.to_string())
}
