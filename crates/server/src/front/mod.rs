//! The front: owns the listening sockets and every client connection.
//!
//! It accepts connections, runs one task per connection (see [`serve`]), and puts each
//! complete request in the one queue. A connection's stream is made first: after a PROXY
//! protocol header ([`proxy_protocol`]) and a TLS handshake ([`tls`]) where configured. Then it
//! speaks HTTP/1.1, or HTTP/2 ([`h2`]) when TLS negotiated `h2` or a plain connection opens
//! with HTTP/2's preface (h2c with prior knowledge). It holds no worker state: everything it
//! knows about serving a request is "push, then wait for the outcome".
//!
//! What every connection task shares, [`Front`], and how the front treats clients,
//! [`FrontSettings`], are in [`state`], where each stage of a connection takes them from.

mod body;
mod conn;
pub mod forwarding_fields;
pub mod h2;
mod health;
mod proxy_protocol;
mod read;
mod relay;
mod serve;
mod state;
pub mod static_files;
mod stream;
pub mod tls;
mod upgrade;
pub mod websocket;
pub mod worker_request;

pub use state::{Front, FrontSettings};

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use http::{StatusCode, Version};
use tokio::net::TcpStream;
use tokio::time::timeout_at;
use tracing::{debug, warn};

use crate::listener::{accept_until, Accepted, Listener};
use conn::{Arrival, Connection};
use forwarding_fields::{ClientCert, Peer};
use headway_http1::HttpError;
use stream::{ClientStream, ReadAhead};
use tls::Tls;

impl Front {
    /// Accepts connections until shutdown starts, and those already waiting in the kernel's
    /// backlog then; then drops the listener (so new connections are refused by the kernel)
    /// and returns.
    pub async fn accept_loop(self: Arc<Self>, listener: Listener) {
        let mut shutdown = self.shutdown.clone();
        let stopping = async move {
            let _ = shutdown.wait_for(|stopping| *stopping).await;
        };
        accept_until(&listener, stopping, |accepted| {
            let arrival = Arrival::now(&self.stats);
            match accepted {
                Accepted::Tcp(stream, peer) => {
                    let peer = Peer::tcp(peer.ip(), &self.settings.trusted_proxies);
                    tokio::spawn(self.clone().serve_tcp(stream, peer, arrival));
                }
                Accepted::Unix(stream) => {
                    tokio::spawn(self.clone().serve(stream, Peer::local(), arrival, BytesMut::new()));
                }
            }
        })
        .await;
    }

    /// Serves a TCP connection, which may open with a PROXY protocol header.
    async fn serve_tcp(self: Arc<Self>, mut stream: TcpStream, mut peer: Peer, arrival: Arrival) {
        let mut read = BytesMut::new();
        if self.settings.proxy_protocol {
            let (trusted, deadline) = (&self.settings.trusted_proxies, arrival.deadline(&self.settings));
            if let Err(reason) = proxy_protocol::read_header(&mut stream, &mut read, &mut peer, trusted, deadline).await
            {
                let from = peer.ip.map_or_else(|| "?".to_owned(), |ip| ip.to_string());
                self.stats.handshake_failed();
                warn!("closed a connection from {from}: {reason}");
                return;
            }
        }
        self.serve(stream, peer, arrival, read).await;
    }

    /// Serves a connection, in TLS with `--certfile`. `read`: its bytes already read.
    async fn serve<S: ClientStream + Send + 'static>(
        self: Arc<Self>,
        mut stream: S,
        peer: Peer,
        arrival: Arrival,
        mut read: BytesMut,
    ) {
        if let Some(tls) = self.tls.clone() {
            // On the heap: a handshake's state is kilobytes, and every connection's task would be
            // as large as its largest state, TLS or not (an idle connection should cost a few).
            return Box::pin(self.serve_tls(tls, stream, peer, arrival, read)).await;
        }
        if self.settings.http2.is_none() {
            return Connection::new(stream, peer, self, arrival, read).serve().await;
        }
        let deadline = arrival.deadline(&self.settings);
        match timeout_at(deadline, h2::opens_with_preface(&mut stream, &mut read)).await {
            // On the heap too: an HTTP/2 connection's state would size every connection's task.
            Ok(Ok(Some(true))) => Box::pin(h2::serve(self, ReadAhead::new(stream, read.freeze()), peer, arrival)).await,
            Ok(Ok(Some(false))) => Connection::new(stream, peer, self, arrival, read).serve().await,
            _ => {} // closed, broken or silent before a first request
        }
    }

    /// Serves a connection in TLS: the handshake, then requests over it, in HTTP/2 when ALPN
    /// chose it.
    async fn serve_tls<S: ClientStream + Send + 'static>(
        self: Arc<Self>,
        tls: Arc<Tls>,
        stream: S,
        mut peer: Peer,
        arrival: Arrival,
        read: BytesMut,
    ) {
        let deadline = arrival.deadline(&self.settings);
        let mut stream = ReadAhead::new(stream, read.freeze());
        match timeout_at(deadline, stream.peek()).await {
            Ok(Ok(Some(first))) if tls::opens_handshake(first) => {}
            Ok(Ok(Some(_))) => {
                let error = HttpError::new(StatusCode::BAD_REQUEST, "this port speaks HTTPS, not plain HTTP");
                let mut connection = Connection::new(stream, peer, self, arrival, BytesMut::new());
                return connection.refuse(&error, Version::HTTP_11).await;
            }
            _ => return, // closed, broken or silent before a first byte
        }
        let failure = match timeout_at(deadline, tls.accept(stream)).await {
            Ok(Ok(stream)) => {
                peer.tls = true;
                peer.client_cert = ClientCert::Handshake(tls::client_cert_field(&stream));
                if tls::negotiated_h2(&stream) {
                    return h2::serve(self, stream, peer, arrival).await;
                }
                let stream = ReadAhead::new(stream, Bytes::new());
                return Connection::new(stream, peer, self, arrival, BytesMut::new()).serve().await;
            }
            Ok(Err(err)) => err.to_string(),
            Err(_) => "not done within the header timeout".to_owned(),
        };
        // Logged at debug: scanners and clients that distrust the certificate make these all
        // day; the counter in the stats is what shows a certificate problem.
        debug!("TLS handshake failed: {failure}");
        self.stats.handshake_failed();
    }
}

#[cfg(test)]
mod tests;
