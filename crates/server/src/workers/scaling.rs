//! Adaptive W (`-w MIN:MAX`): the decision to add a worker, remove one, or hold, from what the
//! queue and the pool measured over the last interval. Pure: the supervisor's scaling task
//! ([`super::supervisor`]) gathers the [`Measurements`], asks [`Scaler::decide`] (or
//! [`Scaler::by_hand`] for a signal or the control address) and does what it says, so every rule
//! is here, and tested on a simulated day without a process or a clock.
//!
//! The aim: at most [`WAIT_SHARE`] of the requests wait longer than `--scale-up-wait` for a slot.
//! The rules:
//! - **Add** when requests waited for a slot longer than `--scale-up-wait` over the interval (the
//!   99th percentile of those a slot started, or the oldest still waiting). As many are added at
//!   once as the pool needs for the interval's arrivals to meet the aim ([`erlang`]: the slots as
//!   an M/M/c queue): a step from 15 % to 150 % of the capacity is met in one add, not in one add
//!   an interval. Where the model says the pool suffices but the backlog did not drain (it grew,
//!   or the door refused some), the queue's evidence wins: one more. A long wait in a backlog
//!   that drains by itself (a burst into an idle pool) needs no worker, only time.
//! - **No flapping**: a worker still starting is no capacity, and no other is added meanwhile;
//!   a worker added is given a whole interval of serving before the next add is judged; a worker
//!   that fails to start holds adds back for growing pauses; a worker removed by hand is not
//!   put back by the next interval's decision: automatic adds wait `--worker-idle-timeout` after
//!   it, as automatic removals wait that long after any add.
//! - **Remove** one when a whole worker's slots stood idle (the fewest idle at any moment of each
//!   interval) for `--worker-idle-timeout` and one worker fewer still meets the aim for the
//!   arrivals, never below MIN. The front spreads requests over every worker, so no single worker
//!   goes idle while the pool is merely too big: the spare slots of the pool are the measure. The
//!   worker removed is the least busy one; it drains.
//! - **Within memory**: never add when the workers' resident memory plus one more worker's (the
//!   mean of the live ones) would pass `--max-memory`; that refusal is an event of its own,
//!   counted once while it lasts.

mod erlang;

use std::time::{Duration, Instant};

/// What the scaling task measures and decides on each interval: short enough that a step in load
/// is met before a hundredth of a busy second's requests have waited, long enough for its
/// arrivals to be a rate.
pub const INTERVAL: Duration = Duration::from_millis(200);
/// The longest pause after adds that failed to start, doubling from one interval.
const MOST_PAUSE: Duration = Duration::from_secs(30);
/// The share of requests the pool is sized to let wait longer than `--scale-up-wait`: the same
/// percentile the trigger reads.
pub const WAIT_SHARE: f64 = 0.01;
/// `--scale-up-wait auto` in mean service times.
const AUTO_WAIT_SERVICES: u32 = 10;
/// `--scale-up-wait auto` before the service time is known and with controlled delay off.
const AUTO_WAIT_UNKNOWN: Duration = Duration::from_millis(10);
const AUTO_WAIT_LEAST: Duration = Duration::from_millis(1);

/// `--scale-up-wait`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScaleUpWait {
    /// A tenth of the mean service time, and below half the controlled delay's target (see
    /// [`ScaleUpWait::of`]).
    Auto,
    Fixed(Duration),
}

impl ScaleUpWait {
    /// The wait above which capacity is short. `auto`: a tenth of the mean service time (a wait
    /// that short is lost in the service's own spread, so a pool that keeps the 99th percentile
    /// of waits below it keeps the tail within a tenth of what enough workers give), and below
    /// half the controlled delay's target when it is on, because an overload held to the target
    /// keeps served waits about there: a trigger above it would never fire.
    pub fn of(self, mean_service: Option<Duration>, target: Option<Duration>) -> Duration {
        match self {
            ScaleUpWait::Fixed(wait) => wait,
            ScaleUpWait::Auto => {
                let service = mean_service.map_or(AUTO_WAIT_UNKNOWN, |service| service / AUTO_WAIT_SERVICES);
                let below_target = target.map_or(service, |target| service.min(target / 2));
                below_target.max(AUTO_WAIT_LEAST)
            }
        }
    }
}

/// How far W may go, and when it moves.
#[derive(Debug, Clone)]
pub struct ScalingPolicy {
    /// The workers started with the server.
    pub start: usize,
    /// The bounds W moves within, by itself or by hand.
    pub min: usize,
    pub max: usize,
    /// Whether W moves by itself (`-w MIN:MAX`); with a single number only by hand.
    pub automatic: bool,
    pub scale_up_wait: ScaleUpWait,
    /// `--worker-idle-timeout`.
    pub idle_timeout: Duration,
    /// `--max-memory`: the workers' resident memory together, in bytes.
    pub max_memory: Option<u64>,
}

