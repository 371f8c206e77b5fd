//! The WebSocket mode (`--websocket`): each client holds one socket per URL, opened by
//! tokio-tungstenite's handshake over the same TCP or unix connection the HTTP mode uses, and
//! sends a binary message of `--message-size` bytes whenever the demand says (closed loop: as
//! soon as the echo of its previous message is back; open loop: at the message's intended send
//! time), then times the echo.
//!
//! The sockets are opened before the run's clock starts, so that the messages are timed on open
//! sockets, as an app's are, and not behind a thousand handshakes. A message is to this mode what
//! a request is to the HTTP mode: taken from the same demand, timed from its send (or intended
//! send) time to its echo, and recorded in the same histograms, series and report. A socket that
//! cannot be opened, whose handshake is refused, that closes, errs or stays silent past the
//! timeout costs the message its answer, as an error of that kind; the next message opens a new
//! socket (and its handshake counts in that message's time). Handshakes are counted by status,
//! as the HTTP mode counts responses.

use std::io;
use std::rc::Rc;
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::{HeaderName, HeaderValue};
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::{Bytes, Error as WsError, Message};
use tokio_tungstenite::{client_async_with_config, WebSocketStream};

use crate::conn::Stream;
use crate::plan::Plan;
use crate::record::{io_kind, ErrorKind, Recorder, Sample};
use crate::thread::{Pacing, Pending, ThreadCtx};

/// Read buffer of a socket. tungstenite allocates it whole for every socket (128 KiB unless
/// told), which a thousand sockets would feel; larger messages are read in several pieces.
const READ_BUFFER: usize = 8 * 1024;

type Socket = WebSocketStream<Stream>;

/// A client's sockets, one per URL, and what opening them before the run found.
pub struct Sockets {
    by_target: Vec<Option<Socket>>,
    /// Connections made, and the statuses their handshakes got, by URL.
    connections: u64,
    handshakes: Vec<(usize, u16)>,
}

impl Sockets {
    /// Counts the connections and handshakes made before the run, now that it has a recorder.
    pub fn record(&self, recorder: &mut Recorder) {
        (0..self.connections).for_each(|_| recorder.connection_opened());
        for &(target, status) in &self.handshakes {
            recorder.record_handshake(target, status);
        }
    }
}

/// Opens the sockets of `clients` clients, one to each URL, all at once, each within the
/// timeout. One that cannot be opened now is tried again by the first message that needs it,
/// which then counts the failure.
pub async fn open_before(plan: &Plan, clients: usize) -> Vec<Sockets> {
    let open_one = |target: usize| async move {
        let opened = tokio::time::timeout(plan.config.timeout, open(plan, target)).await;
        (target, opened.unwrap_or(Err(Failure::Timeout(plan.config.timeout))))
    };
    let open_all = |_| async move {
        let mut sockets = Sockets {
            by_target: (0..plan.targets.len()).map(|_| None).collect(),
            connections: 0,
            handshakes: Vec::new(),
        };
        for (target, opened) in futures_util::future::join_all((0..plan.targets.len()).map(open_one)).await {
            let (socket, connected, status) = match opened {
                Ok(socket) => (Some(socket), true, Some(101)),
                Err(Failure::Refused(status)) => (None, true, Some(status)),
                Err(Failure::Connect(_) | Failure::Timeout(_)) => (None, false, None),
                Err(_) => (None, true, None),
            };
            sockets.by_target[target] = socket;
            sockets.connections += u64::from(connected);
            sockets.handshakes.extend(status.map(|status| (target, status)));
        }
        sockets
    };
    futures_util::future::join_all((0..clients).map(open_all)).await
}

/// Runs one client until its thread's demand is used up or the run is stopped.
pub async fn socket_loop(ctx: Rc<ThreadCtx>, mut sockets: Sockets) {
    let plan = ctx.plan.clone();
    let mut pacing = Pacing::default();
    let mut batch = Vec::with_capacity(1);
    let mut message = Outgoing::default();
    while let Some(origin) = ctx.take(1, &mut batch) {
        let pending = batch.pop().expect("one message taken");
        pacing.wait(plan.model, &[pending]).await;
        message.next(plan.config.message_size);
        ctx.in_flight.set(ctx.in_flight.get() + 1);
        let socket = &mut sockets.by_target[pending.target];
        let sent = tokio::time::timeout(plan.config.timeout, exchange(&ctx, socket, pending, &message)).await;
        ctx.in_flight.set(ctx.in_flight.get() - 1);
        let failure = match sent {
            Ok(Ok(())) => continue,
            Ok(Err(failure)) => failure,
            Err(_elapsed) => Failure::Timeout(plan.config.timeout),
        };
        *socket = None;
        if matches!(failure, Failure::Connect(_)) {
            ctx.connect_failed();
        }
        let mut state = ctx.state.borrow_mut();
        state
            .recorder
            .record_error(failure.kind(), Some(pending.target), Instant::now(), || failure.describe(&plan, origin));
    }
}

/// The message a client sends: its number in the first bytes (so an echo of another message
/// cannot pass for this one's), the rest filler.
#[derive(Default)]
struct Outgoing {
    number: u64,
    payload: Bytes,
}

impl Outgoing {
    fn next(&mut self, size: usize) {
        self.number += 1;
        let mut payload = vec![b'.'; size];
        let number = self.number.to_le_bytes();
        let stamped = size.min(number.len());
        payload[..stamped].copy_from_slice(&number[..stamped]);
        self.payload = payload.into();
    }
}

