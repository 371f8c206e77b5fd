//! The queue itself ([`Queue`]): the waiting requests in their lanes and the idle slots under one
//! short mutex, with what it has counted and learned, and the rules that admit a request or
//! refuse it at the door ([`Refused`]), hand it to a slot, and shed it at or before its deadline
//! ([`keep_deadlines`]). The ends a request and a slot hold are in `wait`.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use hdrhistogram::Histogram;
use headway_common::stats::{QueueSnapshot, WaitPercentiles};
use tokio::sync::oneshot;
use tokio::time::{sleep_until, Instant};

use super::controlled_delay::ControlledDelay;
use super::job::{Client, Failure, Job, Outcome, RequestBody, Ticket};
use super::lanes::{LaneSettings, Lanes};
use super::routing::{LaneId, Routing};
use super::service::{expected_start, retry_after_secs, ServiceTime};
use super::settings::QueueSettings;
use crate::tally::Tally;

/// Why a request was refused at the door.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// The queue is at its length limit.
    Full,
    /// Its turn would come after the queue timeout, judging by the service time.
    WouldTimeOut,
    /// A sustained overload is held to the target wait, and as many as that allows already wait.
    StandingQueue,
}

impl Refused {
    pub(super) fn failure(self) -> Failure {
        match self {
            Refused::Full => Failure::QueueFull,
            Refused::WouldTimeOut => Failure::QueueTimeout,
            Refused::StandingQueue => Failure::StandingQueue,
        }
    }
}

/// Who reads the high-water mark and the recent waits. Each reader gets the maximum depth, and
/// the waits, since its own last read, so a Prometheus scrape does not hide a peak from
/// `headway stats`, nor either of them from the scaling of the workers.
#[derive(Debug, Clone, Copy)]
pub enum Reader {
    Json,
    Prometheus,
    Scaling,
}

const READERS: usize = 3;

/// What the queue saw since a reader's last read: for the scaling of the workers, and for an
/// autoscaler's scrape.
#[derive(Debug, Clone, Default)]
pub struct Recent {
    /// Requests a slot started.
    pub started: u64,
    /// Their waits for a slot: the median and the 99th percentile.
    pub wait_p50: Duration,
    pub wait_p99: Duration,
    /// How long the oldest request still waiting has waited.
    pub oldest_waiting: Duration,
    /// Requests waiting now.
    pub depth: usize,
    /// Requests refused with 503 since the queue began (at the door, or at their deadline).
    pub refused: u64,
    /// The mean service time, once measured, and controlled delay's target when it is on.
    pub mean_service: Option<Duration>,
    pub target: Option<Duration>,
}

pub struct Queue {
    max_len: usize,
    timeout: Duration,
    /// Slots of all workers together: how many requests finish in one service time. Set again
    /// once the workers have started and said how many slots their kind of app takes.
    slots: AtomicUsize,
    /// What places a request in its lane before the lock is taken.
    lanes: LaneSettings,
    /// Each lane's name, by its id (none when lanes are off).
    lane_names: Vec<Arc<str>>,
    state: Mutex<State>,
}

struct State {
    /// The waiting requests, in their lanes.
    waiting: Lanes,
    /// Slots with nothing to do, oldest first. Non-empty only while `waiting` is empty.
    idle: VecDeque<IdleSlot>,
    high_water: [usize; READERS],
    /// Time from entering the queue to being handed to a slot, in microseconds.
    waits: Histogram<u64>,
    /// The same, since each reader's last read.
    recent_waits: [Histogram<u64>; READERS],
    service: ServiceTime,
    delay: ControlledDelay,
    shed_full: u64,
    /// Not started by the deadline, or certain not to be.
    shed_timeout: u64,
    shed_at_arrival: u64,
    /// Refused while an overload was held: at the door, or cut from the back as the hold began.
    shed_standing_queue: u64,
    /// Requests whose client left while they waited: taken out, never run.
    withdrawn: u64,
    /// Requests whose client left while they ran.
    abandoned_running: u64,
}

struct IdleSlot {
    /// The busy slots of the slot's worker, to pick the least busy worker.
    worker_busy: Arc<Tally>,
    hand: oneshot::Sender<Box<Job>>,
}

impl Queue {
    /// Slots of all workers together.
    pub fn slots(&self) -> usize {
        self.slots.load(Ordering::Relaxed)
    }

    /// The workers' slots, once they have started.
    pub fn set_slots(&self, slots: usize) {
        self.slots.store(slots.max(1), Ordering::Relaxed);
    }

    /// A queue with controlled delay on and the other settings by default.
    pub fn new(max_len: usize, timeout: Duration, slots: usize) -> Arc<Self> {
        Queue::with_settings(QueueSettings::new(max_len, timeout), slots)
    }

