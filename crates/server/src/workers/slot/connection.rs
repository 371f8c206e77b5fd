//! A slot's line to an HTTP/1.1 worker: one keep-alive connection to the worker's unix socket,
//! spoken with `headway_http1` exactly as the front speaks to its clients.
//!
//! This is how any server can be a worker (`--cmd`: Puma in single mode, a Node program). The
//! worker's answer is held to the same rules as a client's request: a response that could be
//! framed two ways (both `Content-Length` and `Transfer-Encoding`, a bare LF in a field, a `101`
//! nobody asked for, a `204` announcing a body) fails its request with `502` and the connection
//! is dropped, so nothing the worker sends after it is taken for the next response. Bytes a
//! worker sends that no request asked for (after a response's end, or on an idle connection) are
//! never read as an answer either: the connection is replaced before it carries another request,
//! and the slot counts it. A stray response that arrives only after the next request has gone out
//! cannot be told from that request's answer, by this or any proxy.

use std::io;
use std::path::Path;
use std::task::Poll;

use bytes::{Buf, Bytes, BytesMut};
use headway_http1::body::BodyDecoder;
use headway_http1::response::{self, Asked, ResponseHead};
use headway_http1::{request, HttpError};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;

use super::link::{LinkError, WorkerBody};
use crate::queue::job::RequestBody;

/// The largest response head a worker may send.
const MAX_RESPONSE_HEAD: usize = 64 * 1024;
/// How much one read from a worker asks for.
const READ_SIZE: usize = 64 * 1024;

/// One HTTP/1.1 connection to a worker; dropping it closes the connection, even in the middle of
/// an exchange (how the worker hears that the client left).
pub(crate) struct Connection {
    stream: UnixStream,
    /// Bytes read from the worker and not used yet.
    buf: BytesMut,
    /// The last exchange left the connection able to carry another.
    reusable: bool,
    /// It has carried an exchange: the worker may have closed it since, as idle.
    used: bool,
    /// The worker sent bytes no request asked for, not yet reported ([`Connection::take_unrequested`]).
    unrequested: bool,
}

impl Connection {
    pub(crate) async fn open(socket: &Path) -> io::Result<Self> {
        let stream = UnixStream::connect(socket).await?;
        Ok(Connection { stream, buf: BytesMut::new(), reusable: true, used: false, unrequested: false })
    }

    /// Replaces the connection with a new one to `socket`, keeping what is left to report.
    async fn reconnect(&mut self, socket: &Path) -> Result<(), LinkError> {
        let fresh = Connection::open(socket).await.map_err(LinkError::Reconnect)?;
        *self = Connection { unrequested: self.unrequested, ..fresh };
        Ok(())
    }

    /// Whether the worker has sent bytes no request asked for since the last call: such a
    /// connection is done for, and the worker is misbehaving.
    pub(super) fn take_unrequested(&mut self) -> bool {
        std::mem::take(&mut self.unrequested)
    }

    /// Resolves when the worker closes the idle connection (Puma after its persistent timeout,
    /// Node after its keep-alive timeout), or sends on it unasked: either way it is done.
    pub(super) async fn closed(&mut self) {
        loop {
            if !self.is_idle_and_open() {
                return;
            }
            if self.stream.readable().await.is_err() {
                return;
            }
        }
    }

    /// Whether the connection can carry a request now: the last exchange left it reusable, and
    /// the worker has neither closed it nor sent anything since.
    fn is_idle_and_open(&mut self) -> bool {
        if !self.reusable || !self.buf.is_empty() {
            return false;
        }
        let mut byte = [0u8; 1];
        match self.stream.try_read(&mut byte) {
            Err(err) if err.kind() == io::ErrorKind::WouldBlock => true,
            read => {
                self.unrequested |= matches!(read, Ok(1));
                self.reusable = false;
                false
            }
        }
    }

