//! WebSocket frames for the ASGI `websocket` scope, without I/O: the Python side reads and writes
//! the socket on its asyncio loop and hands the bytes to a [`WebSocketCodec`], which leaves the
//! protocol to tungstenite (unmasking, fragmented messages, UTF-8, answering pings, the close
//! handshake). tungstenite drives a `Read + Write` stream; here that stream is two buffers, so a
//! read that runs out of input ends in `WouldBlock`, as on a non-blocking socket.

use std::io::{self, Read, Write};

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList};
use tungstenite::protocol::frame::coding::CloseCode;
use tungstenite::protocol::frame::CloseFrame;
use tungstenite::protocol::{Role, WebSocket};
use tungstenite::{Error, Message};

/// The bytes in each direction: what came from the peer, not parsed yet, and what is to go to it.
#[derive(Default)]
struct Buffers {
    incoming: Vec<u8>,
    outgoing: Vec<u8>,
}

impl Read for Buffers {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.incoming.is_empty() {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        let count = buf.len().min(self.incoming.len());
        buf[..count].copy_from_slice(&self.incoming[..count]);
        self.incoming.drain(..count);
        Ok(count)
    }
}

impl Write for Buffers {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.outgoing.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The server's side of one open WebSocket.
#[pyclass(module = "headway._native", name = "WebSocketCodec", unsendable)]
pub struct WebSocketCodec {
    socket: WebSocket<Buffers>,
}

#[pymethods]
impl WebSocketCodec {
    #[new]
    fn new() -> Self {
        WebSocketCodec { socket: WebSocket::from_raw_socket(Buffers::default(), Role::Server, None) }
    }

    /// Takes bytes from the peer; returns the messages they complete, each `("text", str)`,
    /// `("bytes", bytes)` or `("close", code, reason)` (then nothing more comes). Pings are
    /// answered in the output.
    fn feed<'py>(&mut self, py: Python<'py>, data: &[u8]) -> PyResult<Bound<'py, PyList>> {
        self.socket.get_mut().incoming.extend_from_slice(data);
        let messages = PyList::empty(py);
        loop {
            match self.socket.read() {
                Ok(Message::Text(text)) => messages.append(("text", text.as_str()))?,
                Ok(Message::Binary(data)) => messages.append(("bytes", PyBytes::new(py, &data)))?,
                Ok(Message::Close(frame)) => {
                    let (code, reason) = frame.map_or((1005, String::new()), |frame| {
                        (u16::from(frame.code), frame.reason.as_str().to_owned())
                    });
                    messages.append(("close", code, reason))?;
                }
                Ok(Message::Ping(_) | Message::Pong(_) | Message::Frame(_)) => {}
                Err(Error::Io(error)) if error.kind() == io::ErrorKind::WouldBlock => break,
                Err(Error::ConnectionClosed | Error::AlreadyClosed) => break,
                // The front walks frame headers only; what it lets through and breaks the protocol
                // (bad UTF-8, a reserved bit, a continuation of nothing) fails the connection: the
                // peer gets a close frame with the code for it (RFC 6455 section 7.4.1), and the
                // app the same code.
                Err(error) => {
                    let code = failure_code(&error);
                    let reason = error.to_string();
                    let frame = CloseFrame { code, reason: truncated(&reason, MAX_CLOSE_REASON).into() };
                    // An error after the close handshake began has nothing left to close.
                    let _ = self.socket.close(Some(frame));
                    messages.append(("close", u16::from(code), reason))?;
                    break;
                }
            }
        }
        Ok(messages)
    }

    fn send_text(&mut self, text: &str) -> PyResult<()> {
        self.write(Message::text(text))
    }

    fn send_bytes(&mut self, data: &[u8]) -> PyResult<()> {
        self.write(Message::binary(data.to_vec()))
    }

    /// Starts the close handshake with `code` and `reason`.
    fn close(&mut self, code: u16, reason: &str) -> PyResult<()> {
        let frame = CloseFrame { code: CloseCode::from(code), reason: reason.into() };
        match self.socket.close(Some(frame)) {
            Ok(()) | Err(Error::ConnectionClosed | Error::AlreadyClosed) => Ok(()),
            Err(error) => Err(PyValueError::new_err(error.to_string())),
        }
    }

    /// The bytes to write to the peer now.
    fn output<'py>(&mut self, py: Python<'py>) -> Bound<'py, PyBytes> {
        let outgoing = std::mem::take(&mut self.socket.get_mut().outgoing);
        PyBytes::new(py, &outgoing)
    }
}

impl WebSocketCodec {
    fn write(&mut self, message: Message) -> PyResult<()> {
        self.socket.send(message).map_err(|error| PyValueError::new_err(error.to_string()))
    }
}

/// A close frame's reason fits a control frame's 125 bytes after its two-byte code.
const MAX_CLOSE_REASON: usize = 123;

/// The close code for a protocol error of the peer's: 1007 for a text message that is not UTF-8,
/// 1009 for a message over the codec's size limit, 1002 for every other rule broken.
fn failure_code(error: &Error) -> CloseCode {
    match error {
        Error::Utf8(_) => CloseCode::Invalid,
        Error::Capacity(_) => CloseCode::Size,
        _ => CloseCode::Protocol,
    }
}

/// At most `limit` bytes of `text`, cut at a character boundary.
fn truncated(text: &str, limit: usize) -> &str {
    let mut end = text.len().min(limit);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// The `Sec-WebSocket-Accept` value that answers a handshake's `Sec-WebSocket-Key`.
#[pyfunction]
pub fn websocket_accept(key: &[u8]) -> String {
    tungstenite::handshake::derive_accept_key(key)
}
