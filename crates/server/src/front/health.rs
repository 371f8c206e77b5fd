//! `--health-path`: the front answers a balancer's probe on the public port itself, from the
//! server's readiness, so that a balancer that can only probe the traffic port (Heroku, a
//! Kubernetes Service without a named probe port, an ALB target group) learns of a shutdown
//! before the server stops accepting. The probe takes no slot and never waits in the queue: a
//! busy server is still a ready one, and a probe stuck behind a burst would look like a dead
//! server to the balancer.

use bytes::Bytes;
use http::{Method, StatusCode, Version};

use super::state::Front;
use headway_http1::request::RequestHead;
use headway_http1::response::{plain_response, Persistence};

/// The front's own answer to a health probe.
pub(super) struct HealthAnswer {
    pub status: StatusCode,
    pub bytes: Bytes,
}

impl Front {
    /// The answer to `head` if it is a probe of `--health-path` (GET or HEAD), else `None`.
    pub(super) fn health_response(
        &self,
        head: &RequestHead,
        version: Version,
        persistence: Persistence,
    ) -> Option<HealthAnswer> {
        let (status, message) = self.health_probe(&head.method, &head.target)?;
        let bytes = plain_answer(version, status, message, persistence, head.method == Method::HEAD);
        Some(HealthAnswer { status, bytes })
    }

    /// The status and message that answer a request for `target` if it probes `--health-path`
    /// (GET or HEAD), whichever protocol carried it; else `None`.
    pub(super) fn health_probe(&self, method: &Method, target: &str) -> Option<(StatusCode, &'static str)> {
        let path = self.settings.health_path.as_deref()?;
        let is_probe = matches!(*method, Method::GET | Method::HEAD) && target.split('?').next() == Some(path);
        if !is_probe {
            return None;
        }
        Some(match self.readiness.check() {
            Ok(()) => (StatusCode::OK, "ready"),
            Err(reason) => (StatusCode::SERVICE_UNAVAILABLE, reason),
        })
    }
}

/// A plain response the front makes itself: one line of text, none of it for `HEAD`.
pub(super) fn plain_answer(
    version: Version,
    status: StatusCode,
    message: &str,
    persistence: Persistence,
    is_head: bool,
) -> Bytes {
    let mut bytes = plain_response(version, status, message, &[], persistence);
    if is_head {
        bytes.truncate(bytes.len() - message.len() - 1); // the body: the message and a newline
    }
    bytes
}
