//! A number of bytes that many holders take from and give back to, shared across the front's
//! threads: what every spool's temporary files take of the disk (`--max-temp-disk`), and what
//! every WebSocket's unfinished messages take of memory (`--max-websocket-held`).

use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Debug)]
pub struct ByteBudget {
    limit: u64,
    used: AtomicU64,
    /// Times a take did not fit.
    refusals: AtomicU64,
}

impl ByteBudget {
    pub fn new(limit: u64) -> ByteBudget {
        ByteBudget { limit, used: AtomicU64::new(0), refusals: AtomicU64::new(0) }
    }

    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// Bytes taken now.
    pub fn used(&self) -> u64 {
        self.used.load(Ordering::Relaxed)
    }

    /// Times a take did not fit.
    pub fn refusals(&self) -> u64 {
        self.refusals.load(Ordering::Relaxed)
    }

    /// Takes `bytes` if they fit, or if nothing is taken (a piece larger than the whole budget
    /// must still go somewhere, once; a budget of 0 takes nothing ever).
    pub fn take(&self, bytes: u64) -> bool {
        let fits = |used: u64| {
            let total = used.checked_add(bytes)?;
            (total <= self.limit || (used == 0 && self.limit > 0)).then_some(total)
        };
        let taken = self.used.fetch_update(Ordering::Relaxed, Ordering::Relaxed, fits).is_ok();
        if !taken {
            self.refusals.fetch_add(1, Ordering::Relaxed);
        }
        taken
    }

    /// Gives back `bytes` taken before.
    pub fn give_back(&self, bytes: u64) {
        self.used.fetch_sub(bytes, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn takes_what_fits_and_once_what_does_not_when_empty() {
        let budget = ByteBudget::new(100);
        assert!(budget.take(60));
        assert!(!budget.take(50), "past the limit");
        assert!(budget.take(40));
        budget.give_back(100);
        assert!(budget.take(500), "larger than the whole budget, taken alone");
        assert!(!budget.take(1));
        assert_eq!(budget.refusals(), 2);
        budget.give_back(500);
        assert_eq!(budget.used(), 0);
        assert!(!ByteBudget::new(0).take(1), "a budget of 0 takes nothing");
    }
}
