//! A slot's line to an HTTP/1.1 worker: one keep-alive connection to the worker's unix socket.
//!
//! This is how any server can be a worker (`--cmd`: Puma in single mode, a Node program). The
//! worker is a trusted local process, so the slot uses hyper's client rather than the front's
//! strict parser.

use std::future::poll_fn;
use std::io;
use std::path::Path;
use std::pin::Pin;
use std::task::Poll;

use bytes::Bytes;
use hyper::body::{Body, Incoming};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use tokio::net::UnixStream;
use tokio::task::JoinHandle;
use tracing::debug;

use super::{LinkError, WorkerBody};
use crate::job::RequestBody;

/// One HTTP/1.1 connection to a worker, driven by hyper; dropping it closes the connection,
/// even in the middle of an exchange (how the worker hears that the client left).
pub(super) struct Connection {
    sender: SendRequest<RequestBody>,
    /// The task that drives the connection; it ends when the connection closes.
    driver: Option<JoinHandle<()>>,
}

impl Drop for Connection {
    fn drop(&mut self) {
        if let Some(driver) = &self.driver {
            driver.abort(); // the task owns the socket: ending it closes the socket
        }
    }
}

impl Connection {
    pub(super) async fn open(socket: &Path) -> io::Result<Self> {
        let stream = UnixStream::connect(socket).await?;
        let (sender, connection) = hyper::client::conn::http1::Builder::new()
            .handshake(TokioIo::new(stream))
            .await
            .map_err(io::Error::other)?;
        let driver = tokio::spawn(async move {
            if let Err(err) = connection.await {
                debug!("worker connection ended: {err}");
            }
        });
        Ok(Connection { sender, driver: Some(driver) })
    }

    /// Resolves when the worker closes the connection.
    pub(super) async fn closed(&mut self) {
        match self.driver.as_mut() {
            Some(driver) => {
                let _ = driver.await;
                self.driver = None;
            }
            None => std::future::pending().await,
        }
    }

    /// Sends a request and waits for the response head. Workers close idle keep-alive
    /// connections (Puma after 20 s, Node after 5 s); when hyper reports that a request was
    /// not sent because of that, it is sent again once on a new connection. Nothing reached
    /// the app, so this is safe for any method.
    pub(super) async fn exchange(
        &mut self,
        socket: &Path,
        mut request: http::Request<RequestBody>,
    ) -> Result<(http::response::Parts, Incoming), LinkError> {
        let mut reconnected = false;
        loop {
            let sent = match self.sender.ready().await {
                Ok(()) => self.sender.try_send_request(request).await,
                Err(err) if reconnected => return Err(err.into()),
                Err(_) => {
                    *self = Connection::open(socket).await.map_err(LinkError::Reconnect)?;
                    reconnected = true;
                    continue;
                }
            };
            match sent {
                Ok(response) => return Ok(response.into_parts()),
                Err(mut err) => match err.take_message() {
                    Some(unsent) if !reconnected => {
                        request = unsent;
                        *self = Connection::open(socket).await.map_err(LinkError::Reconnect)?;
                        reconnected = true;
                    }
                    _ => return Err(err.into_error().into()),
                },
            }
        }
    }
}

impl WorkerBody for Incoming {
    async fn now(&mut self) -> Poll<Option<Result<Bytes, LinkError>>> {
        // Polled once with this task's waker: data hyper has already read comes out now.
        poll_fn(|cx| Poll::Ready(poll_piece(Pin::new(&mut *self), cx))).await
    }

    async fn next(&mut self) -> Option<Result<Bytes, LinkError>> {
        poll_fn(|cx| poll_piece(Pin::new(&mut *self), cx)).await
    }
}

/// The next data frame of a hyper body (trailers are skipped: the front does not relay them).
fn poll_piece(mut body: Pin<&mut Incoming>, cx: &mut std::task::Context<'_>) -> Poll<Option<Result<Bytes, LinkError>>> {
    loop {
        return match body.as_mut().poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                Ok(data) => Poll::Ready(Some(Ok(data))),
                Err(_) => continue,
            },
            Poll::Ready(Some(Err(err))) => Poll::Ready(Some(Err(err.into()))),
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        };
    }
}
