//! Reading requests from a client: a head within its deadline, then the whole body, before the
//! request may queue.
//!
//! The rules of what is a valid request live in `headway_http1`; this file does the I/O around
//! them: the idle wait for a keep-alive connection's next request (holding no buffer), the
//! header timeout (408), the body read with its stall timeout, `100 Continue`, and the body's
//! buffering in memory or a spool.
//!
//! One kind of body may queue before its end: a large one, with a `Content-Length`, that its
//! client sends at least as fast as [`KEEPS_PACE`]. Reading it whole first would put the client's
//! sending and the app's reading one after the other, for a client that holds nobody up; queued
//! early, the slot reads it as it arrives. The rest must then keep to that schedule (give or take
//! [`LATE`]), or the client gets 408 and the app a body cut short: a client that slows down after
//! it queued cannot hold a slot at a slow client's pace. A slow client, or a chunked body, is read
//! whole first, as every other.

use std::future::Future;
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use http::{StatusCode, Version};
use tokio::io::AsyncReadExt;
use tokio::time::{timeout_at, Instant};

use super::body::{BodySink, RestOfBody};
use super::conn::{Connection, End, READ_CHUNK};
use super::stream::ClientStream;
use crate::queue::job::RequestBody;
use crate::spool::KEEPS_PACE;
use headway_http1::body::{BodyDecoder, BodyKind};
use headway_http1::request::{parse_head, RequestHead, NOT_HTTP};
use headway_http1::response::CONTINUE;
use headway_http1::HttpError;

/// The most a body read asks for at once.
const LARGE_READ: usize = 256 * 1024;

/// How far behind the schedule it kept until it queued a body queued early may fall.
const LATE: Duration = Duration::from_secs(1);

/// A body queued early: what takes its rest, and how to read it.
pub(super) struct BodyToCome {
    rest: RestOfBody,
    /// Data decoded but not yet given to `rest`.
    next: Option<Bytes>,
    decoder: BodyDecoder,
    /// Its `Content-Length`.
    length: u64,
    /// When its first byte was awaited: the start of its client's schedule.
    started: Instant,
}

/// Whether `received` bytes since `started` came at least as fast as a client sending at
/// [`KEEPS_PACE`].
fn keeps_pace(started: Instant, received: u64) -> bool {
    started.elapsed() <= pace_time(received)
}

