//! HTTP/1.1 over a unix socket: the transport of a worker run on its own, outside the headway
//! front (which reaches the worker it started over shared memory, `hop.rs`), for any client.
//!
//! A slot accepts one connection at a time, only while it has none, so the worker never holds
//! more than T connections: one beyond T waits in the listen backlog until a slot frees (the
//! slot thread itself is the permit). On the connection, requests are answered one after the
//! other; a pipelined request simply waits in the reader.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::runtime::{unlocked, Runtime};
use bytes::BytesMut;

use crate::http::body::{Body, DRAIN_LIMIT};
use crate::http::reader::{ReadError, Reader};
use crate::http::request;
use crate::http::response::{error_response, write_head, ResponseHead};
use crate::http::HttpError;
use crate::socket::Socket;
use crate::transport::{Next, Serve, Transport};
use headway_http1::body::BodyEncoder;
use headway_http1::response::CONTINUE;
use http::Version;

/// Up to this size, head and body are joined and leave in one send.
const JOIN_LIMIT: usize = 256 * 1024;
/// After accept() fails (out of file descriptors, say), wait this long before trying again
/// instead of spinning on a listener that stays readable.
const ACCEPT_RETRY: Duration = Duration::from_millis(100);

/// What the stopping server needs to see of a slot: its connection, and whether a request is
/// in progress on it.
#[derive(Default)]
pub struct SlotState {
    connection: Mutex<Option<RawFd>>,
    idle: AtomicBool,
}

impl SlotState {
    /// Stops waiting for another request on the connection, if no request is in progress.
    pub fn close_if_idle(&self) {
        let connection = self.connection.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(fd) = *connection {
            if self.idle.load(Ordering::SeqCst) {
                // SHUT_RD wakes the slot's wait with end-of-file; a request that raced in is
                // still read from the buffer and answered, as writing stays open.
                // SAFETY: the fd is open: the slot closes it only under this lock.
                unsafe { libc::shutdown(fd, libc::SHUT_RD) };
            }
        }
    }
}

/// What the slots share: the listening socket, the stop flag and the pipe that wakes them.
pub struct Shared {
    pub listener: OwnedFd,
    pub stop_fd: OwnedFd,
    pub stopping: AtomicBool,
}

/// A slot's life: accept a connection when it has none, serve it to the end, until stopping.
pub fn run_slot(runtime: &dyn Runtime, shared: &Arc<Shared>, state: &Arc<SlotState>, serve: &mut Serve<'_>) {
    let listener = shared.listener.as_raw_fd();
    loop {
        let waited = unlocked(runtime, || {
            let mut entries = [
                libc::pollfd { fd: listener, events: libc::POLLIN, revents: 0 },
                libc::pollfd { fd: shared.stop_fd.as_raw_fd(), events: libc::POLLIN, revents: 0 },
            ];
            // SAFETY: two valid pollfds, and their count.
            unsafe { libc::poll(entries.as_mut_ptr(), 2, -1) }
        });
        if shared.stopping.load(Ordering::SeqCst) {
            return;
        }
        if waited < 0 {
            continue; // interrupted
        }
        // SAFETY: accept4 on our listening socket; null address pointers are allowed.
        let fd = unsafe {
            libc::accept4(
                listener,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            )
        };
        if fd < 0 {
            let error = io::Error::last_os_error();
            if !matches!(error.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted) {
                runtime.log(&format!("accept failed: {error}"));
                unlocked(runtime, || std::thread::sleep(ACCEPT_RETRY));
            }
            continue; // another slot took it
        }
        // SAFETY: accept4 returned a new descriptor that nothing else owns.
        let socket = Socket::new(unsafe { OwnedFd::from_raw_fd(fd) });
        *state.connection.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(fd);
        let connection = serve(Box::new(Http1::new(socket, shared.clone(), state.clone())));
        let mut registered = state.connection.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        *registered = None;
        drop(connection); // closes the socket, under the lock
        state.idle.store(true, Ordering::SeqCst);
    }
}

/// The request being answered on a connection.
struct Exchange {
    is_head: bool,
    version: Version,
    keep_alive: bool,
    expect_continue: bool,
    continue_sent: bool,
    head_sent: bool,
    body: Option<Body>,
    framing: BodyEncoder,
}

/// One accepted connection, as a [`Transport`].
pub struct Http1 {
    socket: Socket,
    reader: Reader,
    shared: Arc<Shared>,
    state: Arc<SlotState>,
    exchange: Option<Exchange>,
    out: BytesMut,
}

impl Http1 {
    fn new(socket: Socket, shared: Arc<Shared>, state: Arc<SlotState>) -> Self {
        Http1 { socket, reader: Reader::new(), shared, state, exchange: None, out: BytesMut::with_capacity(4096) }
    }

    fn exchange(&mut self) -> io::Result<&mut Exchange> {
        self.exchange.as_mut().ok_or_else(|| io::Error::other("no request in progress"))
    }

    /// Sends what `out` holds.
    fn flush(&mut self, runtime: &dyn Runtime) -> io::Result<()> {
        let result = self.socket.send_all(runtime, &self.out);
        self.out.clear();
        result
    }

