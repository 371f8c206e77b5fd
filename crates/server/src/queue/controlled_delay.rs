//! Controlled delay: telling a sustained overload from a burst or a closed loop of clients, and
//! holding the queue short while the overload lasts. The policy, and why, is in the queue's own
//! documentation; this is its bookkeeping, fed by every start of a request.
//!
//! The evidence, as in CoDel (RFC 8289): the queue is *standing* once every request started for a
//! whole interval had waited longer than the target. Then one more condition, which routers do
//! not need and an application server does: a standing queue is an overload only if it keeps
//! growing: its longest in each of [`RISES`] intervals in a row longer than in the one before,
//! and by then by more than a round of slots over its longest in the interval it was found
//! standing. A burst into an idle server raises the queue once and then drains; N clients that
//! each wait for their answer before sending again (a closed loop, a benchmark, a browser) keep
//! it as deep as they are many, never deeper. A closed loop can still look like growth for a
//! moment: when the server or the clients' machine stalls, the queue dips and then refills in a
//! jump, up to the same depth as before, and stays there. Only arrivals that outrun the slots make
//! it grow interval after interval.

use std::time::Duration;

use tokio::time::Instant;

/// The target wait, when none is given: this many times the service time...
const AUTO_TARGET_SERVICES: u32 = 3;
/// ...within these bounds (CoDel's 5 ms at the low end; at the high end, a wait still short
/// next to any request worth queueing for).
const AUTO_TARGET_MIN: Duration = Duration::from_millis(5);
const AUTO_TARGET_MAX: Duration = Duration::from_millis(50);
/// A hold lasts this many intervals and then ends by itself: while it lasts, the queue is kept
/// short on purpose and shows nothing of whether the overload goes on; after it, the evidence is
/// gathered afresh...
const HOLD_INTERVALS: u32 = 10;
/// ...doubling, up to this many times, when the overload comes back within one hold of the last.
const HOLD_MAX_DOUBLINGS: u32 = 3;
/// Intervals in a row in which a standing queue must have grown.
const RISES: u32 = 3;

/// `--queue-target`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// A plain deadline queue: requests may wait up to the queue timeout, whatever the load.
    Off,
    /// A few service times, within 5-50 ms.
    Auto,
    Fixed(Duration),
}

pub struct ControlledDelay {
    target: Target,
    interval: Duration,
    /// Since when every request started had waited longer than the target, and how the queue's
    /// length went since then.
    above: Option<Growth>,
    /// The current or last hold: until when, and how long it was.
    hold: Option<(Instant, Duration)>,
    /// Since when slots have found nothing to start, with no request started since.
    idle_since: Option<Instant>,
    /// Holds begun: sustained overloads found.
    pub overloads: u64,
}

impl ControlledDelay {
    pub fn new(target: Target, interval: Duration) -> Self {
        ControlledDelay { target, interval, above: None, hold: None, idle_since: None, overloads: 0 }
    }

    /// The target wait for requests whose service time is `service`; `None` when switched off.
    pub fn target(&self, service: Option<Duration>) -> Option<Duration> {
        match self.target {
            Target::Off => None,
            Target::Fixed(target) => Some(target),
            Target::Auto => Some(service.map_or(AUTO_TARGET_MAX, |service| {
                service.saturating_mul(AUTO_TARGET_SERVICES).clamp(AUTO_TARGET_MIN, AUTO_TARGET_MAX)
            })),
        }
    }

    pub fn interval(&self) -> Duration {
        self.interval
    }

    /// Whether arrivals are held to the target now. Slots that found nothing to do for a whole
    /// interval end a hold: the overload is over, and a burst into the idle server is absorbed.
    pub fn holding(&self, now: Instant) -> bool {
        self.hold.is_some_and(|(until, _)| now < until) && !self.idle_for_an_interval(now)
    }

    fn idle_for_an_interval(&self, now: Instant) -> bool {
        self.idle_since.is_some_and(|since| now >= since + self.interval)
    }

    /// While holding: how many requests may wait, those that `slots` slots start within the
    /// target. At least one, so that a slot finishing always finds work: the slots stay busy and
    /// the server serves its full capacity.
    pub fn room(&self, slots: usize, service: Option<Duration>) -> usize {
        match (self.target(service), service) {
            (Some(target), Some(service)) if !service.is_zero() => {
                ((target.as_secs_f64() / service.as_secs_f64() * slots as f64) as usize).max(1)
            }
            _ => slots,
        }
    }