/// How long a client keeping pace takes to send `bytes`.
fn pace_time(bytes: u64) -> Duration {
    Duration::from_secs_f64(bytes as f64 / KEEPS_PACE as f64)
}

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
            // The read first: it is what wakes the connection nearly every time, and then the
            // timer and the shutdown signal are not polled again (each a lock of its own).
            tokio::select! {
                biased;
                read = read_when_ready(io, buf) => if read? == 0 { return Ok(None) },
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
                    // A connection that never spoke HTTP/1.x is closed on; one that did is told.
                    Err(error) if error == NOT_HTTP && first => return Err(End::Gone),
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

    /// Reads the body: the whole of it, or, for a large body with a `Content-Length` whose
    /// client sends it fast, as much as has come when that is clear. The request may queue then;
    /// [`Connection::read_rest`] reads what is still to come.
    pub(super) async fn read_body(&mut self, head: &RequestHead) -> Result<(RequestBody, Option<BodyToCome>), End> {
        let front = self.front.clone();
        let mut sink = BodySink::new(&front.settings.request_spool);
        if head.body == BodyKind::Empty {
            return Ok((sink.finish(), None));
        }
        self.send_continue(head).await?;
        let started = Instant::now();
        // A Content-Length was checked against --max-body by the parser; a chunked body is
        // counted against it as it is decoded.
        let mut decoder = BodyDecoder::new(head.body, self.front.settings.limits.max_body);
        loop {
            let refuse = |error| End::Refuse(error, head.version);
            let (data, consumed) = self.take_decoded(&mut decoder).map_err(refuse)?;
            if let Some(data) = data {
                // The moment a body outgrows memory is the moment to judge its client.
                if let BodyKind::Length(length) = head.body {
                    let sent = sink.len() + data.len() as u64;
                    if sink.would_spill(data.len()) && !decoder.is_done() && keeps_pace(started, sent) {
                        let (body, rest) = sink.queue_early(length);
                        let to_come = BodyToCome { rest, next: Some(data), decoder, length, started };
                        return Ok((body, Some(to_come)));
                    }
                }
                sink.push(data).map_err(refuse)?;
            }
            if decoder.is_done() {
                return Ok((sink.finish(), None));
            }
            if !consumed {
                let left = match head.body {
                    BodyKind::Length(length) => Some(length - decoder.decoded()),
                    _ => None,
                };
                self.read_body_bytes(left, Instant::now() + self.front.settings.io_timeout, head.version).await?;
            }
        }
    }

    /// Reads the rest of a body queued early, on the schedule its client kept so far: one that
    /// falls behind it by more than [`LATE`] gets 408, and the app sees the body cut short, so
    /// that no client holds a slot at a slow client's pace.
    pub(super) async fn read_rest(&mut self, to_come: BodyToCome, version: Version) -> Result<(), End> {
        let BodyToCome { mut rest, mut next, mut decoder, length, mut started } = to_come;
        loop {
            let refuse = |error| End::Refuse(error, version);
            let (data, consumed) = match next.take() {
                Some(data) => (Some(data), true),
                None => self.take_decoded(&mut decoder).map_err(refuse)?,
            };
            if let Some(data) = data {
                // Waiting for the slot to make room is not the client's time.
                started += rest.push(data).await.map_err(refuse)?;
            }
            if decoder.is_done() {
                rest.finish();
                return Ok(());
            }
            if !consumed {
                let due = started + pace_time(decoder.decoded()) + LATE;
                let deadline = due.min(Instant::now() + self.front.settings.io_timeout);
                self.read_body_bytes(Some(length - decoder.decoded()), deadline, version).await?;
            }
        }
    }

    /// Decodes what the buffer holds of the body: its data, if any (a run of the bytes read,
    /// passed on without a copy), and whether any of the buffer was used.
    fn take_decoded(&mut self, decoder: &mut BodyDecoder) -> Result<(Option<Bytes>, bool), HttpError> {
        let decoded = decoder.decode(&self.buf)?;
        let mut used = self.buf.split_to(decoded.consumed);
        if decoded.data.is_empty() {
            return Ok((None, decoded.consumed > 0));
        }
        let _ = used.split_to(decoded.data.start);
        used.truncate(decoded.data.len());
        Ok((Some(used.freeze()), true))
    }

    /// One read of body bytes (`left` of them to come, if known); a client silent until
    /// `deadline` gets 408, in its request's `version`. A long body is read in large pieces:
    /// fewer reads, and fewer pieces to spool.
    async fn read_body_bytes(&mut self, left: Option<u64>, deadline: Instant, version: Version) -> Result<(), End> {
        let want = left.map_or(READ_CHUNK, |left| usize::try_from(left).unwrap_or(usize::MAX));
        self.buf.reserve(want.clamp(READ_CHUNK, LARGE_READ));
        match timeout_at(deadline, self.io.read_buf(&mut self.buf)).await {
            Ok(read) if read.as_ref().is_ok_and(|&n| n > 0) => Ok(()),
            Ok(_) => Err(End::Gone),
            Err(_) => Err(End::Refuse(
                HttpError::new(StatusCode::REQUEST_TIMEOUT, "request body not received in time"),
                version,
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

    /// Awaits `work` (a request's outcome, or the next piece of a response that streams) while
    /// watching the client: bytes it sends meanwhile (pipelined requests, up to one head's worth)
    /// are kept for later; if it hangs up, `End::Gone`, and the caller drops what it waited on,
    /// which withdraws a waiting request or tells the slot of a streaming response that its
    /// client left (an app waiting to hear it gets `http.disconnect`). A silent client costs no
    /// read buffer.
    pub(super) async fn watching_client<T>(&mut self, work: impl Future<Output = T>) -> Result<T, End> {
        tokio::pin!(work);
        loop {
            let read_ahead = self.buf.len() < self.front.settings.limits.max_head;
            tokio::select! {
                biased;
                done = &mut work => return Ok(done),
                read = read_when_ready(&mut self.io, &mut self.buf), if read_ahead => {
                    if !matches!(read, Ok(n) if n > 0) {
                        return Err(End::Gone);
                    }
                }
            }
        }
    }
}

/// Reads what the client sends next into `buf`, holding no more of it than it holds already
/// while the client is silent: room is made only once the socket says it has bytes, and given back
/// when it had none after all (a socket says so when it is new, and after spurious wakes), so a
/// thousand silent connections hold no read buffers.
pub(super) async fn read_when_ready<S: ClientStream>(io: &mut S, buf: &mut BytesMut) -> std::io::Result<usize> {
    loop {
        io.readable().await?;
        let had = buf.len();
        buf.reserve(READ_CHUNK);
        match io.try_read_buf(buf) {
            Err(err) if err.kind() == std::io::ErrorKind::WouldBlock => {
                if had == 0 {
                    *buf = BytesMut::new();
                }
            }
            read => return read,
        }
    }
}

/// Whether `buf` holds the blank line that ends a head (`\n\n` or `\n\r\n`), looking only at
/// bytes from `from` on (and the two before, which may start the terminator). A head has a
/// line feed every few dozen bytes, so this jumps from one to the next (`memchr`) rather
/// than comparing every position.
fn has_head_end(buf: &[u8], from: usize) -> bool {
    let start = from.saturating_sub(2);
    memchr::memchr_iter(b'\n', &buf[start..])
        .any(|at| matches!(&buf[start + at + 1..], [b'\n', ..] | [b'\r', b'\n', ..]))
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
        assert!(has_head_end(b"GET / HTTP/1.0\n\n", 15), "only the last byte is new");
        assert!(!has_head_end(b"GET / HTTP/1.1\r\nHost: a\r\n\r", 0), "the blank line's feed yet to come");
        assert!(!has_head_end(b"GET / HTTP/1.1\r\nHost: a\r\nX: \r\r\n", 0), "a lone CR ends no head");
    }
}
