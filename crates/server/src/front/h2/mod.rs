//! HTTP/2 on the front: `h2` by ALPN on TLS listeners, h2c with prior knowledge (the client
//! opens with the preface) on plain TCP and unix listeners. The `h2` crate (hyper's) speaks the
//! protocol; this module runs a connection and the limits around it, and [`stream`] makes each
//! stream a request of the one queue, exactly as an HTTP/1.1 request is.
//!
//! One connection may carry many requests at once, up to `--http2-max-concurrent-streams`, and
//! each waits in the queue in the order it became complete, among every other client's. The
//! connection is one task; each stream is a task of its own, ended with the connection.
//!
//! Limits a hostile client cannot get past (docs/design/http2.md says which are `h2`'s):
//! - Resets (CVE-2023-44487, "rapid reset"): a stream the client resets before its response is
//!   complete is withdrawn from the queue if it has not started, and never reaches the app if
//!   it was reset before it could queue; and a connection whose client has reset more streams
//!   than the stream limit plus the streams it let finish is closed with GOAWAY
//!   `ENHANCE_YOUR_CALM`. A client that cancels now and then never comes near it; one that
//!   floods gets no more requests into the app than the stream limit, however fast it resets.
//!   `h2` also bounds streams reset before they are accepted.
//! - PING and SETTINGS floods: a burst, then a rate ([`guard`]).
//! - Timeouts as for HTTP/1.1: the handshake and the first request within the header timeout of
//!   the accept; a connection with no stream open is closed after the keep-alive timeout; a
//!   stalled body (408) or a client that stops reading (reset) after the I/O timeout.
//! - Going away: `h2` sends a graceful GOAWAY with a PING and closes once the client answers it
//!   and no stream is left; a client that never answers is dropped the header timeout after the
//!   last stream (or the GOAWAY, if none was open), so a silent client holds nothing for long.
//! - Shutdown: GOAWAY, and the streams in flight finish; a reload (SIGHUP) replaces workers
//!   behind the queue and leaves connections alone, so it sends none.

mod guard;
mod request;
mod settings;
mod shared;
mod stream;

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use h2::Reason;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::task::JoinSet;
use tokio::time::{sleep_until, timeout_at, Instant};
use tracing::debug;

use super::conn::Arrival;
use super::forwarding_fields::Peer;
use super::read::read_when_ready;
use super::state::Front;
use super::stream::ClientStream;
use guard::{Alarm, Guarded, PREFACE};
use shared::Shared;

pub use settings::Http2Settings;

/// Reads a plain connection's first bytes into `read` until they show whether it opens with
/// HTTP/2's preface, holding no buffer while the client is silent. `None`: it closed before a
/// byte.
pub(super) async fn opens_with_preface<S: ClientStream>(
    stream: &mut S,
    read: &mut BytesMut,
) -> std::io::Result<Option<bool>> {
    loop {
        let seen = read.len().min(PREFACE.len());
        if read[..seen] != PREFACE[..seen] {
            return Ok(Some(false));
        }
        if seen == PREFACE.len() {
            return Ok(Some(true));
        }
        if read_when_ready(stream, read).await? == 0 {
            return Ok((!read.is_empty()).then_some(false));
        }
    }
}

