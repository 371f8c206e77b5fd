//! A count of things in progress (busy slots, open connections) that can be awaited to reach
//! zero: a drain waits on it instead of polling.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

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

    /// Counts one more unless the count has reached `limit`; returns whether it did.
    pub fn try_up(&self, limit: usize) -> bool {
        self.count
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |count| (count < limit).then_some(count + 1))
            .is_ok()
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

/// Holds one unit of a shared tally while alive.
pub struct Hold(Arc<Tally>);

impl Hold {
    pub fn new(tally: Arc<Tally>) -> Hold {
        tally.up();
        Hold(tally)
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        self.0.down();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn counting_up_to_a_limit() {
        let tally = Tally::default();
        assert!(tally.try_up(2) && tally.try_up(2));
        assert!(!tally.try_up(2));
        tally.down();
        assert!(tally.try_up(2));
        assert!(!Tally::default().try_up(0));
    }
}