    /// A queue, with the task that keeps its deadlines running on the current Tokio runtime
    /// until the queue is dropped.
    pub fn with_settings(settings: QueueSettings, slots: usize) -> Arc<Self> {
        let QueueSettings { max_len, timeout, target, interval, service_hint, lanes } = settings;
        let waits =
            Histogram::new_with_max(timeout.as_micros().max(1_000_000) as u64 * 2, 3).expect("valid histogram bounds");
        let waiting = Lanes::new(&lanes, timeout);
        let queue = Arc::new(Queue {
            max_len,
            timeout,
            slots: AtomicUsize::new(slots.max(1)),
            lane_names: waiting.names(),
            lanes,
            state: Mutex::new(State {
                waiting,
                idle: VecDeque::new(),
                high_water: [0; READERS],
                recent_waits: std::array::from_fn(|_| waits.clone()),
                waits,
                service: ServiceTime::new(service_hint),
                delay: ControlledDelay::new(target, interval),
                shed_full: 0,
                shed_timeout: 0,
                shed_at_arrival: 0,
                shed_standing_queue: 0,
                withdrawn: 0,
                abandoned_running: 0,
            }),
        });
        tokio::spawn(keep_deadlines(Arc::downgrade(&queue)));
        queue
    }

    /// Admits a request that is complete now (head and body read): places it in its lane, and
    /// hands it to an idle slot, queues it at the back, or refuses it at the door. Returns its
    /// ticket, its lane, where its outcome will come, and whether it was refused.
    pub(super) fn admit(
        &self,
        request: http::Request<RequestBody>,
        client: Option<Client>,
    ) -> (Ticket, LaneId, oneshot::Receiver<Outcome>, Result<(), Refused>) {
        let arrival = self.lanes.arrival(&request);
        let (mut job, outcome) = Job::new(request, client);
        let ticket = job.ticket;
        let mut state = self.lock();
        job.routing = state.waiting.place(arrival, &job.request);
        let lane = job.routing.lane;
        let admitted = self.push(&mut state, job);
        drop(state);
        (ticket, lane, outcome, admitted)
    }

    fn push(&self, state: &mut State, job: Box<Job>) -> Result<(), Refused> {
        // The job was made (`Job::new`) just before, for this push: its time is the queue's now,
        // without a clock read of its own.
        let now = job.complete_at;
        let routing = job.routing;
        let slots = self.slots();
        let job = if state.waiting.is_empty() {
            match state.hand_to_idle(job) {
                Ok(()) => {
                    state.started(now, routing, Duration::ZERO, slots);
                    return Ok(());
                }
                Err(job) => job,
            }
        } else {
            job
        };
        let waiting = state.waiting.len();
        if waiting >= self.max_len {
            state.shed_full += 1;
            return Err(Refused::Full);
        }
        let service = state.service.estimate(slots);
        if service.is_some_and(|service| expected_start(waiting, slots, service) > self.timeout) {
            state.shed_at_arrival += 1;
            return Err(Refused::WouldTimeOut);
        }
        if state.delay.holding(now) && waiting >= state.delay.room(slots, service) {
            state.shed_standing_queue += 1;
            return Err(Refused::StandingQueue);
        }
        state.waiting.push_back(job);
        let depth = state.waiting.len();
        for mark in state.high_water.iter_mut() {
            *mark = (*mark).max(depth);
        }
        Ok(())
    }

    /// Learns from a finished request how long service takes: requests in general, and those of
    /// its route and lane.
    pub fn record_service(&self, routing: Routing, took: Duration) {
        let mut state = self.lock();
        state.service.record(took);
        state.waiting.finished(routing, took);
    }

    /// `Retry-After` for a request refused now: how long one joining the queue now would likely
    /// wait for a slot, in whole seconds, at least 1 and at most the queue timeout.
    pub fn retry_after_secs(&self) -> u32 {
        let state = self.lock();
        let slots = self.slots();
        retry_after_secs(state.waiting.len(), slots, state.service.estimate(slots), self.timeout)
    }

    /// The name of lane `lane`; `None` with lanes off.
    pub(super) fn lane_name(&self, lane: LaneId) -> Option<Arc<str>> {
        self.lane_names.get(lane.index()).cloned()
    }

    /// Takes a request whose client left out of the queue if it has not started; if it has, it
    /// counts as abandoned while running.
    pub(super) fn withdraw(&self, ticket: Ticket) {
        let mut state = self.lock();
        match state.waiting.remove(ticket) {
            Some(_) => state.withdrawn += 1,
            None => state.abandoned_running += 1,
        }
    }

