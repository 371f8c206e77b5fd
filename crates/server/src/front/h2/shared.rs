//! What the streams of one HTTP/2 connection share: the front, the client, and the counts of
//! streams reset and completed that tell a rapid-reset flood from a client that cancels now and
//! then. Its own module, as the connection ([`super`]) makes it and each stream
//! ([`super::stream`]) uses it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::front::forwarding_fields::Peer;
use crate::front::state::Front;

/// What a connection's streams share.
pub(super) struct Shared {
    pub(super) front: Arc<Front>,
    pub(super) peer: Peer,
    /// Streams the client reset (or left) before their response was complete.
    cancelled: AtomicU64,
    /// Streams whose response went out whole.
    complete: AtomicU64,
}

impl Shared {
    /// A new connection's, with no stream counted yet.
    pub(super) fn new(front: Arc<Front>, peer: Peer) -> Self {
        Shared { front, peer, cancelled: AtomicU64::new(0), complete: AtomicU64::new(0) }
    }

    pub(super) fn count_cancelled(&self) {
        self.cancelled.fetch_add(1, Ordering::Relaxed);
    }

    pub(super) fn count_complete(&self) {
        self.complete.fetch_add(1, Ordering::Relaxed);
    }

    /// Whether the client has reset more streams than the stream limit plus those it let finish.
    pub(super) fn resets_too_many(&self, max_concurrent_streams: u32) -> bool {
        let (cancelled, complete) = (self.cancelled.load(Ordering::Relaxed), self.complete.load(Ordering::Relaxed));
        cancelled > u64::from(max_concurrent_streams) + complete
    }
}
