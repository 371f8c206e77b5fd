//! `--max-temp-disk`: what every spool's temporary file takes of the disk, together, and the
//! writers held back for want of it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tokio::sync::Notify;

use crate::byte_budget::ByteBudget;

/// `--max-temp-disk`: the disk the temporary files of every spool, request and response, may take
/// together.
#[derive(Debug)]
pub struct DiskBudget {
    bytes: ByteBudget,
    /// Times a spool's writer had to wait for room.
    pub(super) held_back: AtomicU64,
    /// Notified whenever disk is given back.
    pub(super) freed: Notify,
}

impl DiskBudget {
    pub fn new(limit: u64) -> Arc<DiskBudget> {
        Arc::new(DiskBudget { bytes: ByteBudget::new(limit), held_back: AtomicU64::new(0), freed: Notify::new() })
    }

    pub fn limit(&self) -> u64 {
        self.bytes.limit()
    }

    /// Bytes the spools' files hold now.
    pub fn used(&self) -> u64 {
        self.bytes.used()
    }

    pub fn held_back(&self) -> u64 {
        self.held_back.load(Ordering::Relaxed)
    }

    /// Takes `bytes` if they fit ([`ByteBudget::take`]).
    pub(super) fn take(&self, bytes: u64) -> bool {
        self.bytes.take(bytes)
    }

    pub(super) fn give_back(&self, bytes: u64) {
        if bytes > 0 {
            self.bytes.give_back(bytes);
            self.freed.notify_waiters();
        }
    }
}
