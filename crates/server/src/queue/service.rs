//! How long a request holds a slot, as far as the queue can tell, and what follows from it: when
//! a newcomer would start, and when a refused client should come back.
//!
//! The queue refuses requests by this estimate, so it trusts, in this order:
//! - the moving mean of recent requests, once [`SAMPLES_FOR_MEAN`] have finished;
//! - before that, the fastest request seen so far, once a whole round of slots (at least two
//!   requests) has finished. A fresh server's first burst is then judged after one service time
//!   instead of at its deadline, and the fastest rather than the mean of so few: an estimate on
//!   the low side refuses less, never more, so a burst the server can absorb is not turned away;
//! - before that, the operator's `--service-time-hint`, which answers even the very first burst
//!   on arrival;
//! - otherwise nothing: the queue refuses nobody for time, and the deadline alone applies.

use std::time::Duration;

/// Finished requests needed before the moving mean is trusted.
pub const SAMPLES_FOR_MEAN: u64 = 20;
/// Weight of the newest service time in the moving mean: about the last 20 requests count.
const WEIGHT: f64 = 0.05;

pub struct ServiceTime {
    hint: Option<Duration>,
    /// Moving mean of how long requests ran, in seconds, and how many fed it.
    mean_secs: f64,
    samples: u64,
    fastest_secs: f64,
}

impl ServiceTime {
    pub fn new(hint: Option<Duration>) -> Self {
        ServiceTime { hint, mean_secs: 0.0, samples: 0, fastest_secs: f64::INFINITY }
    }

    /// Learns from a finished request.
    pub fn record(&mut self, took: Duration) {
        let took = took.as_secs_f64();
        self.mean_secs = match self.samples {
            0 => took,
            _ => self.mean_secs + WEIGHT * (took - self.mean_secs),
        };
        self.fastest_secs = self.fastest_secs.min(took);
        self.samples += 1;
    }

    /// The service time the queue goes by with `slots` slots, if it knows one.
    pub fn estimate(&self, slots: usize) -> Option<Duration> {
        if self.samples >= SAMPLES_FOR_MEAN {
            Some(Duration::from_secs_f64(self.mean_secs))
        } else if self.samples >= slots.max(2) as u64 {
            Some(Duration::from_secs_f64(self.fastest_secs))
        } else {
            self.hint
        }
    }

    /// The moving mean in milliseconds for stats, 0 until it is trusted.
    pub fn mean_ms(&self) -> f64 {
        if self.samples >= SAMPLES_FOR_MEAN {
            self.mean_secs * 1000.0
        } else {
            0.0
        }
    }
}

/// How long a request joining behind `waiting` others may wait for its turn: everyone ahead of it
/// and itself must get a slot, and each slot frees up once per `service`. The rounds are counted
/// whole: when the slots run in step (a burst of like requests), one arriving just after they all
/// started waits every round in full, and a request admitted only to be shed at the deadline
/// would wait the whole timeout for nothing.
pub fn expected_start(waiting: usize, slots: usize, service: Duration) -> Duration {
    let rounds = (waiting + 1).div_ceil(slots.max(1));
    service.saturating_mul(u32::try_from(rounds).unwrap_or(u32::MAX))
}

/// `Retry-After` for a client refused now: how long a request joining behind `waiting` others
/// would wait for a slot, in whole seconds, at least 1, and at most the queue timeout (the longest
/// the queue ever lets anyone wait). 1 when the service time is not known.
pub fn retry_after_secs(waiting: usize, slots: usize, service: Option<Duration>, timeout: Duration) -> u32 {
    let wait = service.map_or(Duration::ZERO, |service| expected_start(waiting, slots, service));
    let longest = timeout.as_secs_f64().ceil().max(1.0);
    wait.as_secs_f64().ceil().clamp(1.0, longest) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn the_estimate_goes_from_hint_to_a_round_of_measurements_to_the_mean() {
        let mut service = ServiceTime::new(Some(300 * MS));
        assert_eq!(service.estimate(4), Some(300 * MS), "nothing measured: the hint");
        for took in [120, 100, 140] {
            service.record(took * MS);
        }
        assert_eq!(service.estimate(4), Some(300 * MS), "less than a round of 4 slots");
        service.record(110 * MS);
        assert_eq!(service.estimate(4), Some(100 * MS), "a round: the fastest so far, not the hint");
        assert_eq!(service.mean_ms(), 0.0, "the mean is not shown before it is trusted");
        for _ in 4..SAMPLES_FOR_MEAN {
            service.record(200 * MS);
        }
        let mean = service.estimate(4).unwrap();
        assert!(mean > 150 * MS && mean < 200 * MS, "the moving mean: {mean:?}");
        assert!((service.mean_ms() - mean.as_secs_f64() * 1000.0).abs() < 1e-6, "stats show the same mean");
    }

    #[test]
    fn without_a_hint_nothing_is_known_until_two_requests_finished() {
        let mut service = ServiceTime::new(None);
        assert_eq!(service.estimate(1), None);
        service.record(1500 * MS);
        assert_eq!(service.estimate(1), None, "one slow request says little about the next");
        service.record(60 * MS);
        assert_eq!(service.estimate(1), Some(60 * MS));
    }

    #[test]
    fn expected_start_counts_whole_rounds() {
        assert_eq!(expected_start(0, 4, 100 * MS), 100 * MS);
        assert_eq!(expected_start(3, 4, 100 * MS), 100 * MS);
        assert_eq!(expected_start(4, 4, 100 * MS), 200 * MS);
        assert_eq!(expected_start(11, 4, 100 * MS), 300 * MS);
    }

    #[test]
    fn retry_after_is_the_wait_of_a_newcomer_in_whole_seconds() {
        let timeout = Duration::from_secs(10);
        assert_eq!(retry_after_secs(25, 1, None, timeout), 1, "unknown service time");
        assert_eq!(retry_after_secs(3, 8, Some(100 * MS), timeout), 1, "a short wait: at least 1");
        assert_eq!(retry_after_secs(25, 1, Some(100 * MS), timeout), 3, "26 rounds of 100 ms: 2.6 s");
        assert_eq!(retry_after_secs(25, 1, Some(Duration::from_secs(1)), timeout), 10, "never past the timeout");
        assert_eq!(retry_after_secs(25, 1, Some(Duration::from_secs(1)), 2500 * MS), 3, "the timeout, rounded up");
    }
}
