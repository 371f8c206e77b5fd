//! An open WebSocket: the client's connection and the worker's, relayed both ways until a side
//! closes, the socket idles past `--websocket-idle-timeout`, the client breaks a rule, or the
//! worker's process is about to go (reload, replacement, shutdown).
//!
//! The front relays bytes, not messages: a payload is read once, written once, never unmasked
//! (a fragmented message waits whole in memory until its last header shows that it fits).
//! It walks the frame headers of both directions ([`frames`]) for three things: a
//! client message over `--max-websocket-message` is refused before any of it reaches the app
//! (1009), as is one that would hold more than `--max-websocket-held` has left (1013), a frame no
//! client may send is refused (1002), and the front's own close frames go in
//! only between two frames and only to a side that has not been sent one already. When the front
//! closes a socket (idle, reload, shutdown) both sides get 1001 (going away): the app and the
//! client each learn that the other end is gone and may come back.
//!
//! A quiet socket is not a dead one: a chat client may say nothing for an hour. So while nothing
//! moves, the front pings the client every `--websocket-ping-interval` (between two frames, as
//! its close frames); a live client's pong is a move, which the idle timeout waits for, and goes
//! on to the app, which may ignore it (RFC 6455 section 5.5.3: an unsolicited pong needs no
//! answer). The ping itself moves nothing: a client that answers none is closed when the idle
//! timeout comes.
//!
//! A socket holds no slot and is counted apart from HTTP connections, so a graceful shutdown
//! first drains the requests, then closes the sockets.

pub(super) mod frames;
mod reservation;
mod settings;

use std::future::Future;
use std::hash::{BuildHasher, RandomState};
use std::io;
use std::time::Duration;

