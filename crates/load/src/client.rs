//! One simulated client: a loop that takes the next request (or pipelined batch) from its
//! thread's demand, waits for its send time, sends it on a kept-alive or fresh connection,
//! reads the answers in order and records them.
//!
//! Closed and open loop differ only in where send times come from and where latency starts:
//! the closed loop starts the clock when it sends, the open loop at the intended send time, so
//! a stalled server makes every request scheduled during the stall late (wrk2's correction,
//! applied as each sample is recorded).

use std::io;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::conn::{Connection, ReadError, Response};
use crate::http1::{ProtocolError, ResponseParser};
use crate::plan::Plan;
use crate::record::{connect_kind, io_kind, ErrorKind, Sample};
use crate::thread::{Pacing, Pending, ThreadCtx};

/// Why an exchange stopped before every request of the batch was answered.
enum Failure {
    Connect(io::Error),
    Write(io::Error),
    Read(ReadError),
    Timeout,
}

impl Failure {
    fn kind(&self) -> ErrorKind {
        match self {
            Failure::Connect(err) => connect_kind(err),
            Failure::Write(err) | Failure::Read(ReadError::Io { error: err, .. }) => io_kind(err),
            Failure::Read(ReadError::ClosedBeforeResponse | ReadError::Protocol(ProtocolError::Truncated)) => {
                ErrorKind::ClosedEarly
            }
            Failure::Read(ReadError::Protocol(_)) => ErrorKind::Malformed,
            Failure::Timeout => ErrorKind::Timeout,
        }
    }

    fn describe(&self, plan: &Plan, origin: usize) -> String {
        match self {
            Failure::Connect(err) => {
                let reason = match err.kind() {
                    io::ErrorKind::ConnectionRefused => "connection refused".to_string(),
                    _ => err.to_string(),
                };
                format!("cannot connect to {}: {reason}", plan.origins[origin].endpoint)
            }
            Failure::Write(err) => format!("write: {err}"),
            Failure::Read(ReadError::Io { error, .. }) => format!("read: {error}"),
            Failure::Read(ReadError::ClosedBeforeResponse) => "connection closed before the response".to_string(),
            Failure::Read(ReadError::Protocol(ProtocolError::Truncated)) => {
                "connection closed in the middle of the response".to_string()
            }
            Failure::Read(ReadError::Protocol(err)) => format!("malformed response: {err}"),
            Failure::Timeout => format!("no complete response within {:?}", plan.config.timeout),
        }
    }

    /// Nothing of the answer arrived: on a connection that already carried responses this is
    /// the server closing an idle keep-alive connection as the request went out.
    fn nothing_arrived(&self) -> bool {
        matches!(
            self,
            Failure::Write(_)
                | Failure::Read(ReadError::ClosedBeforeResponse)
                | Failure::Read(ReadError::Io { before_response: true, .. })
        )
    }
}

/// Runs one client until its thread's demand is used up or the run is stopped.
pub async fn client_loop(ctx: Rc<ThreadCtx>) {
    let plan = ctx.plan.clone();
    let mut client = Client {
        connections: (0..plan.origins.len()).map(|_| None).collect(),
        parser: ResponseParser::new(plan.config.tally_header.clone()),
        batch: Vec::with_capacity(plan.config.pipeline),
        origin: 0,
        write_buf: Vec::new(),
        pacing: Pacing::default(),
    };
    while client.fill_batch(&ctx) {
        client.pacing.wait(ctx.plan.model, &client.batch).await;
        client.run_batch(&ctx).await;
    }
}

struct Client {
    /// One connection per destination, opened when first needed.
    connections: Vec<Option<Connection>>,
    parser: ResponseParser,
    /// The batch in progress; requests left in it after an exchange are sent again.
    batch: Vec<Pending>,
    origin: usize,
    write_buf: Vec<u8>,
    pacing: Pacing,
}

impl Client {
    /// Takes the next batch unless requests carried over from the last one are waiting.
    /// Returns false when there is nothing left to send.
    fn fill_batch(&mut self, ctx: &ThreadCtx) -> bool {
        if ctx.stop.load(Ordering::Relaxed) {
            return false;
        }
        if !self.batch.is_empty() {
            return true;
        }
        match ctx.take(ctx.plan.config.pipeline, &mut self.batch) {
            Some(origin) => {
                self.origin = origin;
                true
            }
            None => false,
        }
    }

