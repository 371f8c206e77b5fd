//! Listening sockets: TCP (IPv4 or IPv6) and unix, for the public addresses and the control
//! address alike, and the one accept loop they all run.
//!
//! Socket activation (sd_listen_fds(3)): when `LISTEN_FDS` and `LISTEN_PID` are set, the sockets
//! systemd passed are served instead of `--bind`. systemd keeps them open across restarts, so a
//! client connecting while headway restarts waits in the backlog instead of being refused.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use socket2::{Domain, SockFilter, Socket, Type};
use tokio::net::{TcpListener, TcpStream, UnixListener, UnixStream};
use tracing::{debug, warn};

/// How many connections the kernel holds for us before we accept them. The front accepts as
/// fast as it can, so this only matters in the first instants of a burst.
const BACKLOG: i32 = 2048;
/// Pauses after an accept that failed for lack of resources: doubling from the first to the
/// last, reset by the next success.
const FIRST_PAUSE: Duration = Duration::from_millis(5);
const LAST_PAUSE: Duration = Duration::from_secs(1);
/// How long a TCP listener that stopped taking new connections keeps accepting: handshakes
/// already under way complete within a round trip, and one closing listener would reset them.
const HANDSHAKES_UNDER_WAY: Duration = Duration::from_millis(100);

pub use headway_common::bind::Bind;

/// A bound listening socket.
pub enum Listener {
    Tcp(TcpListener),
    /// With the socket file to remove when dropped: `None` for a socket systemd passed, whose
    /// file is systemd's.
    Unix(UnixListener, Option<PathBuf>),
}

/// An accepted connection and who is on the other end.
pub enum Accepted {
    Tcp(TcpStream, SocketAddr),
    Unix(UnixStream),
}

impl Listener {
    pub fn bind(bind: &Bind) -> io::Result<Listener> {
        match bind {
            Bind::Tcp(addr) => {
                let socket = Socket::new(Domain::for_address(*addr), Type::STREAM, None)?;
                // Restart without waiting for TIME_WAIT sockets of the previous run.
                socket.set_reuse_address(true)?;
                if addr.is_ipv6() {
                    socket.set_only_v6(true)?;
                }
                socket.set_nonblocking(true)?;
                socket.bind(&(*addr).into())?;
                socket.listen(BACKLOG)?;
                Ok(Listener::Tcp(TcpListener::from_std(socket.into())?))
            }
            Bind::Unix(path) => {
                if path.exists() {
                    // A live server answers on it; a stale file from a crash does not.
                    if std::os::unix::net::UnixStream::connect(path).is_ok() {
                        return Err(io::Error::new(io::ErrorKind::AddrInUse, "another server is listening there"));
                    }
                    std::fs::remove_file(path)?;
                }
                Ok(Listener::Unix(UnixListener::bind(path)?, Some(path.clone())))
            }
        }
    }

    /// A socket passed by systemd's socket activation.
    pub fn activated(socket: Activated) -> io::Result<Listener> {
        match socket {
            Activated::Tcp(listener) => {
                listener.set_nonblocking(true)?;
                Ok(Listener::Tcp(TcpListener::from_std(listener)?))
            }
            Activated::Unix(listener) => {
                listener.set_nonblocking(true)?;
                Ok(Listener::Unix(UnixListener::from_std(listener)?, None))
            }
        }
    }

    pub async fn accept(&self) -> io::Result<Accepted> {
        match self {
            Listener::Tcp(listener) => {
                let (stream, peer) = listener.accept().await?;
                // Responses are written whole; waiting to coalesce them only adds latency. A
                // socket that refuses the option is already broken, and its reads will say so.
                let _ = stream.set_nodelay(true);
                Ok(Accepted::Tcp(stream, peer))
            }
            Listener::Unix(listener, _) => Ok(Accepted::Unix(listener.accept().await?.0)),
        }
    }

    /// Has the kernel start no new connection on the listener while it stays open, so that it can
    /// be closed without resetting a handshake under way: a TCP listener drops every SYN from now
    /// on (its client retries after a second and then finds the port closed); the handshakes
    /// already started complete and wait to be accepted. A unix socket has no handshake: a
    /// connect lands in the backlog at once, and the last accepts take it.
    fn stop_new_handshakes(&self) -> io::Result<()> {
        let Listener::Tcp(listener) = self else { return Ok(()) };
        // Classic BPF on a TCP socket sees the segment from its TCP header: byte 13 holds the
        // flags, and a segment with SYN set that reaches a listener opens a connection.
        const TCP_FLAGS: u32 = 13;
        const SYN: u32 = 0x02;
        let code = |parts: u32| parts as u16;
        let program = [
            SockFilter::new(code(libc::BPF_LD | libc::BPF_B | libc::BPF_ABS), 0, 0, TCP_FLAGS),
            SockFilter::new(code(libc::BPF_JMP | libc::BPF_JSET | libc::BPF_K), 0, 1, SYN),
            SockFilter::new(code(libc::BPF_RET | libc::BPF_K), 0, 0, 0), // dropped
            SockFilter::new(code(libc::BPF_RET | libc::BPF_K), 0, 0, u32::MAX), // kept whole
        ];
        socket2::SockRef::from(listener).attach_filter(&program)
    }