    /// Sends a request and reads the response head, on this connection or, when the worker has
    /// closed it meanwhile, on a new one to `socket`. A request that got no byte of answer on a
    /// reused connection is sent once more on a new one if it is idempotent and its body is at
    /// hand (RFC 9110 section 9.2.2): the worker closed the connection as the request went out.
    pub(super) async fn exchange(
        &mut self,
        socket: &Path,
        request: http::Request<RequestBody>,
    ) -> Result<(http::response::Parts, HttpBody<'_>), LinkError> {
        if !self.is_idle_and_open() {
            self.reconnect(socket).await?;
        }
        let head = encode_head(&request);
        let method_is_head = request.method() == http::Method::HEAD;
        let retry = self.used && request.method().is_idempotent();
        let body = request.into_body();
        let again = if retry { body.try_clone() } else { None };
        let asked = Asked { head: method_is_head, upgrade: false };
        let response = match self.send(head.clone(), body, asked).await {
            Err(LinkError::NoAnswer(_)) if again.is_some() => {
                self.reconnect(socket).await?;
                self.send(head, again.expect("checked"), asked).await?
            }
            sent => sent?,
        };
        Ok(self.answer(response))
    }

    /// Sends a request that asks to switch protocols, and reads the answer's head.
    pub(super) async fn ask_upgrade(
        &mut self,
        request: http::Request<RequestBody>,
    ) -> Result<(http::response::Parts, HttpBody<'_>), LinkError> {
        let head = encode_head(&request);
        let response = self.send(head, request.into_body(), Asked { head: false, upgrade: true }).await?;
        Ok(self.answer(response))
    }

    /// The stream, and what the worker sent after the head that switched protocols.
    pub(super) fn into_upgraded(self) -> (UnixStream, Bytes) {
        (self.stream, self.buf.freeze())
    }

    /// Writes the request (its body moving while the worker may already answer) and reads the
    /// final response head, skipping interim ones.
    async fn send(&mut self, head: Bytes, mut body: RequestBody, asked: Asked) -> Result<ResponseHead, LinkError> {
        self.used = true;
        self.reusable = false; // until an exchange ends as it should
        let Connection { stream, buf, .. } = self;
        let (mut reader, mut writer) = stream.split();
        let mut piece = head;
        let mut answered_early = false;
        loop {
            if piece.is_empty() {
                match body.next_piece().await {
                    Some(next) => piece = next.map_err(|_| LinkError::BodyLost)?,
                    None => break,
                }
                continue;
            }
            buf.reserve(READ_SIZE);
            tokio::select! {
                written = writer.write_buf(&mut piece) => {
                    written.map_err(LinkError::NoAnswer)?;
                }
                // A worker may answer before it has read the whole body (a 413, a redirect): stop
                // sending; the connection cannot carry another request after that.
                read = reader.read_buf(buf) => {
                    if read.map_err(LinkError::NoAnswer)? == 0 {
                        return Err(LinkError::NoAnswer(io::ErrorKind::UnexpectedEof.into()));
                    }
                    answered_early = true;
                    break;
                }
            }
        }
        let mut answered = !buf.is_empty();
        loop {
            match response::parse_head(buf, asked, MAX_RESPONSE_HEAD).map_err(LinkError::Response)? {
                Some((head, len)) => {
                    buf.advance(len);
                    let interim = head.info.status.is_informational()
                        && head.info.status != http::StatusCode::SWITCHING_PROTOCOLS;
                    if interim {
                        continue; // 100 Continue, 103 Early Hints: the real answer follows
                    }
                    self.reusable = head.info.keep_alive && !answered_early;
                    return Ok(head);
                }
                None => {
                    buf.reserve(READ_SIZE);
                    let read = reader.read_buf(buf).await;
                    match read {
                        Ok(0) if !answered => return Err(LinkError::NoAnswer(io::ErrorKind::UnexpectedEof.into())),
                        Err(err) if !answered => return Err(LinkError::NoAnswer(err)),
                        Ok(0) => return Err(LinkError::Response(HttpError::bad_response("the response head was cut"))),
                        Err(err) => return Err(LinkError::Io(err)),
                        Ok(_) => answered = true,
                    }
                }
            }
        }
    }

    /// The response's head as the job carries it, and its body to read from this connection.
    fn answer(&mut self, response: ResponseHead) -> (http::response::Parts, HttpBody<'_>) {
        let ResponseHead { info, headers } = response;
        let mut parts = http::Response::new(()).into_parts().0;
        parts.status = info.status;
        parts.headers = headers;
        let decoder = BodyDecoder::new(info.body, u64::MAX);
        (parts, HttpBody { connection: self, decoder })
    }
}