    /// Answers 503 to the waiting requests whose deadline has come, and returns when the next
    /// one's will: the oldest's, or a whole timeout from now if none waits (a request that
    /// arrives later has a later deadline).
    fn shed_expired(&self, now: Instant) -> Instant {
        let mut state = self.lock();
        while let Some(oldest) = state.waiting.oldest() {
            let deadline = oldest.complete_at + self.timeout;
            if deadline > now {
                return deadline;
            }
            if let Some(job) = state.waiting.pop_oldest() {
                state.shed_timeout += 1;
                job.answer(Outcome::Failed(Failure::QueueTimeout));
            }
        }
        now + self.timeout
    }

    /// Called by a free slot: the next waiting request by the lanes' rule, or, if none can
    /// start, where the next one to arrive will be handed.
    /// `worker_busy` holds the busy slots of the slot's worker; the queue counts the job in it
    /// when handing it over, and the slot takes it out when the job is done.
    pub(super) fn take_or_wait(&self, worker_busy: &Arc<Tally>) -> Result<Box<Job>, oneshot::Receiver<Box<Job>>> {
        let mut state = self.lock();
        if let Some(job) = state.pop_startable(self.timeout, self.slots()) {
            worker_busy.up();
            return Ok(job);
        }
        state.delay.drained(Instant::now());
        let (hand, receive) = oneshot::channel();
        // Slots that stopped waiting leave closed entries behind; clear them here so the list
        // stays as long as the number of slots.
        state.idle.retain(|slot| !slot.hand.is_closed());
        state.idle.push_back(IdleSlot { worker_busy: worker_busy.clone(), hand });
        Err(receive)
    }

    /// Puts back a job a slot received but cannot run (its worker connection broke before it
    /// was sent). It was the first of its lane when it was handed out, so it goes to the front.
    pub fn give_back(&self, job: Box<Job>, worker_busy: &Tally) {
        worker_busy.down();
        let mut state = self.lock();
        if let Err(job) = state.hand_to_idle(job) {
            state.waiting.give_back(job);
        }
    }

    pub fn snapshot(&self, reader: Reader) -> QueueSnapshot {
        let mut state = self.lock();
        let depth = state.waiting.len();
        let high_water = std::mem::replace(&mut state.high_water[reader as usize], depth);
        let ms = |micros: u64| micros as f64 / 1000.0;
        let waits = &state.waits;
        let slots = self.slots();
        let target = state.delay.target(state.service.estimate(slots));
        let rule = state.waiting.rule(slots);
        let lanes = state.waiting.snapshot();
        let lanes_on = !lanes.is_empty();
        QueueSnapshot {
            depth,
            high_water: high_water.max(depth),
            max_len: self.max_len,
            timeout_secs: self.timeout.as_secs_f64(),
            dispatched: waits.len(),
            wait_ms: WaitPercentiles {
                p50: ms(waits.value_at_quantile(0.5)),
                p90: ms(waits.value_at_quantile(0.9)),
                p99: ms(waits.value_at_quantile(0.99)),
                p999: ms(waits.value_at_quantile(0.999)),
                max: ms(waits.max()),
                mean: waits.mean() / 1000.0,
            },
            shed_queue_full: state.shed_full,
            shed_queue_timeout: state.shed_timeout,
            shed_at_arrival: state.shed_at_arrival,
            shed_standing_queue: state.shed_standing_queue,
            withdrawn: state.withdrawn,
            mean_service_ms: state.service.mean_ms(),
            target_ms: target.map_or(0.0, |target| target.as_secs_f64() * 1000.0),
            interval_ms: state.delay.interval().as_secs_f64() * 1000.0,
            overloaded: state.delay.holding(Instant::now()),
            overloads: state.delay.overloads,
            lane_passed_over_ms: if lanes_on { rule.passed_over.as_secs_f64() * 1000.0 } else { 0.0 },
            lane_slow_slots: if lanes_on { rule.slow_slots } else { 0 },
            lanes,
        }
    }

    /// What the queue saw since `reader`'s last call; starts the next period for it.
    pub fn recent(&self, reader: Reader) -> Recent {
        let mut state = self.lock();
        let now = Instant::now();
        let slots = self.slots();
        let service = state.service.estimate(slots);
        let target = state.delay.target(service);
        let oldest_waiting =
            state.waiting.oldest().map_or(Duration::ZERO, |job| now.saturating_duration_since(job.complete_at));
        let refused = state.shed_full + state.shed_timeout + state.shed_at_arrival + state.shed_standing_queue;
        let depth = state.waiting.len();
        let mean_service = (state.service.mean_ms() > 0.0).then_some(service).flatten();
        let waits = &mut state.recent_waits[reader as usize];
        let quantile = |quantile| Duration::from_micros(waits.value_at_quantile(quantile));
        let recent = Recent {
            started: waits.len(),
            wait_p50: quantile(0.5),
            wait_p99: quantile(0.99),
            oldest_waiting,
            depth,
            refused,
            mean_service,
            target,
        };
        waits.reset();
        recent
    }

