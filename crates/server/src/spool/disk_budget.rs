//! `--max-temp-disk`: what every spool's temporary file takes of the disk, together, and the
//! writers held back for want of it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tokio::sync::Notify;

/// `--max-temp-disk`: the disk the temporary files of every spool, request and response, may take
/// together.
#[derive(Debug)]
pub struct DiskBudget {
    pub(super) limit: u64,
    used: AtomicU64,
    /// Times a spool's writer had to wait for room.
    pub(super) held_back: AtomicU64,
    /// Notified whenever disk is given back.
    pub(super) freed: Notify,
}

impl DiskBudget {
    pub fn new(limit: u64) -> Arc<DiskBudget> {
        Arc::new(DiskBudget { limit, used: AtomicU64::new(0), held_back: AtomicU64::new(0), freed: Notify::new() })
    }

    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// Bytes the spools' files hold now.
    pub fn used(&self) -> u64 {
        self.used.load(Ordering::Relaxed)
    }

    pub fn held_back(&self) -> u64 {
        self.held_back.load(Ordering::Relaxed)
    }

    /// Takes `bytes` if they fit, or if nothing is taken (a piece larger than the whole budget
    /// must still go somewhere, once; a budget of 0 takes nothing ever).
    pub(super) fn take(&self, bytes: u64) -> bool {
        let fits = |used: u64| {
            let total = used.checked_add(bytes)?;
            (total <= self.limit || (used == 0 && self.limit > 0)).then_some(total)
        };
        self.used.fetch_update(Ordering::Relaxed, Ordering::Relaxed, fits).is_ok()
    }

    pub(super) fn give_back(&self, bytes: u64) {
        if bytes > 0 {
            self.used.fetch_sub(bytes, Ordering::Relaxed);
            self.freed.notify_waiters();
        }
    }
}