/// Why W changed, or an add was refused: each counted in the stats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cause {
    /// Requests waited longer than `--scale-up-wait`.
    QueueWait,
    /// A worker's worth of slots idle for `--worker-idle-timeout`.
    Idle,
    /// An add refused: one more worker would pass `--max-memory`.
    MemoryCap,
    /// SIGTTIN or SIGTTOU.
    Signal,
    /// `headway workers add|remove` on the control address.
    Control,
}

impl Cause {
    pub const ALL: [Cause; 5] = [Cause::QueueWait, Cause::Idle, Cause::MemoryCap, Cause::Signal, Cause::Control];

    /// As the stats and `/metrics` label it.
    pub fn label(self) -> &'static str {
        match self {
            Cause::QueueWait => "queue_wait",
            Cause::Idle => "idle",
            Cause::MemoryCap => "memory_cap",
            Cause::Signal => "signal",
            Cause::Control => "control",
        }
    }
}

/// One worker as the decision sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkerView {
    pub index: usize,
    /// Serving; false while starting (no capacity yet).
    pub ready: bool,
    pub busy: usize,
    /// Resident memory of its processes, in bytes.
    pub rss: u64,
}

/// What was measured over the last interval.
#[derive(Debug, Clone, Default)]
pub struct Measurements {
    /// How long requests waited for a slot: the 99th percentile of those a slot started, or the
    /// oldest still waiting when longer.
    pub wait: Duration,
    /// The backlog grew, or the door refused requests.
    pub backlog_grew: bool,
    /// The fewest idle slots of the serving workers at any moment of the interval.
    pub spare_slots: usize,
    /// Slots of one worker.
    pub worker_slots: usize,
    /// Requests that arrived over the interval, a second: started, refused, or still waiting.
    pub arrivals: f64,
    pub mean_service: Option<Duration>,
    /// Controlled delay's target, when it is on.
    pub target: Option<Duration>,
    /// The workers in the pool (those draining away are not).
    pub workers: Vec<WorkerView>,
}

impl Measurements {
    fn starting(&self) -> bool {
        self.workers.iter().any(|worker| !worker.ready)
    }

    /// How many more workers keep the pool within `budget`, each counted at the mean of the
    /// workers' memory (`usize::MAX` without a budget, or before any was measured).
    fn fitting(&self, budget: Option<u64>) -> usize {
        let Some(budget) = budget else { return usize::MAX };
        let measured: Vec<u64> = self.workers.iter().map(|worker| worker.rss).filter(|&rss| rss > 0).collect();
        if measured.is_empty() {
            return usize::MAX;
        }
        let total: u64 = measured.iter().sum();
        let mean = (total / measured.len() as u64).max(1);
        let unmeasured = (self.workers.len() - measured.len()) as u64;
        let room = budget.saturating_sub(total + mean * unmeasured);
        usize::try_from(room / mean).unwrap_or(usize::MAX)
    }

    /// The workers the interval's arrivals need for at most [`WAIT_SHARE`] of them to wait longer
    /// than `wait`, up to `most`; `None` before the service time is known.
    fn needed(&self, wait: Duration, most: usize) -> Option<usize> {
        let service = self.mean_service.filter(|service| !service.is_zero())?;
        if self.worker_slots == 0 {
            return None;
        }
        let busy = self.arrivals * service.as_secs_f64();
        let wait = wait.as_secs_f64() / service.as_secs_f64();
        Some(erlang::workers_needed(busy, self.worker_slots, wait, WAIT_SHARE, most))
    }

    /// The serving worker to remove: the least busy, the newest among equals.
    fn least_busy(&self) -> Option<usize> {
        self.workers
            .iter()
            .filter(|worker| worker.ready)
            .min_by_key(|worker| (worker.busy, std::cmp::Reverse(worker.index)))
            .map(|worker| worker.index)
    }
}

/// What to do now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Start this many workers.
    Add(usize, Cause),
    /// Drain and stop the worker of this index.
    Remove(usize, Cause),
    Hold,
    /// Nothing, for this reason, which is logged: an add refused by the budget (counted as a
    /// `memory_cap` event), or a request by hand beyond MIN:MAX.
    Refuse(Refusal),
}

/// Why a change was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    Memory,
    AtMax,
    AtMin,
}

/// Which way a hand asks W to go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    Up,
    Down,
}