/// The head of `request` as the worker gets it: HTTP/1.1 with the front's fields.
fn encode_head(request: &http::Request<RequestBody>) -> Bytes {
    let mut out = BytesMut::with_capacity(512);
    let target = request.uri().path_and_query().map_or("/", |target| target.as_str());
    let fields = request.headers().iter().map(|(name, value)| (name.as_str().as_bytes(), value.as_bytes()));
    request::write_head(&mut out, request.method().as_str(), target, fields);
    out.freeze()
}

/// A response body as it comes from a worker's connection.
pub(super) struct HttpBody<'c> {
    connection: &'c mut Connection,
    decoder: BodyDecoder,
}

impl HttpBody<'_> {
    /// The next piece of body among the bytes already read; `None` if they hold none.
    fn take(&mut self) -> Result<Option<Bytes>, LinkError> {
        let buf = &mut self.connection.buf;
        loop {
            let decoded = self.decoder.decode(buf).map_err(|_| malformed_body())?;
            let mut used = buf.split_to(decoded.consumed);
            if !decoded.data.is_empty() {
                used.advance(decoded.data.start);
                used.truncate(decoded.data.len());
                return Ok(Some(used.freeze()));
            }
            if decoded.consumed == 0 {
                return Ok(None);
            }
        }
    }

    /// The body has ended: whether the connection may carry another request is what the head
    /// said, provided the worker sent nothing after the body.
    fn ended(&mut self) -> Option<Result<Bytes, LinkError>> {
        if !self.connection.buf.is_empty() {
            self.connection.reusable = false;
            self.connection.unrequested = true;
        }
        None
    }

    /// What a read from the worker gave: more bytes (`None`), or the end of the body or an error.
    fn read(&mut self, read: io::Result<usize>) -> Option<Option<Result<Bytes, LinkError>>> {
        match read {
            Ok(0) => {
                self.connection.reusable = false;
                Some(match self.decoder.finish_at_close() {
                    Ok(()) => None,
                    Err(_) => Some(Err(LinkError::Response(HttpError::bad_response("the response body was cut")))),
                })
            }
            Ok(_) => None,
            Err(err) => Some(Some(Err(LinkError::Io(err)))),
        }
    }
}

fn malformed_body() -> LinkError {
    LinkError::Response(HttpError::bad_response("a malformed response body"))
}

