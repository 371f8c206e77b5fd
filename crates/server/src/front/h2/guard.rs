//! The byte stream under an HTTP/2 connection, watched for what the `h2` crate does not bound
//! itself: a flood of PING or SETTINGS frames (each one costs an answer: CVE-2019-9512 and
//! CVE-2019-9515 in their CPU form), and a client that stops reading our writes.
//!
//! `h2` already keeps the memory of these floods bounded (it answers one PING or SETTINGS at a
//! time and reads nothing more until the answer is written), and it bounds CONTINUATION
//! frames, empty and small DATA frames, HPACK's table and resets on its own. What is left is the
//! rate: a client that reads its answers can make the front write them as fast as it sends. So
//! the guard reads the frame headers as they go by (9 bytes each; the payloads are `h2`'s) and
//! lets each connection have a burst of [`CONTROL_BURST`] PING and SETTINGS frames, refilled at
//! [`CONTROL_PER_SEC`] a second; past that it raises its [`Alarm`], stops reading, and the
//! connection closes with GOAWAY `ENHANCE_YOUR_CALM`.
//!
//! Writes: a client that accepts none of our bytes for the I/O timeout is gone, as for
//! HTTP/1.1; the write fails and the connection ends.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::Notify;
use tokio::time::{sleep, Instant, Sleep};

/// PING and SETTINGS frames a client may send at once.
pub(super) const CONTROL_BURST: f64 = 100.0;
/// And how many more a second after that.
pub(super) const CONTROL_PER_SEC: f64 = 10.0;

/// The client connection preface, which comes before the first frame.
pub(super) const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

const FRAME_HEADER: usize = 9;
const SETTINGS: u8 = 0x4;
const PING: u8 = 0x6;
const ACK: u8 = 0x1;

/// Raised by the guard when the client floods; the connection's task waits on it.
#[derive(Default)]
pub(super) struct Alarm {
    raised: AtomicBool,
    notify: Notify,
}

impl Alarm {
    fn raise(&self) {
        self.raised.store(true, Ordering::Relaxed);
        self.notify.notify_one();
    }

    pub(super) fn is_raised(&self) -> bool {
        self.raised.load(Ordering::Relaxed)
    }

    /// Resolves once the alarm is raised.
    pub(super) async fn raised(&self) {
        while !self.is_raised() {
            self.notify.notified().await;
        }
    }
}

pub(super) struct Guarded<S> {
    inner: S,
    frames: FrameHeaders,
    control: Budget,
    alarm: Arc<Alarm>,
    io_timeout: Duration,
    /// Runs while a write waits for the client to take bytes.
    write_stall: Option<Pin<Box<Sleep>>>,
}

impl<S> Guarded<S> {
    /// `inner` starts at the client's preface.
    pub(super) fn new(inner: S, io_timeout: Duration, alarm: Arc<Alarm>) -> Self {
        Guarded {
            inner,
            frames: FrameHeaders::new(),
            control: Budget::new(CONTROL_BURST, CONTROL_PER_SEC, Instant::now()),
            alarm,
            io_timeout,
            write_stall: None,
        }
    }

    /// Passes a write's result on; one that has waited for the client longer than the I/O
    /// timeout fails.
    fn stalled<T>(&mut self, cx: &mut Context<'_>, poll: Poll<io::Result<T>>) -> Poll<io::Result<T>> {
        if poll.is_ready() {
            self.write_stall = None;
            return poll;
        }
        let io_timeout = self.io_timeout;
        let stall = self.write_stall.get_or_insert_with(|| Box::pin(sleep(io_timeout)));
        match stall.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(io::ErrorKind::TimedOut, "client stopped reading"))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Guarded<S> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        if self.alarm.is_raised() {
            return Poll::Pending; // nothing more is read; the connection is closing
        }
        let before = buf.filled().len();
        let poll = Pin::new(&mut self.inner).poll_read(cx, buf);
        if poll.is_ready() {
            let this = &mut *self;
            let now = Instant::now();
            let control = &mut this.control;
            let flood = this.frames.scan(&buf.filled()[before..], |kind, flags| {
                !((kind == PING || kind == SETTINGS) && flags & ACK == 0) || control.take(now)
            });
            if let Some(at) = flood {
                // `h2` gets nothing from the frame over the budget on: it answers no more.
                buf.set_filled(before + at);
                this.alarm.raise();
            }
        }
        poll
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Guarded<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        let poll = Pin::new(&mut self.inner).poll_write(cx, data);
        self.stalled(cx, poll)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let poll = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.stalled(cx, poll)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let poll = Pin::new(&mut self.inner).poll_flush(cx);
        self.stalled(cx, poll)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let poll = Pin::new(&mut self.inner).poll_shutdown(cx);
        self.stalled(cx, poll)
    }
}

