//! A count of things in progress (busy slots, open connections) that can be awaited to reach
//! zero: a drain waits on it instead of polling.

use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::Notify;

#[derive(Default)]
pub struct Tally {
    count: AtomicUsize,
    zero: Notify,
}

impl Tally {
    pub fn get(&self) -> usize {
        self.count.load(Ordering::Relaxed)
    }

    pub fn up(&self) {
        self.count.fetch_add(1, Ordering::Relaxed);
    }

    pub fn down(&self) {
        if self.count.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.zero.notify_waiters();
        }
    }

    /// Resolves once the count is zero.
    pub async fn zero(&self) {
        loop {
            let notified = self.zero.notified();
            tokio::pin!(notified);
            // Registered before the check, so a `down` in between is not missed.
            notified.as_mut().enable();
            if self.count.load(Ordering::Acquire) == 0 {
                return;
            }
            notified.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[tokio::test]
    async fn waiting_for_zero_wakes_on_the_last_down() {
        let tally = Arc::new(Tally::default());
        tally.up();
        tally.up();
        let waiter = tokio::spawn({
            let tally = tally.clone();
            async move { tally.zero().await }
        });
        tally.down();
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished());
        tally.down();
        waiter.await.unwrap();
        tally.zero().await; // already zero: at once
    }
}