impl WorkerBody for HttpBody<'_> {
    async fn now(&mut self) -> Poll<Option<Result<Bytes, LinkError>>> {
        loop {
            match self.take() {
                Ok(Some(piece)) => return Poll::Ready(Some(Ok(piece))),
                Ok(None) if self.decoder.is_done() => return Poll::Ready(self.ended()),
                Ok(None) => {}
                Err(err) => return Poll::Ready(Some(Err(err))),
            }
            let connection = &mut *self.connection;
            connection.buf.reserve(READ_SIZE);
            let read = match connection.stream.try_read_buf(&mut connection.buf) {
                Err(err) if err.kind() == io::ErrorKind::WouldBlock => return Poll::Pending,
                read => read,
            };
            if let Some(end) = self.read(read) {
                return Poll::Ready(end);
            }
        }
    }

    async fn next(&mut self) -> Option<Result<Bytes, LinkError>> {
        loop {
            match self.take() {
                Ok(Some(piece)) => return Some(Ok(piece)),
                Ok(None) if self.decoder.is_done() => return self.ended(),
                Ok(None) => {}
                Err(err) => return Some(Err(err)),
            }
            let connection = &mut *self.connection;
            connection.buf.reserve(READ_SIZE);
            let read = connection.stream.read_buf(&mut connection.buf).await;
            if let Some(end) = self.read(read) {
                return end;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::header;
    use tokio::io::AsyncReadExt;
    use tokio::net::UnixListener;

    /// A worker on a temporary socket that answers each connection with `answers`, one per
    /// request it reads (a request is read up to its blank line; these have no body).
    async fn worker(answers: Vec<&'static [u8]>) -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("worker.sock");
        let listener = UnixListener::bind(&path).unwrap();
        tokio::spawn(async move {
            let (mut stream, _) = listener.accept().await.unwrap();
            let mut seen = Vec::new();
            for answer in answers {
                if !next_request(&mut stream, &mut seen).await {
                    return;
                }
                stream.write_all(answer).await.unwrap();
            }
            let mut rest = Vec::new();
            let _ = stream.read_to_end(&mut rest).await;
        });
        (dir, path)
    }

    /// Reads up to the end of the next request head in `stream`, past what `seen` holds of it;
    /// false if the stream ends first.
    async fn next_request(stream: &mut tokio::net::UnixStream, seen: &mut Vec<u8>) -> bool {
        while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
            let mut chunk = [0u8; 1024];
            let n = stream.read(&mut chunk).await.unwrap();
            if n == 0 {
                return false;
            }
            seen.extend_from_slice(&chunk[..n]);
        }
        let end = seen.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
        seen.drain(..end);
        true
    }

    fn get(path: &str) -> http::Request<RequestBody> {
        let mut request = http::Request::new(RequestBody::Memory(Bytes::new()));
        *request.uri_mut() = path.parse().unwrap();
        request.headers_mut().insert(header::HOST, "a".parse().unwrap());
        request
    }

    async fn body_of(mut body: HttpBody<'_>) -> Result<Vec<u8>, LinkError> {
        let mut all = Vec::new();
        while let Some(piece) = body.next().await {
            all.extend_from_slice(&piece?);
        }
        Ok(all)
    }

    #[tokio::test]
    async fn responses_are_read_and_the_connection_kept() {
        let (_dir, path) = worker(vec![
            b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
        ])
        .await;
        let mut connection = Connection::open(&path).await.unwrap();
        let (head, body) = connection.exchange(&path, get("/1")).await.unwrap();
        assert_eq!(head.status, 200);
        assert_eq!(body_of(body).await.unwrap(), b"hello");
        let (head, body) = connection.exchange(&path, get("/2")).await.unwrap();
        assert_eq!(head.status, 200);
        assert!(
            !head.headers.contains_key(header::TRANSFER_ENCODING)
                || head.headers[header::TRANSFER_ENCODING] == "chunked"
        );
        assert_eq!(body_of(body).await.unwrap(), b"abc");
        assert!(connection.reusable);
    }

    #[tokio::test]
    async fn a_response_framed_two_ways_is_refused_and_the_connection_dropped() {
        let (_dir, path) = worker(vec![
            b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
        ])
        .await;
        let mut connection = Connection::open(&path).await.unwrap();
        let refused = connection.exchange(&path, get("/")).await.err().expect("refused");
        assert!(matches!(refused, LinkError::Response(_)), "{refused}");
        assert!(!connection.reusable);
    }

    #[tokio::test]
    async fn bytes_after_a_body_make_the_connection_unusable() {
        let (_dir, path) =
            worker(vec![b"HTTP/1.1 204 No Content\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"]).await;
        let mut connection = Connection::open(&path).await.unwrap();
        let (head, body) = connection.exchange(&path, get("/")).await.unwrap();
        assert_eq!(head.status, 204);
        assert!(body_of(body).await.unwrap().is_empty());
        assert!(!connection.is_idle_and_open(), "what followed the 204 is no answer to anything");
        assert!(connection.take_unrequested());
    }

    #[tokio::test]
    async fn a_late_response_on_an_idle_connection_ends_it_and_the_next_request_goes_on_a_new_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("worker.sock");
        let listener = UnixListener::bind(&path).unwrap();
        // Every connection answers its first request with the connection's number; the first
        // one then sends a second response nobody asked for.
        tokio::spawn(async move {
            for number in 1..=2u8 {
                let (mut stream, _) = listener.accept().await.unwrap();
                tokio::spawn(async move {
                    let mut seen = Vec::new();
                    assert!(next_request(&mut stream, &mut seen).await);
                    let answer = format!("HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\n{number}");
                    stream.write_all(answer.as_bytes()).await.unwrap();
                    if number == 1 {
                        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                        stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nstray").await.unwrap();
                    }
                    let _ = stream.read_to_end(&mut seen).await;
                });
            }
        });
        let mut connection = Connection::open(&path).await.unwrap();
        let (_, body) = connection.exchange(&path, get("/")).await.unwrap();
        assert_eq!(body_of(body).await.unwrap(), b"1");
        assert!(!connection.take_unrequested());
        tokio::time::timeout(std::time::Duration::from_secs(10), connection.closed()).await.expect("noticed");
        assert!(connection.take_unrequested());
        assert!(!connection.take_unrequested(), "reported once");
        let (_, body) = connection.exchange(&path, get("/")).await.unwrap();
        assert_eq!(body_of(body).await.unwrap(), b"2", "the answer of a new connection, not the stray one");
    }
}