/// The decision's memory between intervals.
#[derive(Debug)]
pub struct Scaler {
    policy: ScalingPolicy,
    /// Since when every worker has been serving (none starting); `None` while one starts.
    serving_since: Option<Instant>,
    /// Since when a worker's slots have stood idle in every interval.
    spare_since: Option<Instant>,
    /// Whether the budget is refusing adds now (counted once while it lasts).
    capped: bool,
    /// No add before this, after one failed to start; and the pause to the next.
    failed: Option<(Instant, Duration)>,
    /// No automatic add before this, after a removal by hand.
    removed_by_hand: Option<Instant>,
}

impl ScalingPolicy {
    /// The most workers the pool grows to by itself.
    pub fn most(&self) -> usize {
        if self.automatic {
            self.max
        } else {
            self.start
        }
    }
}

impl Scaler {
    pub fn new(policy: ScalingPolicy) -> Scaler {
        Scaler { policy, serving_since: None, spare_since: None, capped: false, failed: None, removed_by_hand: None }
    }

    /// The decision for the interval that ended at `now`.
    pub fn decide(&mut self, now: Instant, m: &Measurements) -> Decision {
        let count = m.workers.len();
        if m.starting() {
            self.serving_since = None;
        } else if self.serving_since.is_none() {
            self.serving_since = Some(now);
        }
        let spare = m.worker_slots > 0 && m.spare_slots >= m.worker_slots;
        if !spare {
            self.spare_since = None;
        } else if self.spare_since.is_none() {
            self.spare_since = Some(now);
        }
        if !self.policy.automatic {
            return Decision::Hold;
        }

        let wait = self.policy.scale_up_wait.of(m.mean_service, m.target);
        let needed = m.needed(wait, self.policy.max);
        // The model's shortfall, or one when it says enough but the backlog did not drain.
        let shortfall = match needed {
            Some(needed) if needed > count => needed - count,
            _ => usize::from(m.backlog_grew),
        };
        let short = m.wait > wait && shortfall > 0;
        if !short {
            self.capped = false;
        }
        // A worker added has had a whole interval of serving, or is still starting.
        let settled = self.serving_since.is_some_and(|since| now.duration_since(since) >= INTERVAL);
        let paused =
            self.failed.is_some_and(|(until, _)| now < until) || self.removed_by_hand.is_some_and(|until| now < until);
        if short && count < self.policy.max && settled && !paused {
            let fitting = m.fitting(self.policy.max_memory);
            if fitting == 0 {
                return self.refuse_memory();
            }
            self.added();
            return Decision::Add(shortfall.min(self.policy.max - count).min(fitting), Cause::QueueWait);
        }

        let idle_long = self.spare_since.is_some_and(|since| now.duration_since(since) >= self.policy.idle_timeout);
        // One fewer must still meet the aim, or the next interval's waits would put it back.
        let fewer_suffice = needed.is_none_or(|needed| needed < count);
        if idle_long && !short && fewer_suffice && count > self.policy.min {
            if let Some(index) = m.least_busy() {
                // The next removal needs a whole timeout of its own.
                self.spare_since = None;
                return Decision::Remove(index, Cause::Idle);
            }
        }
        Decision::Hold
    }

    /// A request by hand (a signal, the control address) at `now`: within MIN:MAX when a range
    /// was given (else 1 to MAX), and within the memory budget.
    pub fn by_hand(&mut self, now: Instant, direction: Direction, cause: Cause, m: &Measurements) -> Decision {
        let count = m.workers.len();
        match direction {
            Direction::Up if count >= self.policy.max => Decision::Refuse(Refusal::AtMax),
            Direction::Up if m.fitting(self.policy.max_memory) == 0 => Decision::Refuse(Refusal::Memory),
            Direction::Up => {
                self.added();
                self.removed_by_hand = None;
                Decision::Add(1, cause)
            }
            Direction::Down if count <= self.policy.min => Decision::Refuse(Refusal::AtMin),
            Direction::Down => match m.least_busy() {
                Some(index) => {
                    self.spare_since = None;
                    self.removed_by_hand = Some(now + self.policy.idle_timeout);
                    Decision::Remove(index, cause)
                }
                None => Decision::Refuse(Refusal::AtMin),
            },
        }
    }

    /// The worker last added failed to start: adds pause, longer each time in a row.
    pub fn add_failed(&mut self, now: Instant) {
        let pause = self.failed.map_or(INTERVAL, |(_, pause)| (pause * 2).min(MOST_PAUSE));
        self.failed = Some((now + pause, pause));
    }

    /// The worker last added serves.
    pub fn add_succeeded(&mut self) {
        self.failed = None;
    }

    fn added(&mut self) {
        self.serving_since = None;
        self.spare_since = None;
    }

    /// Refuses an add for the budget: counted the first interval it happens, held after that.
    fn refuse_memory(&mut self) -> Decision {
        if std::mem::replace(&mut self.capped, true) {
            return Decision::Hold;
        }
        Decision::Refuse(Refusal::Memory)
    }
}

#[cfg(test)]
mod tests;
