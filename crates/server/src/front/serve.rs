//! A client connection's life: read a request completely, queue it, write its response, repeat.
//!
//! The connection is the only thing a client can hold. While it is idle between requests it
//! costs a task and no buffer, no slot and no thread. A request enters the queue only once its
//! head and body are fully read, or its body is arriving fast ([`super::read`]), so slow uploads
//! never hold a slot; its
//! response comes back through a spool ([`super::relay`]), so slow downloads never hold one
//! either. One request of a connection is in the queue or running at a time: the next one
//! (keep-alive or pipelined) enters at the back of the queue only after this one's response, so
//! a connection cannot take more than its share of the slots, and pipelined answers are in
//! order by construction.
//!
//! While its request waits, and while its response streams, the connection keeps reading (up to
//! one head's worth) to notice a client that goes away: it then drops the request's
//! [`crate::queue::Wait`], which withdraws it, or the response's spool, whose slot tells the app.
//!
//! A WebSocket handshake travels the same way ([`super::upgrade`]); after its `101` the
//! connection carries the socket until it closes ([`super::websocket`]).

use http::{Method, Version};

use super::conn::{Connection, End};
use super::read::BodyToCome;
use super::static_files::{Preconditions, STATIC_LANE};
use super::stream::ClientStream;
use super::upgrade::ask_worker_to_upgrade;
use super::websocket::WebSocket;
use super::worker_request::{settle_target, worker_request};
use crate::ops::access_log::RequestFields;
use crate::queue::job::RequestBody;
use headway_http1::request::RequestHead;
use headway_http1::response::Persistence;

/// What a connection does after a request.
enum Next {
    /// Reads the next request.
    Request,
    /// Is closed.
    Closed,
    /// Carries the WebSocket the request opened.
    WebSocket(WebSocket),
}

impl<S: ClientStream> Connection<S> {
    /// Serves the connection until it ends.
    pub(super) async fn serve(mut self) {
        match self.run().await {
            Ok(None) | Err(End::Gone) => {}
            Err(End::Refuse(error, version)) => self.refuse(&error, version).await,
            Ok(Some(websocket)) => {
                // Counted as a WebSocket from here on, not as an HTTP connection: a graceful
                // shutdown drains the requests first, then closes the sockets.
                self.open = None;
                // On the heap, as a TLS handshake: an HTTP connection's task is not sized for it.
                Box::pin(self.carry(websocket)).await;
            }
        }
    }

    /// Serves requests until the connection closes or becomes a WebSocket (returned, to be carried).
    async fn run(&mut self) -> Result<Option<WebSocket>, End> {
        loop {
            let Some(head) = self.read_head().await? else { return Ok(None) };
            // On the heap: a request's states (its body, its wait, its relay) would otherwise size
            // the connection's task, which an idle keep-alive connection keeps between requests.
            match Box::pin(self.serve_request(head)).await? {
                Next::Request => {}
                Next::Closed => return Ok(None),
                Next::WebSocket(websocket) => return Ok(Some(websocket)),
            }
        }
    }

    /// Serves one request whose head was read: its body, the queue, its response.
    async fn serve_request(&mut self, mut head: RequestHead) -> Result<Next, End> {
        let (method, version) = (head.method.clone(), head.version);
        let uri = settle_target(&mut head.target).map_err(|error| End::Refuse(error, version))?;
        let websocket = self.admit_websocket(&head)?;
        let (body, to_come) = self.read_body(&head).await.map_err(|end| match end {
            End::Refuse(error, _) => End::Refuse(error, version),
            gone => gone,
        })?;
        self.requests += 1;
        let persistence = self.persistence(&head);
        if let Some(health) = self.front.health_response(&head, version, persistence) {
            self.skip_body(body, to_come, version).await?;
            self.front.stats.response_sent(health.status);
            self.write(&health.bytes).await?;
            return Ok(self.after(persistence).await);
        }
        if let Some(answer) = self.front.settings.statics.answer(&head.method, &head.target, &head.headers) {
            self.skip_body(body, to_come, version).await?;
            let sent = self.send_static(version, answer, persistence, head.method == Method::HEAD).await?;
            self.front.stats.static_sent(sent.status, sent.body_bytes);
            if let Some(log) = &self.front.access_log {
                let mut logged = RequestFields::of(&head);
                logged.took_lane(Some(STATIC_LANE.into()));
                log.log(&logged.entry(self.peer.ip, sent.status, sent.body_bytes, None));
            }
            return Ok(self.after(sent.persistence).await);
        }
        let mut logged = self.front.access_log.is_some().then(|| RequestFields::of(&head));
        // A worker may hand the response's file to the front: what makes it conditional or
        // partial is kept for then.
        let statics = &self.front.settings.statics;
        let preconditions = statics.takes_hand_offs().then(|| {
            statics.mark_request(&mut head.headers);
            Preconditions::of(&head.headers)
        });
        let trusted = &self.front.settings.trusted_proxies;
        let (mut request, client) =
            worker_request(head.method, uri, Version::HTTP_11, head.headers, body, &self.peer, trusted);
        if websocket.is_some() {
            ask_worker_to_upgrade(&mut request);
        }
        let mut wait = self.front.queue.enqueue(request, client);
        if let Some(fields) = logged.as_mut() {
            fields.took_lane(wait.lane());
        }
        if let Some(to_come) = to_come {
            // Failing, this drops the wait: the request leaves the queue, or its slot sees the
            // body cut short.
            self.read_rest(to_come, version).await?;
        }
        let outcome = self.watching_client(wait.outcome()).await?;
        let sent = self.respond(&method, version, outcome, persistence, preconditions.as_ref()).await?;
        if let (Some(log), Some(logged)) = (&self.front.access_log, logged) {
            log.log(&logged.entry(self.peer.ip, sent.status, sent.body_bytes, sent.timing));
        }
        if let (Some(socket), Some(admitted)) = (sent.websocket, websocket) {
            return Ok(Next::WebSocket(WebSocket { socket, admitted }));
        }
        Ok(self.after(sent.persistence).await)
    }

    /// Reads the rest of a body nobody takes (a request the front answers itself): the
    /// connection goes on after it.
    async fn skip_body(&mut self, body: RequestBody, to_come: Option<BodyToCome>, version: Version) -> Result<(), End> {
        drop(body);
        match to_come {
            Some(to_come) => self.read_rest(to_come, version).await,
            None => Ok(()),
        }
    }

    /// What the connection does after a response that leaves it as `persistence` says.
    async fn after(&mut self, persistence: Persistence) -> Next {
        if persistence == Persistence::Close {
            self.linger().await;
            return Next::Closed;
        }
        Next::Request
    }

    /// Whether the connection may carry another request after this one.
    fn persistence(&self, head: &RequestHead) -> Persistence {
        let settings = &self.front.settings;
        let limit_reached =
            settings.max_requests_per_connection != 0 && self.requests >= settings.max_requests_per_connection;
        let stopping = *self.front.shutdown.borrow();
        if head.keep_alive && settings.keep_alive && !limit_reached && !stopping {
            Persistence::KeepAlive
        } else {
            Persistence::Close
        }
    }
}