/// Finds the frame headers in the bytes a client sends, across reads, after its preface.
struct FrameHeaders {
    /// Preface bytes still to pass.
    preface_left: usize,
    /// The header being read, when it came split across reads.
    header: [u8; FRAME_HEADER],
    header_len: usize,
    /// Payload bytes of the current frame still to pass.
    payload_left: usize,
}

impl FrameHeaders {
    fn new() -> Self {
        FrameHeaders { preface_left: PREFACE.len(), header: [0; FRAME_HEADER], header_len: 0, payload_left: 0 }
    }

    /// Calls `frame(type, flags)` for each frame header that completes in `data`, until it
    /// returns `false`; then returns where in `data` that frame began (0 if before it).
    fn scan(&mut self, data: &[u8], mut frame: impl FnMut(u8, u8) -> bool) -> Option<usize> {
        let mut at = self.preface_left.min(data.len());
        self.preface_left -= at;
        while at < data.len() {
            if self.payload_left > 0 {
                let skip = self.payload_left.min(data.len() - at);
                self.payload_left -= skip;
                at += skip;
                continue;
            }
            let began = at.saturating_sub(self.header_len);
            let take = (FRAME_HEADER - self.header_len).min(data.len() - at);
            self.header[self.header_len..self.header_len + take].copy_from_slice(&data[at..at + take]);
            self.header_len += take;
            at += take;
            if self.header_len == FRAME_HEADER {
                let header = self.header;
                self.header_len = 0;
                self.payload_left = u32::from_be_bytes([0, header[0], header[1], header[2]]) as usize;
                if !frame(header[3], header[4]) {
                    return Some(began);
                }
            }
        }
        None
    }
}

/// A token bucket: `burst` at once, then `per_sec` a second.
struct Budget {
    tokens: f64,
    burst: f64,
    per_sec: f64,
    at: Instant,
}

impl Budget {
    fn new(burst: f64, per_sec: f64, now: Instant) -> Self {
        Budget { tokens: burst, burst, per_sec, at: now }
    }

    /// Takes one token; `false` when none is left.
    fn take(&mut self, now: Instant) -> bool {
        let refill = now.saturating_duration_since(self.at).as_secs_f64() * self.per_sec;
        self.tokens = (self.tokens + refill).min(self.burst);
        self.at = now;
        if self.tokens < 1.0 {
            return false;
        }
        self.tokens -= 1.0;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(kind: u8, flags: u8, payload: &[u8]) -> Vec<u8> {
        let len = payload.len() as u32;
        let mut out = len.to_be_bytes()[1..].to_vec();
        out.extend_from_slice(&[kind, flags, 0, 0, 0, 0]);
        out.extend_from_slice(payload);
        out
    }

    #[test]
    fn frame_headers_are_found_across_any_split_of_the_reads() {
        let mut wire = PREFACE.to_vec();
        wire.extend(frame(SETTINGS, 0, &[0; 6]));
        wire.extend(frame(0x1, 0x5, b"hpack block"));
        wire.extend(frame(PING, ACK, &[7; 8]));
        wire.extend(frame(0x0, 0x1, &[]));
        let expected = vec![(SETTINGS, 0), (0x1, 0x5), (PING, ACK), (0x0, 0x1)];
        for piece in 1..wire.len() {
            let mut headers = FrameHeaders::new();
            let mut seen = Vec::new();
            for chunk in wire.chunks(piece) {
                let stopped = headers.scan(chunk, |kind, flags| {
                    seen.push((kind, flags));
                    true
                });
                assert_eq!(stopped, None);
            }
            assert_eq!(seen, expected, "reads of {piece} bytes");
        }
        let mut headers = FrameHeaders::new();
        let ping_at = wire.len() - FRAME_HEADER - (FRAME_HEADER + 8); // before the PING and the empty DATA frame
        let stopped = headers.scan(&wire, |kind, _| kind != PING);
        assert_eq!(stopped, Some(ping_at), "where the frame that stopped the scan began");
    }

    #[test]
    fn the_budget_allows_a_burst_then_a_rate() {
        let start = Instant::now();
        let mut budget = Budget::new(3.0, 2.0, start);
        assert!((0..3).all(|_| budget.take(start)));
        assert!(!budget.take(start));
        assert!(budget.take(start + Duration::from_millis(500)), "one more after half a second");
        assert!(!budget.take(start + Duration::from_millis(500)));
        assert!((0..3).all(|_| budget.take(start + Duration::from_secs(60))), "never more than the burst");
        assert!(!budget.take(start + Duration::from_secs(60)));
    }
}