use bytes::{Buf, BytesMut};
use tokio::io::{split, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::time::{sleep_until, timeout, timeout_at, Instant};
use tracing::debug;

use crate::front::conn::Connection;
use crate::front::stream::ClientStream;
use crate::ops::stats::Gauge;
use crate::queue::job::WorkerSocket;
use frames::{close_frame, Frames, Violation, GOING_AWAY, PING_FRAME, TRY_AGAIN_LATER};

pub use settings::WebSocketSettings;

/// Read size of each direction. Each open socket holds two such buffers at most.
const READ_CHUNK: usize = 8 * 1024;
/// After one side has closed its connection, how long the other has to close too.
const HALF_CLOSED_TIME: Duration = Duration::from_secs(5);
/// When the front closes a socket: how long a frame under way may take to finish, so that the
/// close frame comes after it ...
const FRAME_FINISH_TIME: Duration = Duration::from_secs(1);
/// ... and how long the close frames and the client's reply to them may take. A socket the
/// front closes is gone within the sum of the two.
const CLOSE_TIME: Duration = Duration::from_secs(1);

/// A WebSocket the worker accepted, with the place it holds among the open ones.
pub(super) struct WebSocket {
    pub socket: WorkerSocket,
    pub admitted: Gauge,
}

/// Why a relay stopped.
enum Ending {
    /// Both sides closed their connections, or one did and the other let the time pass.
    Closed,
    /// A connection broke: nothing more can be said on it.
    Broken(io::Error),
    /// The front closes the socket: `to_client` for the client, 1001 for the worker.
    Close { to_client: (u16, &'static str), to_worker: &'static str },
}

impl<S: ClientStream> Connection<S> {
    /// Relays the socket until it ends. Bytes the client sent after its handshake (read while
    /// the handshake waited) go first.
    pub(super) async fn carry(&mut self, websocket: WebSocket) {
        let WebSocket { socket, admitted: _admitted } = websocket;
        let _open = self.front.stats.websocket_opened();
        let WorkerSocket { io, compressed, mut closing, held: _held } = socket;
        let early = self.buf.split();
        let settings = &self.front.settings.websocket;
        let closing = async move {
            // A worker that is gone for good closes nothing any more: wait on the rest then.
            if closing.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        };
        relay(&mut self.io, early, io, compressed, settings, closing).await;
    }
}

/// Relays between `client` and `worker` until the socket ends; see the module comment.
async fn relay<C, W>(
    client: C,
    early: BytesMut,
    worker: W,
    compressed: bool,
    settings: &WebSocketSettings,
    closing: impl Future<Output = ()>,
) where
    C: AsyncRead + AsyncWrite + Unpin,
    W: AsyncRead + AsyncWrite + Unpin,
{
    let (client_reads, client_writes) = split(client);
    let (worker_reads, worker_writes) = split(worker);
    let client_frames = Frames::from_client(settings.max_message, compressed, settings.held.clone());
    let mut up = Pump::new(client_reads, worker_writes, client_frames, early);
    let mut down = Pump::new(worker_reads, client_writes, Frames::from_worker(), BytesMut::new());
    let ending = run(&mut up, &mut down, settings.idle_timeout, settings.ping_interval, closing).await;
    match ending {
        Ending::Closed => {}
        Ending::Broken(err) => debug!("WebSocket connection broke: {err}"),
        Ending::Close { to_client, to_worker } => close(&mut up, &mut down, to_client, to_worker).await,
    }
}

/// Moves bytes both ways until something ends the socket.
async fn run<C, W>(
    up: &mut Pump<C, W>,
    down: &mut Pump<W, C>,
    idle_timeout: Duration,
    ping_interval: Option<Duration>,
    closing: impl Future<Output = ()>,
) -> Ending
where
    C: AsyncRead + AsyncWrite + Unpin,
    W: AsyncRead + AsyncWrite + Unpin,
{
    tokio::pin!(closing);
    // The idle timer is reset lazily: every move notes the time, and the timer, when it fires,
    // starts over from the last move unless that was long enough ago.
    let mut last_move = Instant::now();
    let idle = sleep_until(last_move + idle_timeout);
    tokio::pin!(idle);
    // The same lazy way for the ping: due once nothing has moved for a whole interval.
    let ping_every = ping_interval.unwrap_or(idle_timeout);
    let ping = sleep_until(last_move + ping_every);
    tokio::pin!(ping);
    let mut half_closed_until = None;
    loop {
        let moved = tokio::select! {
            () = &mut ping, if ping_interval.is_some() => {
                let next = if last_move.elapsed() < ping_every {
                    last_move + ping_every
                } else {
                    if down.between_frames() {
                        if let Err(err) = down.to.write_all(&PING_FRAME).await {
                            return Ending::Broken(err);
                        }
                    }
                    Instant::now() + ping_every
                };
                ping.as_mut().reset(next);
                continue;
            }
            moved = up.step(), if !up.ended => moved.map_err(|stop| (stop, true)),
            moved = down.step(), if !down.ended => moved.map_err(|stop| (stop, false)),
            () = &mut idle => {
                if last_move.elapsed() >= idle_timeout {
                    return Ending::Close { to_client: (GOING_AWAY, "idle timeout"), to_worker: "idle timeout" };
                }
                idle.as_mut().reset(last_move + idle_timeout);
                continue;
            }
            () = &mut closing => {
                return Ending::Close { to_client: (GOING_AWAY, "server going away"), to_worker: "server going away" };
            }
            () = sleep_until(half_closed_until.unwrap_or_else(Instant::now)), if half_closed_until.is_some() => {
                return Ending::Closed;
            }
        };
        match moved {
            Ok(()) => last_move = Instant::now(),
            Err((Stop::Failed(err), _)) => return Ending::Broken(err),
            Err((Stop::Refused(violation), _)) => {
                let to_worker = match violation.code {
                    TRY_AGAIN_LATER => violation.reason,
                    _ => "the client broke the WebSocket rules",
                };
                return Ending::Close { to_client: (violation.code, violation.reason), to_worker };
            }
            Err((Stop::Ended, from_client)) => {
                // Pass the end on: the other side learns that no more bytes come.
                let result = if from_client { up.end().await } else { down.end().await };
                if let Err(err) = result {
                    return Ending::Broken(err);
                }
                if up.ended && down.ended {
                    return Ending::Closed;
                }
                half_closed_until = Some(Instant::now() + HALF_CLOSED_TIME);
            }
        }
    }
}

/// The front closes the socket: each frame under way is finished first (for a moment at most),
/// then each side that can take one gets a close frame, and the client a moment to read it.
async fn close<C, W>(up: &mut Pump<C, W>, down: &mut Pump<W, C>, to_client: (u16, &'static str), to_worker: &str)
where
    C: AsyncRead + AsyncWrite + Unpin,
    W: AsyncRead + AsyncWrite + Unpin,
{
    let (up_clean, down_clean) =
        timeout(FRAME_FINISH_TIME, async { tokio::join!(up.finish_frame(), down.finish_frame()) })
            .await
            .unwrap_or((false, false));
    let deadline = Instant::now() + CLOSE_TIME;
    let _ = timeout_at(deadline, async {
        if up_clean && !up.frames.close_seen() {
            // The front speaks to the worker as a client, and clients mask their frames.
            let mask = RandomState::new().hash_one(deadline).to_ne_bytes();
            let frame = close_frame(GOING_AWAY, to_worker, Some([mask[0], mask[1], mask[2], mask[3]]));
            let _ = up.to.write_all(&frame).await;
        }
        let _ = up.to.shutdown().await;
        if down_clean && !down.frames.close_seen() {
            let _ = down.to.write_all(&close_frame(to_client.0, to_client.1, None)).await;
        }
        let _ = down.to.shutdown().await;
        // The client answers with its own close frame and closes: read until then, so that
        // its unread bytes do not make the kernel reset the connection under our close frame.
        loop {
            up.buf.clear();
            up.buf.reserve(READ_CHUNK);
            if !matches!(up.from.read_buf(&mut up.buf).await, Ok(n) if n > 0) {
                break;
            }
        }
    })
    .await;
}

/// One direction of a socket: bytes read from `from` are walked by `frames` and written to `to`.
struct Pump<R, W> {
    from: tokio::io::ReadHalf<R>,
    to: tokio::io::WriteHalf<W>,
    frames: Frames,
    /// Bytes read and not yet written. The first `walked` of them are walked, and may go but
    /// for those `frames` holds ([`Pump::ready`]); the rest are a frame header not complete yet.
    buf: BytesMut,
    walked: usize,
    /// A frame the sender may not send, found after the `walked` bytes.
    refused: Option<Violation>,
    /// The sender has closed its connection, and the receiver has been told.
    ended: bool,
}

/// Why a direction stopped moving.
enum Stop {
    /// The sender closed its connection.
    Ended,
    Failed(io::Error),
    Refused(Violation),
}

impl<R: AsyncRead + AsyncWrite + Unpin, W: AsyncRead + AsyncWrite + Unpin> Pump<R, W> {
    fn new(from: tokio::io::ReadHalf<R>, to: tokio::io::WriteHalf<W>, frames: Frames, early: BytesMut) -> Self {
        let mut pump = Pump { from, to, frames, buf: early, walked: 0, refused: None, ended: false };
        pump.walk();
        pump
    }

    /// One write of ready bytes, or else one read. Cancel-safe: all state is in `self`, and a
    /// single read or write either happened or did not.
    async fn step(&mut self) -> Result<(), Stop> {
        if self.ready() > 0 {
            let written = self.to.write(&self.buf[..self.ready()]).await.map_err(Stop::Failed)?;
            if written == 0 {
                return Err(Stop::Failed(io::ErrorKind::WriteZero.into()));
            }
            self.wrote(written);
            return Ok(());
        }
        if let Some(violation) = self.refused {
            return Err(Stop::Refused(violation));
        }
        self.buf.reserve(READ_CHUNK);
        if self.from.read_buf(&mut self.buf).await.map_err(Stop::Failed)? == 0 {
            return Err(Stop::Ended);
        }
        self.walk();
        Ok(())
    }

    /// Walks the bytes after the walked ones.
    fn walk(&mut self) {
        match self.frames.advance(&self.buf[self.walked..]) {
            Ok(walked) => self.walked += walked,
            Err(violation) => {
                self.walked += violation.valid;
                self.refused = Some(violation);
            }
        }
    }

    /// How many bytes may be written now: the walked ones, but for a message held whole.
    fn ready(&self) -> usize {
        self.walked - self.frames.held()
    }

    /// Forgets the first `written` bytes, which went to the receiver.
    fn wrote(&mut self, written: usize) {
        self.buf.advance(written);
        self.walked -= written;
    }

    /// Whether the receiver's stream stands between two frames, open, and not closed by the
    /// sender: where the front may slip in a frame of its own.
    fn between_frames(&self) -> bool {
        self.ready() == 0 && self.frames.at_boundary() && !self.ended && !self.frames.close_seen()
    }

    /// Tells the receiver that the sender has closed its side.
    async fn end(&mut self) -> io::Result<()> {
        self.ended = true;
        self.to.shutdown().await
    }

    /// Writes what is ready and reads on to the end of the frame under way, and no further.
    /// Returns whether the receiver's stream now stands between two frames.
    async fn finish_frame(&mut self) -> bool {
        loop {
            if self.ready() > 0 {
                match self.to.write(&self.buf[..self.ready()]).await {
                    Ok(written) if written > 0 => {
                        self.wrote(written);
                        continue;
                    }
                    _ => return false,
                }
            }
            if self.frames.at_boundary() {
                return !self.ended;
            }
            // In the middle of a payload that is not held, everything read has been walked and
            // written.
            self.buf.reserve(READ_CHUNK);
            if !matches!(self.from.read_buf(&mut self.buf).await, Ok(n) if n > 0) {
                return false;
            }
            self.walked += self.frames.rest_of_frame(&self.buf[self.walked..]);
        }
    }
}