/// Serves an HTTP/2 connection until it closes. `io` starts at the client's preface.
pub(super) async fn serve<S>(front: Arc<Front>, io: S, peer: Peer, arrival: Arrival)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let Some(settings) = front.settings.http2.clone() else { return };
    let Arrival { at: accepted_at, open: _open } = arrival;
    let first_deadline = accepted_at + front.settings.header_timeout;
    let alarm = Arc::new(Alarm::default());
    let io = Guarded::new(io, front.settings.io_timeout, alarm.clone());
    let mut connection = match timeout_at(first_deadline, settings.builder().handshake::<_, Bytes>(io)).await {
        Ok(Ok(connection)) => connection,
        Ok(Err(err)) => return debug!("HTTP/2 handshake failed: {err}"),
        Err(_) => return debug!("HTTP/2 handshake not done within the header timeout"),
    };
    front.stats.http2_connection();
    let shared = Arc::new(Shared::new(front.clone(), peer));
    let mut shutdown = front.shutdown.clone();
    let mut streams = JoinSet::new();
    let mut accepted: u64 = 0;
    let mut going_away = false;
    // Closed for flooding: GOAWAY `ENHANCE_YOUR_CALM` is on its way.
    let mut calmed = false;
    // No stream open since: the first request is due within the header timeout of the accept,
    // later ones within the keep-alive timeout of the last stream's end.
    let mut idle_until = Some(first_deadline);
    let mut idle_gauge = None;
    // Gone away with no stream left: `h2` closes once the client has answered the PING of its
    // graceful GOAWAY, and the connection is dropped if that takes longer than the header timeout.
    let mut close_at = None;
    let max_requests = if front.settings.keep_alive { front.settings.max_requests_per_connection } else { 1 };
    loop {
        if idle_until.is_some() && idle_gauge.is_none() {
            idle_gauge = Some(front.stats.connection_idle());
        }
        if going_away && streams.is_empty() && close_at.is_none() {
            close_at = Some(Instant::now() + front.settings.header_timeout);
        }
        tokio::select! {
            incoming = connection.accept() => match incoming {
                Some(Ok((request, respond))) => {
                    accepted += 1;
                    front.stats.http2_stream();
                    (idle_until, idle_gauge, close_at) = (None, None, None);
                    // Boxed: a task holds its future inline, and tokio moves what it holds
                    // several times over a task's life (spawned, finished, its output read);
                    // a stream's future is kilobytes, a box a word.
                    streams.spawn(Box::pin(stream::serve(shared.clone(), request, respond)));
                    if max_requests != 0 && accepted >= max_requests && !going_away {
                        connection.graceful_shutdown();
                        going_away = true;
                    }
                }
                Some(Err(err)) => {
                    // `h2`'s own bounds (resets before accept, CONTINUATION, small DATA frames).
                    if err.reason() == Some(Reason::ENHANCE_YOUR_CALM) && !calmed {
                        front.stats.http2_calmed();
                    }
                    debug!("HTTP/2 connection ended: {err}");
                    break;
                }
                None => break,
            },
            Some(_) = streams.join_next(), if !streams.is_empty() => {
                if !calmed && shared.resets_too_many(settings.max_concurrent_streams) {
                    debug!("HTTP/2 client reset too many streams; closing its connection");
                    calm(&mut connection, &front);
                    (calmed, going_away) = (true, true);
                }
                if streams.is_empty() {
                    idle_until = Some(Instant::now() + front.settings.keep_alive_timeout);
                }
            }
            () = alarm.raised(), if !calmed => {
                debug!("HTTP/2 client flooded PING or SETTINGS frames; closing its connection");
                calm(&mut connection, &front);
                (calmed, going_away) = (true, true);
            }
            _ = shutdown.wait_for(|stopping| *stopping), if !going_away => {
                connection.graceful_shutdown();
                going_away = true;
            }
            () = until(idle_until), if !going_away => {
                connection.graceful_shutdown();
                going_away = true;
            }
            () = until(close_at) => {
                debug!("HTTP/2 client did not close after GOAWAY within the header timeout; dropping it");
                break;
            }
        }
    }
    // Streams still running end with the connection: their waits are dropped, which withdraws
    // what has not started.
    streams.shutdown().await;
}

/// Resolves at `deadline`, or never without one.
async fn until(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

/// Closes the connection with GOAWAY `ENHANCE_YOUR_CALM`, and counts it.
fn calm<T: AsyncRead + AsyncWrite + Unpin>(connection: &mut h2::server::Connection<T, Bytes>, front: &Front) {
    connection.abrupt_shutdown(Reason::ENHANCE_YOUR_CALM);
    front.stats.http2_calmed();
}
