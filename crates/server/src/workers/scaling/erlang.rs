//! How many workers a load needs: the pool's slots taken as an M/M/c queue (Poisson arrivals,
//! each slot a server), where Erlang's C formula gives the share of requests that wait for a slot
//! at all, and the share that waits longer than a time `t` follows as
//! `C(c, a) * e^(-(c - a) * t / S)` (c slots, a = arrivals x mean service S busy slots on
//! average). Real loads are burstier than Poisson and services vary more than exponentially, so
//! the figure is a floor the queue's own measurements can raise; it is what sizes an add, and what
//! a removal must still meet.

/// The share of requests that wait longer than `t` for one of `slots`, with `busy` slots busy on
/// average and `t` given in mean service times. 1 when the slots cannot keep up.
pub fn share_waiting_longer(slots: usize, busy: f64, t: f64) -> f64 {
    let c = slots as f64;
    if busy >= c {
        return 1.0;
    }
    if busy <= 0.0 {
        return 0.0;
    }
    // Erlang B by its recurrence (stable for any number of slots), then C from B.
    let blocked = (1..=slots).fold(1.0, |b, k| busy * b / (k as f64 + busy * b));
    let waits = c * blocked / (c - busy * (1.0 - blocked));
    (waits * (-(c - busy) * t).exp()).min(1.0)
}

/// The fewest workers of `worker_slots` each, up to `most`, that keep the share of requests
/// waiting longer than `t` service times at or below `share`; `most` when none does.
pub fn workers_needed(busy: f64, worker_slots: usize, t: f64, share: f64, most: usize) -> usize {
    (1..=most).find(|&workers| share_waiting_longer(workers * worker_slots, busy, t) <= share).unwrap_or(most)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn erlang_c_matches_the_tables() {
        // Two servers at one Erlang: a third of the arrivals wait (C(2, 1) = 1/3).
        assert!((share_waiting_longer(2, 1.0, 0.0) - 1.0 / 3.0).abs() < 1e-9);
        // One server: M/M/1 waits with probability rho.
        assert!((share_waiting_longer(1, 0.7, 0.0) - 0.7).abs() < 1e-9);
        // And longer than one service time with rho * e^-(1 - rho).
        assert!((share_waiting_longer(1, 0.7, 1.0) - 0.7 * (-0.3f64).exp()).abs() < 1e-9);
    }

    #[test]
    fn an_overload_waits_always_and_no_load_never() {
        assert_eq!(share_waiting_longer(8, 12.0, 0.1), 1.0);
        assert_eq!(share_waiting_longer(8, 0.0, 0.1), 0.0);
    }

    #[test]
    fn workers_needed_grow_with_the_load_and_stop_at_most() {
        // 120 a second x 100 ms = 12 busy slots, 4 a worker, 1 % waiting over a tenth of a service:
        // five workers (20 slots) leave 1.1 % waiting that long, six 0.05 %.
        assert_eq!(workers_needed(12.0, 4, 0.1, 0.01, 8), 6);
        assert_eq!(workers_needed(1.2, 4, 0.1, 0.01, 8), 2);
        assert_eq!(workers_needed(0.0, 4, 0.1, 0.01, 8), 1);
        assert_eq!(workers_needed(100.0, 4, 0.1, 0.01, 8), 8);
    }
}
