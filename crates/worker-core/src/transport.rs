//! How a slot receives a request and sends its response, whatever carries them.
//!
//! The bindings (WSGI and ASGI in `headway-worker`, Rack in `headway-rack`) know only this
//! trait: they ask for the next request ([`serve_each`]), read the body when the app does, and
//! hand over the response head and body bytes. There are two implementations: the shared memory the headway front passed down
//! (`hop.rs`), and HTTP/1.1 on a unix socket for a worker run on its own (`unix.rs`).
//!
//! Every method gets the slot thread's [`Runtime`]: an implementation keeps the interpreter's lock
//! while an operation can complete at once and lets it go only while it has to wait (see
//! `socket.rs` and `hop.rs`).

use std::io;
use std::os::fd::RawFd;

use crate::runtime::Runtime;

use crate::http::reader::ReadError;
use crate::http::request::Request;
use crate::http::response::ResponseHead;
use crate::http::HttpError;

/// What waiting for the next request gave.
pub enum Next {
    Request(Request),
    /// A malformed request: answer it with [`Transport::send_error`], then stop.
    Refused(HttpError),
    /// No more requests come this way.
    Closed,
}

/// `Send + Sync` because, while its request runs, the transport lives inside an interpreter's
/// object (WSGI's `start_response`: pyo3 requires both); it is only ever used under the
/// interpreter's lock.
pub trait Transport: Send + Sync {
    /// Waits for the next request.
    fn next_request(&mut self, runtime: &dyn Runtime) -> Next;

    /// Called once before the app first reads the body (HTTP sends `100 Continue` if the
    /// client waits for it).
    fn body_wanted(&mut self, runtime: &dyn Runtime) -> io::Result<()>;

    /// Appends up to `limit` bytes of the request body to `out`; returns how many, 0 at its end.
    fn read_body(&mut self, runtime: &dyn Runtime, limit: usize, out: &mut Vec<u8>) -> Result<usize, ReadError>;

    /// How many bytes of the request body are left to read, when the transport knows it exactly
    /// (over the hop the front announced the length); `None` when it does not.
    fn body_left(&self) -> Option<u64> {
        None
    }

    /// Reads request body bytes into `out`, as many as are at hand up to its length; returns how
    /// many, 0 at its end. For a transport that knows [`Transport::body_left`], so that a reader
    /// can fill memory of its own made to size.
    fn read_body_into(&mut self, runtime: &dyn Runtime, out: &mut [u8]) -> Result<usize, ReadError> {
        let mut piece = Vec::with_capacity(out.len());
        let read = self.read_body(runtime, out.len(), &mut piece)?;
        out[..read].copy_from_slice(&piece);
        Ok(read)
    }

    /// Sends the response head and the first body bytes. `body_length` is the whole body's size
    /// when it is known now.
    fn send_head(
        &mut self,
        runtime: &dyn Runtime,
        head: &ResponseHead,
        body_length: Option<u64>,
        data: &[u8],
    ) -> io::Result<()>;

    /// Sends more body bytes.
    fn send_body(&mut self, runtime: &dyn Runtime, data: &[u8]) -> io::Result<()>;

    /// Sends the rest of the body (as much as the head's `Content-Length` announced) from the
    /// file `fd`, starting at `offset`: on a socket with `sendfile`, without copying it through
    /// user space; over the hop, read into the ring a piece at a time.
    fn send_file(&mut self, runtime: &dyn Runtime, fd: RawFd, offset: u64) -> io::Result<()>;

    /// Ends the response body.
    fn end_response(&mut self, runtime: &dyn Runtime) -> io::Result<()>;

    /// Answers a request with an error of the worker's own (the channel is closed after it).
    fn send_error(&mut self, runtime: &dyn Runtime, error: &HttpError, is_head: bool);

    /// After the response: whether another request can come this way (the rest of an unread
    /// body is dropped first when that is cheap).
    fn finish(&mut self, runtime: &dyn Runtime) -> bool;

    /// The app failed: what of the response is not sent yet never will be. A transport whose
    /// peer waits for the end of the response tells it here (a connection is simply closed).
    fn abandon(&mut self, _runtime: &dyn Runtime) {}
}

/// Serves the requests that come through a transport until it ends, on the slot thread that has
/// it, and gives the transport back (None: it was lost on the way, and closed).
pub type Serve<'a> = dyn FnMut(Box<dyn Transport>) -> Option<Box<dyn Transport>> + 'a;

/// Runs one request: gets the transport and the request, gives the transport back with whether
/// it can carry another (None: it was lost on the way).
pub type Handle<'a> = dyn FnMut(Box<dyn Transport>, Request) -> Option<(Box<dyn Transport>, bool)> + 'a;

/// A binding's [`Serve`]: the requests that come through `transport`, each run by `handle`, until
/// it ends or must be closed; a malformed one is answered here.
pub fn serve_each(
    runtime: &dyn Runtime,
    mut transport: Box<dyn Transport>,
    handle: &mut Handle<'_>,
) -> Option<Box<dyn Transport>> {
    loop {
        match transport.next_request(runtime) {
            Next::Closed => return Some(transport),
            Next::Refused(error) => {
                transport.send_error(runtime, &error, false);
                return Some(transport);
            }
            Next::Request(request) => {
                let keep;
                (transport, keep) = handle(transport, request)?;
                if !keep {
                    return Some(transport);
                }
            }
        }
    }
}
