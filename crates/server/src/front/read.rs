//! Reading requests from a client: a head within its deadline, then the whole body, before the
//! request may queue.
//!
//! The rules of what is a valid request live in `headway_http1`; this file does the I/O around
//! them: the idle wait for a keep-alive connection's next request (holding no buffer), the
//! header timeout (408), the body read with its stall timeout, `100 Continue`, and the body's
//! buffering in memory or a spool.

use bytes::{Buf, BytesMut};
use http::{StatusCode, Version};
use tokio::io::AsyncReadExt;
use tokio::time::{timeout, timeout_at, Instant};

use super::body::BodySink;
use super::conn::{Connection, End, READ_CHUNK};
use super::stream::ClientStream;
use crate::job::RequestBody;
use headway_http1::body::{BodyDecoder, BodyKind};
use headway_http1::request::{parse_head, RequestHead};
use headway_http1::response::CONTINUE;
use headway_http1::HttpError;

/// The most a body read asks for at once.
const LARGE_READ: usize = 256 * 1024;

impl<S: ClientStream> Connection<S> {
    /// Reads the next request head. `None`: the client closed, or stayed idle too long, or the
    /// server is shutting down, while no request was under way. A new connection's first
    /// request is read even while shutting down: it may have waited in the kernel's backlog
    /// while the server was still listening, and its client has not had a chance yet.
    pub(super) async fn read_head(&mut self) -> Result<Option<RequestHead>, End> {
        let settings = &self.front.settings;
        let first = self.requests == 0;
        // The first request must be complete within the header timeout of the accept; later
        // ones within the header timeout of their first byte.
        let first_deadline = self.accepted_at + settings.header_timeout;
        if self.buf.is_empty() {
            // An idle connection holds no buffer: ten thousand idle keep-alive clients should
            // cost a few megabytes, not a read buffer each. The buffer comes back with the
            // next request's first bytes.
            self.buf = BytesMut::new();
            let idle_until = if first { first_deadline } else { Instant::now() + settings.keep_alive_timeout };
            self.idle_timer.as_mut().reset(idle_until);
            let _idle = self.front.stats.connection_idle();
            let (io, buf) = (&mut self.io, &mut self.buf);
            let (idle_timer, stopping) = (self.idle_timer.as_mut(), self.stopping.as_mut());
            let next_bytes = async {
                io.readable().await?;
                buf.reserve(READ_CHUNK);
                io.read_buf(buf).await
            };
            tokio::select! {
                read = next_bytes => if read? == 0 { return Ok(None) },
                () = idle_timer => return Ok(None),
                () = stopping, if !first => return Ok(None),
            }
        }
        let deadline = if first { first_deadline } else { Instant::now() + settings.header_timeout };
        let mut scanned = 0;
        loop {
            // Parse only once the blank line that ends a head has arrived (or the limit is
            // reached): re-parsing on every byte of a slowly sent head would be quadratic.
            if has_head_end(&self.buf, scanned) || self.buf.len() >= settings.limits.max_head {
                match parse_head(&self.buf, &settings.limits) {
                    Ok(Some((head, len))) => {
                        self.buf.advance(len);
                        return Ok(Some(head));
                    }
                    Ok(None) => {}
                    Err(error) => return Err(End::Refuse(error, Version::HTTP_11)),
                }
            }
            scanned = self.buf.len();
            self.buf.reserve(READ_CHUNK);
            match timeout_at(deadline, self.io.read_buf(&mut self.buf)).await {
                Ok(read) => {
                    if read? == 0 {
                        return Err(End::Gone); // closed mid-head: nobody to answer
                    }
                }
                Err(_) => {
                    let error = HttpError::new(StatusCode::REQUEST_TIMEOUT, "request header not received in time");
                    return Err(End::Refuse(error, Version::HTTP_11));
                }
            }
        }
    }

    /// Reads the whole body. Only then may the request queue.
    pub(super) async fn read_body(&mut self, head: &RequestHead) -> Result<RequestBody, End> {
        let mut sink = BodySink::new(self.front.settings.request_buffer);
        if head.body == BodyKind::Empty {
            return Ok(sink.finish());
        }
        self.send_continue(head).await?;
        // A Content-Length was checked against --max-body by the parser; a chunked body is
        // counted against it as it is decoded.
        let mut decoder = BodyDecoder::new(head.body, self.front.settings.limits.max_body);
        loop {
            let decoded = decoder.decode(&self.buf).map_err(|error| End::Refuse(error, head.version))?;
            let mut used = self.buf.split_to(decoded.consumed);
            if !decoded.data.is_empty() {
                // The data is a run of the bytes read: passed on without a copy.
                let _ = used.split_to(decoded.data.start);
                used.truncate(decoded.data.len());
                sink.push(used.freeze()).map_err(|error| End::Refuse(error, head.version))?;
            }
            if decoder.is_done() {
                return Ok(sink.finish());
            }
            if decoded.consumed == 0 {
                // A long body is read in large pieces: fewer reads, and fewer pieces to spool.
                let rest = match head.body {
                    BodyKind::Length(length) => (length - decoder.decoded()) as usize,
                    _ => READ_CHUNK,
                };
                self.buf.reserve(rest.clamp(READ_CHUNK, LARGE_READ));
                self.read_body_bytes().await?;
            }
        }
    }

    /// One read of body bytes; a client silent for the I/O timeout gets 408.
    async fn read_body_bytes(&mut self) -> Result<(), End> {
        match timeout(self.front.settings.io_timeout, self.io.read_buf(&mut self.buf)).await {
            Ok(read) if read.as_ref().is_ok_and(|&n| n > 0) => Ok(()),
            Ok(_) => Err(End::Gone),
            Err(_) => Err(End::Refuse(
                HttpError::new(StatusCode::REQUEST_TIMEOUT, "request body not received in time"),
                Version::HTTP_11,
            )),
        }
    }

    /// Tells a client that waits for it to send its body (RFC 9110 section 10.1.1).
    async fn send_continue(&mut self, head: &RequestHead) -> Result<(), End> {
        if head.expect_continue && self.buf.is_empty() {
            self.write(CONTINUE).await?;
        }
        Ok(())
    }
}

/// Whether `buf` holds the blank line that ends a head, looking only at bytes from `from`
/// on (and the three before, which may start the terminator).
fn has_head_end(buf: &[u8], from: usize) -> bool {
    let start = from.saturating_sub(3);
    let window = &buf[start..];
    window.windows(2).any(|pair| pair == b"\n\n") || window.windows(3).any(|triple| triple == b"\n\r\n")
}

#[cfg(test)]
mod tests {
    use super::has_head_end;

    #[test]
    fn finds_head_end_across_reads() {
        let head = b"GET / HTTP/1.1\r\nHost: a\r\n\r\n";
        assert!(has_head_end(head, 0));
        assert!(has_head_end(head, head.len() - 1), "terminator split across reads");
        assert!(!has_head_end(b"GET / HTTP/1.1\r\nHost: a\r\n", 0));
        assert!(has_head_end(b"GET / HTTP/1.0\n\n", 10));
    }
}