    /// A slot started a request that had waited `waited`, leaving `waiting` in the queue.
    /// Returns whether that revealed a sustained overload, so that a hold begins now.
    pub fn started(
        &mut self,
        now: Instant,
        waited: Duration,
        waiting: usize,
        slots: usize,
        service: Option<Duration>,
    ) -> bool {
        let Some(target) = self.target(service) else { return false };
        if self.idle_for_an_interval(now) {
            self.hold = None; // over, and not to be doubled
        }
        self.idle_since = None;
        // While holding, the queue is kept short on purpose; afterwards the evidence is gathered
        // afresh, so clients that flood back the moment a hold ends (a closed loop that was
        // refused) are seen for what they are: a deep queue that does not grow.
        if waited <= target || self.holding(now) {
            self.above = None;
            return false;
        }
        let interval = self.interval;
        let above = self.above.get_or_insert_with(|| Growth::new(now + interval));
        if !above.keeps_growing(now, waiting, slots, interval) {
            return false;
        }
        self.begin_hold(now);
        true
    }

    /// A slot found nothing to start: whatever was standing is gone. (With fewer requests
    /// allowed to wait than there are slots, that happens now and then during an overload too,
    /// so only an interval of it ends a hold.)
    pub fn drained(&mut self, now: Instant) {
        self.above = None;
        self.idle_since.get_or_insert(now);
    }

    fn begin_hold(&mut self, now: Instant) {
        let base = self.interval.saturating_mul(HOLD_INTERVALS);
        let length = match self.hold {
            // Back within one hold of the last one's end: the overload never went away.
            Some((until, length)) if now <= until + length => {
                length.saturating_mul(2).min(base.saturating_mul(1 << HOLD_MAX_DOUBLINGS))
            }
            _ => base,
        };
        self.hold = Some((now + length, length));
        self.above = None;
        self.overloads += 1;
    }
}

/// The queue's longest, interval by interval, since every request started has waited longer than
/// the target.
struct Growth {
    /// When the current interval ends.
    ends: Instant,
    /// The longest in the current interval.
    high: usize,
    /// The longest in the first interval (the queue was found standing at its end), if over.
    standing: Option<usize>,
    /// The longest in the last whole interval, and how many intervals in a row each beat the one
    /// before.
    last: usize,
    rises: u32,
}

impl Growth {
    fn new(ends: Instant) -> Growth {
        Growth { ends, high: 0, standing: None, last: 0, rises: 0 }
    }

    /// Takes in the queue's length as a request starts, and says whether it has kept growing.
    fn keeps_growing(&mut self, now: Instant, waiting: usize, slots: usize, interval: Duration) -> bool {
        self.high = self.high.max(waiting);
        if now < self.ends {
            return false;
        }
        match self.standing {
            None => self.standing = Some(self.high),
            Some(_) if self.high > self.last => self.rises += 1,
            Some(_) => self.rises = 0,
        }
        self.last = self.high;
        self.high = waiting;
        self.ends = now + interval;
        self.rises >= RISES && self.standing.is_some_and(|standing| self.last > standing + slots)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);
    const SLOTS: usize = 8;
    const SERVICE: Option<Duration> = Some(Duration::from_millis(100));

    fn delay() -> ControlledDelay {
        ControlledDelay::new(Target::Auto, 100 * MS)
    }

    #[test]
    fn the_auto_target_is_a_few_service_times_within_bounds() {
        let delay = delay();
        assert_eq!(delay.target(Some(10 * MS)), Some(30 * MS));
        assert_eq!(delay.target(SERVICE), Some(50 * MS));
        assert_eq!(delay.target(Some(MS)), Some(5 * MS));
        assert_eq!(delay.target(None), Some(50 * MS));
        assert_eq!(ControlledDelay::new(Target::Off, 100 * MS).target(SERVICE), None);
        assert_eq!(ControlledDelay::new(Target::Fixed(7 * MS), 100 * MS).target(SERVICE), Some(7 * MS));
    }

    #[test]
    fn room_is_what_the_slots_start_within_the_target_and_never_none() {
        let delay = delay();
        assert_eq!(delay.room(SLOTS, SERVICE), 4, "8 slots x 50 ms / 100 ms");
        assert_eq!(delay.room(1, SERVICE), 1, "half a request rounds up to one");
        assert_eq!(delay.room(SLOTS, Some(MS)), 40);
        assert_eq!(delay.room(SLOTS, None), SLOTS, "unknown service time: one round");
    }