    /// Frames and sends `data` after whatever head `out` holds.
    fn send_framed(&mut self, runtime: &dyn Runtime, data: &[u8]) -> io::Result<()> {
        let exchange = self.exchange.as_mut().ok_or_else(|| io::Error::other("no request in progress"))?;
        let (data, broken) = exchange.framing.admit(data);
        if let Some(broken) = broken {
            runtime.log(&broken.to_string());
        }
        let framing = exchange.framing;
        if self.out.len() + data.len() <= JOIN_LIMIT || framing == BodyEncoder::Chunked {
            framing.put(&mut self.out, data);
            return self.flush(runtime);
        }
        self.flush(runtime)?;
        self.socket.send_all(runtime, data)
    }
}

impl Transport for Http1 {
    fn next_request(&mut self, runtime: &dyn Runtime) -> Next {
        self.state.idle.store(true, Ordering::SeqCst);
        if self.shared.stopping.load(Ordering::SeqCst) {
            return Next::Closed;
        }
        let head = match self.reader.read_head(&mut self.socket.source(runtime)) {
            Ok(Some(head)) => head,
            Ok(None) | Err(ReadError::PeerClosed | ReadError::Io(_)) => return Next::Closed,
            Err(ReadError::Http(error)) => return Next::Refused(error),
        };
        self.state.idle.store(false, Ordering::SeqCst);
        let request = request::from_head(head);
        let body = Body::of(request.body);
        self.exchange = Some(Exchange {
            is_head: request.is_head(),
            version: request.version,
            keep_alive: request.keep_alive,
            expect_continue: request.expect_continue,
            continue_sent: false,
            head_sent: false,
            body,
            framing: BodyEncoder::NoBody,
        });
        Next::Request(request)
    }

    fn body_wanted(&mut self, runtime: &dyn Runtime) -> io::Result<()> {
        let exchange = self.exchange()?;
        if exchange.expect_continue && !exchange.head_sent && !exchange.continue_sent {
            exchange.continue_sent = true;
            self.socket.send_all(runtime, CONTINUE)?;
        }
        Ok(())
    }

    fn read_body(&mut self, runtime: &dyn Runtime, limit: usize, out: &mut Vec<u8>) -> Result<usize, ReadError> {
        let exchange = self.exchange.as_mut().ok_or(ReadError::PeerClosed)?;
        match &mut exchange.body {
            Some(body) => body.read_some(&mut self.reader, &mut self.socket.source(runtime), limit, out),
            None => Ok(0),
        }
    }

    fn send_head(
        &mut self,
        runtime: &dyn Runtime,
        head: &ResponseHead,
        body_length: Option<u64>,
        data: &[u8],
    ) -> io::Result<()> {
        let stopping = self.shared.stopping.load(Ordering::SeqCst);
        let exchange = self.exchange.as_mut().ok_or_else(|| io::Error::other("no request in progress"))?;
        // The unread rest of the body must be droppable after the response, or the connection
        // cannot carry another request.
        let finishable = match &exchange.body {
            None => true,
            Some(_) if exchange.expect_continue && !exchange.continue_sent => false, // the client may wait for 100
            Some(body) => !body.too_large_to_drain(DRAIN_LIMIT),
        };
        let keep_alive = exchange.keep_alive && finishable && !stopping;
        let (framing, keep_alive) =
            write_head(&mut self.out, head, exchange.is_head, exchange.version, body_length, keep_alive);
        exchange.framing = framing;
        exchange.keep_alive = keep_alive;
        exchange.head_sent = true;
        self.send_framed(runtime, data)
    }

    fn send_body(&mut self, runtime: &dyn Runtime, data: &[u8]) -> io::Result<()> {
        if data.is_empty() {
            return Ok(());
        }
        self.send_framed(runtime, data)
    }

    fn send_file(&mut self, runtime: &dyn Runtime, fd: RawFd, offset: u64) -> io::Result<()> {
        let exchange = self.exchange()?;
        if let BodyEncoder::Length { remaining, .. } = &mut exchange.framing {
            let count = *remaining;
            let sent = self.socket.send_file(runtime, fd, offset, count)?;
            if let Some(BodyEncoder::Length { remaining, .. }) = self.exchange.as_mut().map(|e| &mut e.framing) {
                *remaining -= sent;
            }
        }
        Ok(())
    }

    fn end_response(&mut self, runtime: &dyn Runtime) -> io::Result<()> {
        let exchange = self.exchange()?;
        let (last, broken) = exchange.framing.end();
        if let Some(broken) = broken {
            exchange.keep_alive = false;
            runtime.log(&broken.to_string());
        }
        if !last.is_empty() {
            self.socket.send_all(runtime, last)?;
        }
        Ok(())
    }

    fn send_error(&mut self, runtime: &dyn Runtime, error: &HttpError, is_head: bool) {
        if let Some(exchange) = &mut self.exchange {
            exchange.keep_alive = false;
        }
        // The peer may be gone; there is nobody left to tell then.
        let _ = self.socket.send_all(runtime, &error_response(error, !is_head));
    }

    fn finish(&mut self, runtime: &dyn Runtime) -> bool {
        let Some(mut exchange) = self.exchange.take() else { return false };
        if !exchange.keep_alive {
            return false;
        }
        match &mut exchange.body {
            None => true,
            Some(body) => body.drain(&mut self.reader, &mut self.socket.source(runtime), DRAIN_LIMIT).unwrap_or(false),
        }
    }
}