    /// Requests waiting now (without touching any reader's high-water mark).
    pub fn depth(&self) -> usize {
        self.lock().waiting.len()
    }

    /// Requests whose client left while they ran (their answer was thrown away).
    pub fn abandoned_running(&self) -> u64 {
        self.lock().abandoned_running
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // The state stays consistent across a panic in another holder (every update is a
        // single push/pop), so a poisoned lock is still safe to use.
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl State {
    /// Hands `job` to the idle slot of the least busy worker, longest idle first among equals.
    /// Gives the job back when no slot is idle.
    fn hand_to_idle(&mut self, mut job: Box<Job>) -> Result<(), Box<Job>> {
        loop {
            let best = self
                .idle
                .iter()
                .enumerate()
                .min_by_key(|(index, slot)| (slot.worker_busy.get(), *index))
                .map(|(index, _)| index);
            let Some(slot) = best.and_then(|index| self.idle.remove(index)) else {
                return Err(job);
            };
            slot.worker_busy.up();
            match slot.hand.send(job) {
                Ok(()) => return Ok(()),
                Err(returned) => {
                    // The slot stopped waiting; try the next one.
                    slot.worker_busy.down();
                    job = returned;
                }
            }
        }
    }

    /// The next request by the lanes' rule that can still start. Requests past their deadline
    /// are answered with 503 here, so none starts late even if its connection has not noticed.
    fn pop_startable(&mut self, timeout: Duration, slots: usize) -> Option<Box<Job>> {
        let now = Instant::now();
        while let Some(job) = self.waiting.pop_next(now, slots) {
            let waited = now.saturating_duration_since(job.complete_at);
            if job.reply.is_closed() {
                self.withdrawn += 1;
            } else if waited > timeout {
                self.shed_timeout += 1;
                job.answer(Outcome::Failed(Failure::QueueTimeout));
            } else {
                self.started(now, job.routing, waited, slots);
                self.shed_hopeless(now, timeout, slots);
                return Some(job);
            }
        }
        None
    }

    /// A slot starts a request of `routing` that waited `waited`. If that shows a sustained
    /// overload, the requests that arrived while it was being recognised, beyond those the slots
    /// start within the target, are refused now, newest first: the door would have refused them
    /// had it known, and the newest have waited least.
    fn started(&mut self, now: Instant, routing: Routing, waited: Duration, slots: usize) {
        let micros = waited.as_micros() as u64;
        self.waits.saturating_record(micros);
        for recent in &mut self.recent_waits {
            recent.saturating_record(micros);
        }
        self.waiting.started(routing, waited);
        let service = self.service.estimate(slots);
        if !self.delay.started(now, waited, self.waiting.len(), slots, service) {
            return;
        }
        let room = self.delay.room(slots, service);
        while self.waiting.len() > room {
            let Some(job) = self.waiting.pop_newest() else { break };
            self.shed_standing_queue += 1;
            job.answer(Outcome::Failed(Failure::StandingQueue));
        }
    }

    /// Answers 503 now, not at their deadline, the newest requests that cannot start by it even
    /// if the other slots all freed up this instant and every later round took no longer than
    /// the service time. They are at the back when the queue grew faster than it drains (a burst
    /// into a server that did not know its service time yet), so looking there costs nothing the
    /// rest of the time. Called as a slot starts a request, which is when the evidence changes.
    fn shed_hopeless(&mut self, now: Instant, timeout: Duration, slots: usize) {
        let Some(service) = self.service.estimate(slots) else { return };
        while let Some(newest) = self.waiting.newest() {
            // The slot that just started a request frees up last: only the requests beyond
            // the other slots' worth wait a round for it, and so on.
            let rounds_ahead = u32::try_from(self.waiting.len() / slots).unwrap_or(u32::MAX);
            let earliest_start = now.checked_add(service.saturating_mul(rounds_ahead));
            if earliest_start.is_some_and(|start| start <= newest.complete_at + timeout) {
                return;
            }
            if let Some(job) = self.waiting.pop_newest() {
                self.shed_timeout += 1;
                job.answer(Outcome::Failed(Failure::QueueTimeout));
            }
        }
    }
}

/// Sheds requests at their deadline, for as long as the queue exists. Requests join at the
/// back in the order they became complete, so the oldest one's deadline is the next to come.
async fn keep_deadlines(queue: Weak<Queue>) {
    let mut next = Instant::now();
    loop {
        sleep_until(next).await;
        let Some(queue) = queue.upgrade() else { return };
        next = queue.shed_expired(Instant::now());
    }
}
