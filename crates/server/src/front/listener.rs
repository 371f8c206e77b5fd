//! Listening sockets: TCP (IPv4 or IPv6) and unix, for the public addresses and the control
//! address alike.

use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;

use socket2::{Domain, Socket, Type};
use tokio::net::{TcpListener, TcpStream, UnixListener, UnixStream};

/// How many connections the kernel holds for us before we accept them. The front accepts as
/// fast as it can, so this only matters in the first instants of a burst.
const BACKLOG: i32 = 2048;

pub use headway_common::bind::Bind;

/// A bound listening socket.
pub enum Listener {
    Tcp(TcpListener),
    /// Removes its socket file when dropped.
    Unix(UnixListener, PathBuf),
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
                Ok(Listener::Unix(UnixListener::bind(path)?, path.clone()))
            }
        }
    }

    pub async fn accept(&self) -> io::Result<Accepted> {
        match self {
            Listener::Tcp(listener) => {
                let (stream, peer) = listener.accept().await?;
                // Responses are written whole; waiting to coalesce them only adds latency.
                stream.set_nodelay(true)?;
                Ok(Accepted::Tcp(stream, peer))
            }
            Listener::Unix(listener, _) => Ok(Accepted::Unix(listener.accept().await?.0)),
        }
    }

    /// The address actually bound (a port of 0 becomes the port the kernel chose).
    pub fn local_bind(&self) -> io::Result<Bind> {
        match self {
            Listener::Tcp(listener) => Ok(Bind::Tcp(listener.local_addr()?)),
            Listener::Unix(_, path) => Ok(Bind::Unix(path.clone())),
        }
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        if let Listener::Unix(_, path) = self {
            let _ = std::fs::remove_file(path);
        }
    }
}
