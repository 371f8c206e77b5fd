//! `--max-websocket-held`: the memory every socket's unfinished fragmented message takes, all
//! sockets together. A fragmented client message waits in the front until its last frame shows
//! that it fits `--max-websocket-message`; without a bound across sockets, many clients each
//! holding a message short of its end would hold sockets x messages of memory. A socket whose
//! message would take more than is left is closed (1013, try again later) rather than made to
//! wait: waiting for room that only other unfinished messages can free would stall them all.

use std::sync::Arc;

use crate::byte_budget::ByteBudget;

/// What one socket's unfinished message has taken of the budget; given back when the message
/// ends, and when the socket closes.
#[derive(Debug)]
pub struct Reservation {
    budget: Arc<ByteBudget>,
    taken: u64,
}

impl Reservation {
    pub fn new(budget: Arc<ByteBudget>) -> Reservation {
        Reservation { budget, taken: 0 }
    }

    /// Takes `bytes` more for the message under way; false if the budget has no room for them.
    pub fn take(&mut self, bytes: u64) -> bool {
        let taken = self.budget.take(bytes);
        if taken {
            self.taken += bytes;
        }
        taken
    }

    /// The message has ended: gives back what it took.
    pub fn release(&mut self) {
        if self.taken > 0 {
            self.budget.give_back(std::mem::take(&mut self.taken));
        }
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.release();
    }
}