    /// Starts, every `every`, requests that waited `waited` with the queue at `waiting(step)`.
    fn feed(
        delay: &mut ControlledDelay,
        start: Instant,
        steps: u32,
        every: Duration,
        waited: Duration,
        waiting: impl Fn(u32) -> usize,
    ) {
        for step in 0..steps {
            let _ = delay.started(start + every * step, waited, waiting(step), SLOTS, SERVICE);
        }
    }

    #[test]
    fn a_standing_queue_that_keeps_growing_is_held() {
        let mut delay = delay();
        let start = Instant::now();
        // Two arrivals for every start: the queue grows by one per start (12.5 ms apart), a
        // round of slots per interval: held once it has grown for three intervals.
        feed(&mut delay, start, 40, 12500 * MS / 1000, 200 * MS, |step| 20 + step as usize);
        assert!(delay.holding(start + 500 * MS));
        assert_eq!(delay.overloads, 1);
    }

    #[test]
    fn a_draining_burst_and_a_closed_loop_are_not_held() {
        let start = Instant::now();
        let mut burst = delay();
        feed(&mut burst, start, 380, 12500 * MS / 1000, 1500 * MS, |step| 390 - step as usize);
        assert_eq!(burst.overloads, 0);
        let mut closed_loop = delay();
        // The queue as deep as the clients less the slots, less the answers on their way back.
        feed(&mut closed_loop, start, 400, 12500 * MS / 1000, 300 * MS, |step| 24 - (step as usize * 7) % SLOTS);
        assert_eq!(closed_loop.overloads, 0);
    }

    #[test]
    fn a_closed_loop_that_refills_after_a_stall_is_not_held() {
        let mut delay = delay();
        let start = Instant::now();
        // Found standing while a stall had left the queue at 30; then the clients catch up at
        // once, and the queue stays as deep as they are many, give or take a few.
        feed(&mut delay, start, 10, 12500 * MS / 1000, 200 * MS, |_| 30);
        feed(&mut delay, start + 125 * MS, 160, 12500 * MS / 1000, 200 * MS, |step| 54 - (step as usize * 5) % 7);
        assert_eq!(delay.overloads, 0);
    }

    #[test]
    fn a_short_wait_or_an_idle_slot_resets_the_evidence() {
        let mut delay = delay();
        let start = Instant::now();
        let every = 12500 * MS / 1000;
        // Growing, but one request in the middle started within the target: back to square one.
        feed(&mut delay, start, 12, every, 200 * MS, |step| 20 + step as usize);
        assert!(!delay.started(start + every * 12, 10 * MS, 32, SLOTS, SERVICE));
        feed(&mut delay, start + every * 13, 12, every, 200 * MS, |step| 33 + step as usize);
        assert_eq!(delay.overloads, 0);
        delay.drained(start + every * 25);
        feed(&mut delay, start + every * 25, 12, every, 200 * MS, |step| 45 + step as usize);
        assert_eq!(delay.overloads, 0);
    }

    #[test]
    fn an_overload_back_right_after_a_hold_is_held_twice_as_long_and_an_idle_interval_ends_it() {
        let mut delay = delay();
        let every = 12500 * MS / 1000;
        feed(&mut delay, Instant::now(), 40, every, 200 * MS, |step| 20 + step as usize);
        let (first_end, first_length) = delay.hold.expect("held");
        assert_eq!(first_length, 1000 * MS, "10 intervals");
        // While held, the queue is kept short and nothing counts; after it, it grows again at once.
        feed(&mut delay, first_end - first_length, 80, every, 200 * MS, |_| 4);
        assert!(!delay.holding(first_end));
        feed(&mut delay, first_end, 40, every, 200 * MS, |step| 4 + step as usize);
        assert_eq!(delay.overloads, 2);
        let (second_end, second_length) = delay.hold.expect("held again");
        assert_eq!(second_length, 2000 * MS);
        let idle = second_end - second_length / 2;
        delay.drained(idle);
        assert!(delay.holding(idle + 99 * MS), "a moment without work is not the end of it");
        assert!(!delay.holding(idle + 100 * MS), "an interval is");
        // The next overload is a new one, held for the base length again.
        feed(&mut delay, idle + 200 * MS, 40, every, 200 * MS, |step| 4 + step as usize);
        assert_eq!(delay.hold.expect("held once more").1, 1000 * MS);
    }

    #[test]
    fn switched_off_it_never_holds() {
        let mut delay = ControlledDelay::new(Target::Off, 100 * MS);
        feed(&mut delay, Instant::now(), 100, 12500 * MS / 1000, 1500 * MS, |step| step as usize);
        assert_eq!(delay.overloads, 0);
    }
}
