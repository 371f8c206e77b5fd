//! `--http2`: each connection speaks HTTP/2 (h2 by ALPN for `https://`, prior knowledge for
//! `http://`) and carries `--streams` requests at once, as h2load's `-c N -m M` does.
//!
//! Each stream is a client of its own, with the HTTP/1.1 client's loop ([`crate::client`]): it
//! takes the next request from its thread's demand, waits for its send time, sends it and reads
//! the answer whole, and records it. So the latency is measured the same way, from the send
//! (closed loop) or from the intended send time (open loop), and a stall of the server makes
//! every request scheduled during it late. The streams of a connection share it: the first one
//! to need it opens it, the others wait for that, and a connection that fails is opened anew by
//! the next request.
//!
//! The protocol is hyper's `h2` crate, the client side of the one the front serves with.

use std::io;
use std::rc::Rc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use h2::client::SendRequest;
use tokio::task::JoinSet;

use crate::record::{connect_kind, io_kind, ErrorKind, Sample};
use crate::thread::{Pacing, Pending, ThreadCtx};

/// One connection's worth of clients: its streams, until the demand is used up.
pub async fn connection_loop(ctx: Rc<ThreadCtx>) {
    let connection = Rc::new(Shared { senders: (0..ctx.plan.origins.len()).map(|_| Default::default()).collect() });
    let mut streams = JoinSet::new();
    for _ in 0..ctx.plan.config.streams {
        streams.spawn_local(stream_loop(ctx.clone(), connection.clone()));
    }
    while streams.join_next().await.is_some() {}
}

/// The connection to each origin, shared by the streams of one client.
struct Shared {
    senders: Vec<tokio::sync::Mutex<Option<SendRequest<Bytes>>>>,
}

impl Shared {
    /// A handle on the connection to `origin`, opened now if there is none, and how long the
    /// opening took (zero when it was open).
    async fn sender(&self, ctx: &ThreadCtx, origin: usize) -> Result<(SendRequest<Bytes>, Duration), Failure> {
        let mut slot = self.senders[origin].lock().await;
        if let Some(sender) = slot.as_ref() {
            return Ok((sender.clone(), Duration::ZERO));
        }
        let started = Instant::now();
        let stream = ctx.plan.origins[origin].connect().await.map_err(Failure::Connect)?;
        let (sender, connection) = h2::client::handshake(stream).await.map_err(Failure::Http2)?;
        tokio::task::spawn_local(async move {
            let _ = connection.await; // its end shows in the streams' errors
        });
        ctx.state.borrow_mut().recorder.connection_opened();
        Ok((slot.insert(sender).clone(), started.elapsed()))
    }

    /// Forgets a connection that failed, so the next request opens another.
    async fn forget(&self, origin: usize) {
        *self.senders[origin].lock().await = None;
    }
}

enum Failure {
    Connect(io::Error),
    Http2(h2::Error),
    Timeout,
}

impl Failure {
    fn kind(&self) -> ErrorKind {
        match self {
            Failure::Connect(err) => connect_kind(err),
            Failure::Http2(err) => match err.get_io() {
                Some(io) => io_kind(io),
                None if err.is_go_away() || err.is_remote() => ErrorKind::ClosedEarly,
                None => ErrorKind::Malformed,
            },
            Failure::Timeout => ErrorKind::Timeout,
        }
    }

    fn describe(&self, ctx: &ThreadCtx, origin: usize) -> String {
        match self {
            Failure::Connect(err) => format!("cannot connect to {}: {err}", ctx.plan.origins[origin].endpoint),
            Failure::Http2(err) => format!("HTTP/2: {err}"),
            Failure::Timeout => format!("no complete response within {:?}", ctx.plan.config.timeout),
        }
    }

    /// Whether the connection is no use any more (a stream's own reset leaves it be).
    fn ends_connection(&self) -> bool {
        !matches!(self, Failure::Http2(err) if err.is_reset() && !err.is_go_away())
    }
}

/// One stream's client.
async fn stream_loop(ctx: Rc<ThreadCtx>, connection: Rc<Shared>) {
    let mut pacing = Pacing::default();
    let mut batch = Vec::with_capacity(1);
    loop {
        batch.clear();
        let Some(origin) = ctx.take(1, &mut batch) else { return };
        let pending = batch[0];
        pacing.wait(ctx.plan.model, &batch).await;
        ctx.in_flight.set(ctx.in_flight.get() + 1);
        let exchange = exchange(&ctx, &connection, origin, pending);
        let result = match tokio::time::timeout(ctx.plan.config.timeout, exchange).await {
            Ok(result) => result,
            Err(_elapsed) => Err(Failure::Timeout),
        };
        ctx.in_flight.set(ctx.in_flight.get() - 1);
        let Err(failure) = result else { continue };
        if matches!(failure, Failure::Connect(_)) {
            ctx.connect_failed();
        }
        if failure.ends_connection() {
            connection.forget(origin).await;
        }
        let describe = || failure.describe(&ctx, origin);
        ctx.state.borrow_mut().recorder.record_error(failure.kind(), Some(pending.target), Instant::now(), describe);
    }
}

/// Sends one request and reads its answer whole; records it.
async fn exchange(ctx: &ThreadCtx, connection: &Shared, origin: usize, pending: Pending) -> Result<(), Failure> {
    let plan = &ctx.plan;
    let started = Instant::now();
    let (sender, connect) = connection.sender(ctx, origin).await?;
    let target = plan.targets[pending.target].http2.as_ref().expect("--http2 plans every target for it");
    let mut sender = sender.ready().await.map_err(Failure::Http2)?;
    let write_started = Instant::now();
    let (response, mut body) = sender.send_request(target.request(), target.body.is_empty()).map_err(Failure::Http2)?;
    if !target.body.is_empty() {
        body.send_data(target.body.clone(), true).map_err(Failure::Http2)?;
    }
    let written = Instant::now();
    let response = response.await.map_err(Failure::Http2)?;
    let first_byte_at = Instant::now();
    let status = response.status().as_u16();
    let tally = plan
        .config
        .tally_header
        .as_ref()
        .map(|name| response.headers().get(name.as_str()).map_or_else(Vec::new, |value| value.as_bytes().to_vec()));
    let mut body = response.into_body();
    let mut body_bytes = 0;
    while let Some(data) = body.data().await {
        let data = data.map_err(Failure::Http2)?;
        body_bytes += data.len() as u64;
        let _ = body.flow_control().release_capacity(data.len());
    }
    let completed_at = Instant::now();
    let sample = Sample {
        target: pending.target,
        status: Some(status),
        body_bytes,
        connect,
        write: written - write_started,
        wait: first_byte_at.saturating_duration_since(written),
        read: completed_at.saturating_duration_since(first_byte_at),
        latency: completed_at.saturating_duration_since(pending.intended.unwrap_or(started)),
        send_lag: pending.intended.map_or(Duration::ZERO, |t| started.saturating_duration_since(t)),
        completed_at,
        // Answers without the header are tallied under "", so the tally adds up.
        tally: tally.as_deref(),
    };
    ctx.state.borrow_mut().recorder.record(&sample);
    Ok(())
}