    /// A connection the kernel has already completed, if any, without waiting for one.
    fn accept_waiting(&self) -> Option<Accepted> {
        // Straight to accept(2): tokio would answer from readiness it may not have polled yet.
        let (socket, peer) = match self {
            Listener::Tcp(listener) => socket2::SockRef::from(listener).accept(),
            Listener::Unix(listener, _) => socket2::SockRef::from(listener).accept(),
        }
        .ok()?;
        socket.set_nonblocking(true).ok()?;
        match (self, peer.as_socket()) {
            (Listener::Tcp(_), Some(peer)) => {
                let _ = socket.set_tcp_nodelay(true);
                Some(Accepted::Tcp(TcpStream::from_std(socket.into()).ok()?, peer))
            }
            (Listener::Unix(..), _) => Some(Accepted::Unix(UnixStream::from_std(socket.into()).ok()?)),
            (Listener::Tcp(_), None) => None,
        }
    }

    /// The address actually bound (a port of 0 becomes the port the kernel chose).
    pub fn local_bind(&self) -> io::Result<Bind> {
        match self {
            Listener::Tcp(listener) => Ok(Bind::Tcp(listener.local_addr()?)),
            Listener::Unix(listener, _) => {
                let address = listener.local_addr()?;
                Ok(Bind::Unix(address.as_pathname().map_or_else(PathBuf::new, Path::to_path_buf)))
            }
        }
    }
}

/// Accepts connections on `listener` until `stop` resolves, handing each to `serve`; then stops
/// new handshakes, goes on accepting while those under way complete, and accepts, without
/// waiting, the connections left in the kernel's backlog, so that closing the listener
/// afterwards resets none that a client made while we were still listening.
///
/// Every listener runs this loop. When the process is out of file descriptors (or the kernel out
/// of memory for sockets), the listener stays readable and accept keeps failing: the loop then
/// pauses, longer each time, while the connections being served free some. A connection that
/// was reset before it could be accepted is only skipped.
pub async fn accept_until(listener: &Listener, stop: impl Future<Output = ()>, mut serve: impl FnMut(Accepted)) {
    tokio::pin!(stop);
    let mut pause = Duration::ZERO;
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = &mut stop => return accept_the_last(listener, serve).await,
        };
        match accepted {
            Ok(connection) => {
                pause = Duration::ZERO;
                serve(connection);
            }
            Err(err) if is_out_of_resources(&err) => {
                pause = (pause * 2).clamp(FIRST_PAUSE, LAST_PAUSE);
                warn!("cannot accept a connection: {err}; pausing accepts for {pause:?}");
                tokio::select! {
                    () = tokio::time::sleep(pause) => {}
                    () = &mut stop => return,
                }
            }
            Err(err) => debug!("a connection was lost before it was accepted: {err}"),
        }
    }
}

/// The end of [`accept_until`]: no new handshakes, then every connection completed before the
/// listener closes.
async fn accept_the_last(listener: &Listener, mut serve: impl FnMut(Accepted)) {
    match listener.stop_new_handshakes() {
        Ok(()) => {
            let until = tokio::time::Instant::now() + HANDSHAKES_UNDER_WAY;
            while let Ok(accepted) = tokio::time::timeout_at(until, listener.accept()).await {
                match accepted {
                    Ok(connection) => serve(connection),
                    // Out of descriptors the listener stays readable: a retry at once would spin
                    // for the whole wait.
                    Err(err) if is_out_of_resources(&err) => {
                        tokio::time::sleep_until(until.min(tokio::time::Instant::now() + FIRST_PAUSE)).await;
                    }
                    Err(_) => {}
                }
            }
        }
        Err(err) => warn!("cannot stop new handshakes before closing the listener: {err}"),
    }
    while let Some(connection) = listener.accept_waiting() {
        serve(connection);
    }
}

fn is_out_of_resources(err: &io::Error) -> bool {
    matches!(err.raw_os_error(), Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM))
}

impl Drop for Listener {
    fn drop(&mut self) {
        if let Listener::Unix(_, Some(path)) = self {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// A listening socket systemd passed.
pub enum Activated {
    Tcp(std::net::TcpListener),
    Unix(std::os::unix::net::UnixListener),
}

/// The sockets passed by socket activation, in order; empty when there are none. Takes
/// `LISTEN_FDS` and `LISTEN_PID` out of the environment (the descriptors are close-on-exec),
/// so call it before any thread starts.
pub fn take_listen_fds() -> anyhow::Result<Vec<Activated>> {
    let mut passed = listenfd::ListenFd::from_env();
    let mut sockets = Vec::with_capacity(passed.len());
    for index in 0..passed.len() {
        let fd = index + 3;
        if let Ok(Some(listener)) = passed.take_tcp_listener(index) {
            sockets.push(Activated::Tcp(listener));
        } else if let Ok(Some(listener)) = passed.take_unix_listener(index) {
            sockets.push(Activated::Unix(listener));
        } else {
            anyhow::bail!("socket activation: descriptor {fd} is not a listening TCP or unix stream socket");
        }
    }
    Ok(sockets)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_listener_that_stops_new_handshakes_completes_none_and_keeps_those_made_before() {
        let listener = Listener::bind(&Bind::Tcp("127.0.0.1:0".parse().unwrap())).unwrap();
        let Ok(Bind::Tcp(address)) = listener.local_bind() else { panic!("not bound to TCP") };
        let _before = std::net::TcpStream::connect(address).unwrap();
        listener.stop_new_handshakes().unwrap();
        // The SYN is dropped, so the connect neither completes nor is refused; its retry would
        // come after a second.
        let after = std::net::TcpStream::connect_timeout(&address, Duration::from_millis(300));
        assert_eq!(after.map(drop).map_err(|err| err.kind()), Err(io::ErrorKind::TimedOut));
        assert!(listener.accept_waiting().is_some(), "the connection made before was lost");
        assert!(listener.accept_waiting().is_none());
    }
}