    /// Sends the batch and reads its answers within the timeout, then settles what is left:
    /// requests a closing connection did not answer are kept for the next round, failures are
    /// recorded (or retried once if a stale keep-alive connection caused them).
    async fn run_batch(&mut self, ctx: &ThreadCtx) {
        let plan = &ctx.plan;
        let origin = self.origin;
        let was_reused = self.connections[origin].as_ref().is_some_and(Connection::reused);
        ctx.in_flight.set(ctx.in_flight.get() + self.batch.len() as u64);
        let mut answered = 0;
        let exchange = Exchange {
            ctx,
            slot: &mut self.connections[origin],
            parser: &mut self.parser,
            batch: &self.batch,
            write_buf: &mut self.write_buf,
            answered: &mut answered,
        };
        let result = match tokio::time::timeout(plan.config.timeout, exchange.run(origin)).await {
            Ok(result) => result,
            Err(_elapsed) => Err(Failure::Timeout),
        };
        self.batch.drain(..answered);
        // What is left is either sent again (and counted in flight again then) or an error.
        ctx.in_flight.set(ctx.in_flight.get() - self.batch.len() as u64);
        let Err(failure) = result else { return };
        self.connections[origin] = None;
        if matches!(failure, Failure::Connect(_)) {
            ctx.connect_failed();
        }
        let retry = was_reused && answered == 0 && failure.nothing_arrived() && self.batch.iter().all(|p| !p.retried);
        if retry {
            self.batch.iter_mut().for_each(|p| p.retried = true);
            return;
        }
        let kind = failure.kind();
        let now = Instant::now();
        let mut state = ctx.state.borrow_mut();
        for pending in self.batch.drain(..) {
            state.recorder.record_error(kind, Some(pending.target), now, || failure.describe(plan, origin));
        }
    }
}

/// One batch on one connection; borrows the client's parts so a timeout can drop it midway
/// and still leave `answered` telling how far it got.
struct Exchange<'a> {
    ctx: &'a ThreadCtx,
    slot: &'a mut Option<Connection>,
    parser: &'a mut ResponseParser,
    batch: &'a [Pending],
    write_buf: &'a mut Vec<u8>,
    answered: &'a mut usize,
}

impl Exchange<'_> {
    async fn run(self, origin: usize) -> Result<(), Failure> {
        let plan = &self.ctx.plan;
        let started = Instant::now();
        let connection = match self.slot.take() {
            Some(connection) => connection,
            None => {
                let connection = Connection::new(plan.origins[origin].connect().await.map_err(Failure::Connect)?);
                self.ctx.state.borrow_mut().recorder.connection_opened();
                connection
            }
        };
        let connection = self.slot.insert(connection);
        let write_started = Instant::now();
        let connect = write_started - started;

        let bytes: &[u8] = match self.batch {
            [one] => &plan.targets[one.target].request,
            many => {
                self.write_buf.clear();
                for pending in many {
                    self.write_buf.extend_from_slice(&plan.targets[pending.target].request);
                }
                &self.write_buf[..]
            }
        };
        connection.write_all(bytes).await.map_err(Failure::Write)?;
        let written = Instant::now();
        let write = written - write_started;

        for (i, pending) in self.batch.iter().enumerate() {
            self.parser.begin(plan.head_request);
            let Response { done, first_byte_at } =
                connection.read_response(self.parser).await.map_err(Failure::Read)?;
            let completed_at = Instant::now();
            let sample = Sample {
                target: pending.target,
                status: Some(done.status),
                body_bytes: done.body_bytes,
                connect: if i == 0 { connect } else { Duration::ZERO },
                write,
                wait: first_byte_at.saturating_duration_since(written),
                read: completed_at.saturating_duration_since(first_byte_at),
                latency: completed_at.saturating_duration_since(pending.intended.unwrap_or(started)),
                send_lag: pending.intended.map_or(Duration::ZERO, |t| started.saturating_duration_since(t)),
                completed_at,
                // Answers without the header are tallied under "", so the tally adds up.
                tally: plan.config.tally_header.as_ref().map(|_| self.parser.tally_value().unwrap_or_default()),
            };
            self.ctx.state.borrow_mut().recorder.record(&sample);
            self.ctx.in_flight.set(self.ctx.in_flight.get() - 1);
            *self.answered += 1;
            if !done.keep_alive || !plan.config.keep_alive {
                // The rest of the batch (if any) goes out again on a new connection.
                *self.slot = None;
                return Ok(());
            }
        }
        Ok(())
    }
}