/// Why a message got no echo.
enum Failure {
    Connect(io::Error),
    /// The handshake was answered with this status.
    Refused(u16),
    /// The socket failed (handshake included).
    Socket(WsError),
    /// The server closed the socket, with this code and reason if it said.
    Closed(Option<(u16, String)>),
    /// Something came back that is not the echo.
    NotTheEcho,
    Timeout(Duration),
}

impl Failure {
    fn kind(&self) -> ErrorKind {
        match self {
            Failure::Connect(err) if err.kind() == io::ErrorKind::ConnectionRefused => ErrorKind::ConnectRefused,
            Failure::Connect(_) => ErrorKind::Connect,
            Failure::Refused(_) => ErrorKind::HandshakeRefused,
            Failure::Socket(WsError::Io(err)) => io_kind(err),
            Failure::Socket(WsError::ConnectionClosed | WsError::AlreadyClosed) | Failure::Closed(_) => {
                ErrorKind::ClosedEarly
            }
            Failure::Socket(_) | Failure::NotTheEcho => ErrorKind::Malformed,
            Failure::Timeout(_) => ErrorKind::Timeout,
        }
    }

    fn describe(&self, plan: &Plan, origin: usize) -> String {
        match self {
            Failure::Connect(err) => format!("cannot connect to {}: {err}", plan.origins[origin].endpoint),
            Failure::Refused(status) => format!("WebSocket handshake answered {status}, not 101"),
            Failure::Socket(err) => format!("WebSocket: {err}"),
            Failure::Closed(Some((code, reason))) => format!("the server closed the socket: {code} {reason}"),
            Failure::Closed(None) => "the server closed the socket".to_string(),
            Failure::NotTheEcho => "the answer is not the echo of the message".to_string(),
            Failure::Timeout(timeout) => format!("no echo within {timeout:?}"),
        }
    }
}

/// Sends one message on the client's socket to its URL (opening one first if there is none)
/// and records its echo.
async fn exchange(
    ctx: &ThreadCtx,
    socket: &mut Option<Socket>,
    pending: Pending,
    message: &Outgoing,
) -> Result<(), Failure> {
    let started = Instant::now();
    let socket = match socket {
        Some(socket) => socket,
        None => {
            let opened = open(&ctx.plan, pending.target).await;
            let mut state = ctx.state.borrow_mut();
            if !matches!(opened, Err(Failure::Connect(_))) {
                state.recorder.connection_opened();
            }
            match &opened {
                Ok(_) => state.recorder.record_handshake(pending.target, 101),
                Err(Failure::Refused(status)) => state.recorder.record_handshake(pending.target, *status),
                Err(_) => {}
            }
            socket.insert(opened?)
        }
    };
    let write_started = Instant::now();
    socket.send(Message::Binary(message.payload.clone())).await.map_err(Failure::Socket)?;
    let written = Instant::now();
    let echo = loop {
        match socket.next().await {
            Some(Ok(Message::Binary(echo))) => break echo,
            // Pings are answered by tungstenite as it reads.
            Some(Ok(Message::Ping(_) | Message::Pong(_))) => {}
            Some(Ok(Message::Close(frame))) => {
                return Err(Failure::Closed(frame.map(|frame| (frame.code.into(), frame.reason.to_string()))))
            }
            Some(Ok(_)) => return Err(Failure::NotTheEcho),
            Some(Err(err)) => return Err(Failure::Socket(err)),
            None => return Err(Failure::Closed(None)),
        }
    };
    if echo != message.payload {
        return Err(Failure::NotTheEcho);
    }
    let completed_at = Instant::now();
    let sample = Sample {
        target: pending.target,
        status: None,
        body_bytes: echo.len() as u64,
        connect: write_started - started,
        write: written - write_started,
        wait: completed_at - written,
        read: Duration::ZERO,
        latency: completed_at.saturating_duration_since(pending.intended.unwrap_or(started)),
        send_lag: pending.intended.map_or(Duration::ZERO, |t| started.saturating_duration_since(t)),
        completed_at,
        tally: None,
    };
    ctx.state.borrow_mut().recorder.record(&sample);
    Ok(())
}

/// Opens a socket to `target`'s URL.
async fn open(plan: &Plan, target: usize) -> Result<Socket, Failure> {
    let origin =
        plan.origins.iter().position(|origin| origin.targets.contains(&target)).expect("every URL has an origin");
    let stream = plan.origins[origin].connect().await.map_err(Failure::Connect)?;
    let mut request = plan.targets[target].url.as_str().into_client_request().map_err(Failure::Socket)?;
    let headers = request.headers_mut();
    // Checked as tokens and values by the plan.
    for (name, value) in &plan.config.headers {
        if let (Ok(name), Ok(value)) = (HeaderName::try_from(name.as_str()), HeaderValue::try_from(value.as_str())) {
            headers.insert(name, value);
        }
    }
    if let Some(Ok(host)) = plan.config.host.as_deref().map(HeaderValue::try_from) {
        headers.insert("host", host);
    }
    let config = WebSocketConfig::default().read_buffer_size(READ_BUFFER).write_buffer_size(0);
    match client_async_with_config(request, stream, Some(config)).await {
        Ok((socket, _)) => Ok(socket),
        Err(WsError::Http(response)) => Err(Failure::Refused(response.status().as_u16())),
        Err(err) => Err(Failure::Socket(err)),
    }
}
