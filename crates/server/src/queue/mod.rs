//! The one queue: where a request waits, and the only place it waits.
//!
//! Every complete request of every client connection enters here in the order it became
//! complete, and every slot of every worker takes from here, oldest first among alike requests.
//! There is no other queue behind it: a slot runs one request at a time, so a request is either
//! waiting here or running. This is what removes the keep-alive and wrong-worker tails of
//! per-worker queues. When a few routes take far longer than the rest, the lanes ([`lanes`]) let
//! fast requests start before slow ones that arrived earlier, within bounds; each kind keeps its
//! arrival order.
//!
//! A request's whole wait is one object, [`Wait`], which its connection holds: everything that
//! can end a wait is decided in this file.
//! - Refused at the door, 503 at once: the queue is at its length limit; or, by the service time
//!   (see [`service`]), its turn would come only after the queue timeout; or the queue is holding
//!   a sustained overload to its target wait and enough requests already wait (below). Under
//!   overload a client learns it in microseconds, not after waiting out the deadline.
//! - The deadline: a request not started within the queue timeout gets 503, rather than being
//!   left to a router's timeout. A slot never starts an expired request, and once the service
//!   time shows that the newest requests cannot start by their deadline, they get their 503 then.
//!   One task of the queue's own keeps the deadlines ([`keep_deadlines`]), not a timer per
//!   request: the requests wait in the order of their deadlines, so only the oldest one's needs
//!   watching, and setting and clearing a timer for every request was a measurable part of the
//!   front's time a request.
//! - The client leaves: dropping the [`Wait`] withdraws the request, which then never runs.
//! - A slot starts it: from then on the wait is for the worker's answer.
//!
//! Controlled delay. Under sustained overload a queue with only a deadline stays full to the
//! deadline: every request it serves has waited the whole timeout, and it serves no more than a
//! short queue would. So when the queue is standing (every request started for an interval had
//! waited longer than the target, as in CoDel) and keeps growing (three intervals in a row, by
//! more than a round of slots in all), it holds itself to the target for ten intervals: it may hold as many waiting requests as the
//! slots start within the target. Those beyond that, which arrived while the overload was being
//! recognised, get their 503 then, newest first; newcomers beyond it get theirs at the door. At
//! least one request always may wait, so the slots stay busy and the server serves its full
//! capacity; each served request waits about the target; the excess is refused at once. An
//! overload back as soon as a hold ends is held twice as long (up to eight times); slots with
//! nothing to do for an interval end the hold. A burst into an idle server drains and a closed
//! loop of N clients stays N deep, so neither grows a standing queue: both are absorbed up to the
//! deadline as before (see [`controlled_delay`]). The queue timeout stays the hard bound for
//! everyone.
//!
//! Why refuse at the door, and why stay first-in-first-out:
//! - Arrival drop, not head drop (CoDel in routers drops the oldest packet): an HTTP client or a
//!   load balancer learns of a refusal only from the 503 itself, so the most useful one comes at
//!   once, before the client has spent any of its own timeout, and a balancer that retries
//!   elsewhere (nginx's `proxy_next_upstream`, HAProxy's `redispatch`) keeps its whole budget for
//!   it. A head drop answers 503 to the request that has already waited longest, after its wait,
//!   and makes the one behind it, about to start, wait longer. When a hold begins, the backlog
//!   of the last interval or so is cut from the back for the same reason: those are the requests
//!   the door would have refused had it known, and they have waited least.
//! - Refused outright, not dropped gently (CoDel's one drop, then more at interval/sqrt(count)):
//!   that pace is tuned for TCP senders that halve their rate after a drop; clients arriving at
//!   their own pace do not slow down for a 503, and a gentle queue would grow meanwhile.
//! - FIFO, not adaptive LIFO (Facebook's answer: newest first under load): with the door keeping
//!   the queue at the target, LIFO would shorten no served wait; it would let a client that
//!   retries at once overtake one waiting its turn (rewarding retry storms), leave the oldest
//!   requests to wait out the whole deadline for their 503, and undo the arrival order that
//!   keep-alive and pipelined connections rely on for their fair share.
//!
//! Dispatch: when a request arrives and slots are idle, it goes straight to the idle slot of
//! the least busy worker (spreading work across processes is what a GIL-bound or
//! single-threaded worker needs); when a slot becomes free and requests wait, it takes the one
//! the lanes' rule picks (the oldest, when all are alike). Both happen under one short mutex.

mod controlled_delay;
pub mod job;
mod lanes;
#[cfg(test)]
mod lanes_simulation;
mod routes;
mod routing;
mod service;
#[cfg(test)]
mod simulation;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use hdrhistogram::Histogram;
use headway_common::stats::{QueueSnapshot, WaitPercentiles};
use tokio::sync::oneshot;
use tokio::time::{sleep_until, Instant};

use crate::tally::Tally;
use controlled_delay::ControlledDelay;
use job::{Failure, Job, Outcome, RequestBody, Ticket};
use lanes::Lanes;
use routing::LaneId;
use service::{expected_start, retry_after_secs, ServiceTime};

pub use controlled_delay::Target;
pub use lanes::{LanePattern, LaneSettings, MAX_DECLARED};
pub use routing::Routing;

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
    fn failure(self) -> Failure {
        match self {
            Refused::Full => Failure::QueueFull,
            Refused::WouldTimeOut => Failure::QueueTimeout,
            Refused::StandingQueue => Failure::StandingQueue,
        }
    }
}

/// The controlled delay's interval when none is given: CoDel's, and long enough for a burst to
/// show whether it drains.
pub const DEFAULT_INTERVAL: Duration = Duration::from_millis(100);

/// How the queue is run: `headway serve`'s queue flags.
#[derive(Debug, Clone)]
pub struct QueueSettings {
    /// Longest queue (`--max-queue`).
    pub max_len: usize,
    /// Longest wait (`--queue-timeout`).
    pub timeout: Duration,
    /// Controlled delay (`--queue-target`, `--queue-interval`).
    pub target: Target,
    pub interval: Duration,
    /// The service time to go by until requests have been measured (`--service-time-hint`).
    pub service_hint: Option<Duration>,
    /// `--no-lanes`, `--lane`.
    pub lanes: LaneSettings,
}

impl QueueSettings {
    /// A length limit and a deadline, with controlled delay and lanes on and the rest by default.
    pub fn new(max_len: usize, timeout: Duration) -> Self {
        QueueSettings {
            max_len,
            timeout,
            target: Target::Auto,
            interval: DEFAULT_INTERVAL,
            service_hint: None,
            lanes: LaneSettings::default(),
        }
    }
}

/// Who reads the high-water mark. Each reader gets the maximum depth since its own last read,
/// so a Prometheus scrape does not hide a peak from `headway stats`.
#[derive(Debug, Clone, Copy)]
pub enum Reader {
    Json,
    Prometheus,
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
    high_water: [usize; 2],
    /// Time from entering the queue to being handed to a slot, in microseconds.
    waits: Histogram<u64>,
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
    hand: oneshot::Sender<Job>,
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
                high_water: [0; 2],
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

    /// Admits a request that is complete now (head and body read) and returns its wait: handed
    /// to an idle slot, queued at the back, or refused at the door.
    pub fn enqueue(self: &Arc<Self>, request: http::Request<RequestBody>) -> Wait {
        let arrival = self.lanes.arrival(&request);
        let (mut job, outcome) = Job::new(request);
        let ticket = job.ticket;
        let mut state = self.lock();
        job.routing = state.waiting.place(arrival, &job.request);
        let lane = job.routing.lane;
        let stage = match self.push(&mut state, job) {
            Ok(()) => Stage::Queued,
            Err(refused) => Stage::Refused(refused),
        };
        drop(state);
        Wait { queue: self.clone(), ticket, lane, outcome, stage }
    }

    fn push(&self, state: &mut State, job: Job) -> Result<(), Refused> {
        let now = Instant::now();
        let waited = now.saturating_duration_since(job.complete_at);
        let routing = job.routing;
        let slots = self.slots();
        let job = if state.waiting.is_empty() {
            match state.hand_to_idle(job) {
                Ok(()) => {
                    state.started(now, routing, waited, slots);
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
        let time_left = self.timeout.saturating_sub(waited);
        if service.is_some_and(|service| expected_start(waiting, slots, service) > time_left) {
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

    /// Takes a request whose client left out of the queue if it has not started; if it has, it
    /// counts as abandoned while running.
    fn withdraw(&self, ticket: Ticket) {
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

    /// Called by a free slot: returns the next waiting request by the lanes' rule, or waits for
    /// the next one to arrive.
    /// `worker_busy` holds the busy slots of the slot's worker; the queue counts the job in it
    /// when handing it over, and the slot takes it out when the job is done.
    pub fn next_job(self: &Arc<Self>, worker_busy: &Arc<Tally>) -> NextJob {
        let mut state = self.lock();
        if let Some(job) = state.pop_startable(self.timeout, self.slots()) {
            worker_busy.up();
            return NextJob { queue: self.clone(), ready: Some(job), waiting: None };
        }
        state.delay.drained(Instant::now());
        let (hand, receive) = oneshot::channel();
        // Slots that stopped waiting leave closed entries behind; clear them here so the list
        // stays as long as the number of slots.
        state.idle.retain(|slot| !slot.hand.is_closed());
        state.idle.push_back(IdleSlot { worker_busy: worker_busy.clone(), hand });
        NextJob { queue: self.clone(), ready: None, waiting: Some(receive) }
    }

    /// Puts back a job a slot received but cannot run (its worker connection broke before it
    /// was sent). It was the first of its lane when it was handed out, so it goes to the front.
    pub fn give_back(&self, job: Job, worker_busy: &Tally) {
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
    /// Gives the job back when no slot is idle (moved, not boxed: this is the request path).
    #[allow(clippy::result_large_err)]
    fn hand_to_idle(&mut self, mut job: Job) -> Result<(), Job> {
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
    fn pop_startable(&mut self, timeout: Duration, slots: usize) -> Option<Job> {
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
        self.waits.saturating_record(waited.as_micros() as u64);
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

/// One request's wait, from the moment it is complete to its outcome. Its connection holds it
/// while it also watches the client; dropping it before the outcome means the client left, and
/// withdraws the request if it has not started.
pub struct Wait {
    queue: Arc<Queue>,
    ticket: Ticket,
    lane: LaneId,
    outcome: oneshot::Receiver<Outcome>,
    stage: Stage,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    Refused(Refused),
    /// In the queue, or already started by a slot; the queue answers it 503 at its deadline
    /// if no slot has started it.
    Queued,
    /// The outcome was delivered.
    Over,
}

impl Wait {
    /// The name of the lane the request took (its access log line says it); `None` with lanes
    /// off.
    pub fn lane(&self) -> Option<Arc<str>> {
        self.queue.lane_names.get(self.lane.index()).cloned()
    }

    /// The outcome: the worker's response, a worker failure (502, 504), or 503 when refused at
    /// the door or not started by the deadline. Cancel-safe: the connection calls it again
    /// after reading ahead on the client connection.
    pub async fn outcome(&mut self) -> Outcome {
        match self.stage {
            Stage::Refused(refused) => self.deliver(Ok(Outcome::Failed(refused.failure()))),
            Stage::Queued => {
                let result = (&mut self.outcome).await;
                self.deliver(result)
            }
            Stage::Over => std::future::pending().await,
        }
    }

    fn deliver(&mut self, result: Result<Outcome, oneshot::error::RecvError>) -> Outcome {
        self.stage = Stage::Over;
        // A reply dropped unanswered means the job was lost with its slot: a worker failure.
        result.unwrap_or(Outcome::Failed(Failure::WorkerFailed))
    }
}

impl Drop for Wait {
    fn drop(&mut self) {
        if self.stage == Stage::Queued {
            self.queue.withdraw(self.ticket);
        }
    }
}

/// A free slot's wait for its next job.
pub struct NextJob {
    queue: Arc<Queue>,
    ready: Option<Job>,
    waiting: Option<oneshot::Receiver<Job>>,
}

impl NextJob {
    /// Waits for the job. Cancel-safe only through [`NextJob::cancel`].
    pub async fn recv(&mut self) -> Job {
        if let Some(job) = self.ready.take() {
            return job;
        }
        match self.waiting.as_mut() {
            Some(receive) => match receive.await {
                Ok(job) => {
                    self.waiting = None;
                    job
                }
                // The queue never drops a waiting slot's sender without sending: only
                // `hand_to_idle` removes it, and it sends. Waiting forever is the honest
                // answer if that ever changes.
                Err(_) => std::future::pending().await,
            },
            None => std::future::pending().await,
        }
    }

    /// Stops waiting. A job that was handed over in the meantime is returned to the queue
    /// rather than lost.
    pub fn cancel(mut self, worker_busy: &Tally) {
        let job = self.ready.take().or_else(|| {
            let mut receive = self.waiting.take()?;
            receive.close();
            receive.try_recv().ok()
        });
        if let Some(job) = job {
            self.queue.give_back(job, worker_busy);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn request(path: &str) -> http::Request<RequestBody> {
        http::Request::builder().uri(path).body(RequestBody::Memory(Bytes::new())).unwrap()
    }

    fn path(job: &Job) -> &str {
        job.request.uri().path()
    }

    fn queue(max_len: usize, timeout: Duration, slots: usize) -> Arc<Queue> {
        Queue::new(max_len, timeout, slots)
    }

    #[tokio::test]
    async fn waiting_jobs_are_served_oldest_first() {
        let queue = queue(10, Duration::from_secs(10), 1);
        let busy = Arc::new(Tally::default());
        let waits: Vec<Wait> = ["/a", "/b", "/c"].into_iter().map(|name| queue.enqueue(request(name))).collect();
        for expected in ["/a", "/b", "/c"] {
            assert_eq!(path(&queue.next_job(&busy).recv().await), expected);
        }
        assert_eq!(busy.get(), 3);
        assert_eq!(queue.snapshot(Reader::Json).high_water, 3);
        assert_eq!(queue.snapshot(Reader::Json).high_water, 0, "reset by the read");
        assert_eq!(queue.snapshot(Reader::Prometheus).high_water, 3, "each reader has its own");
        drop(waits);
    }

    #[tokio::test]
    async fn arriving_job_goes_to_least_busy_worker() {
        let queue = queue(10, Duration::from_secs(10), 1);
        let worker_a = Arc::new(Tally::default());
        worker_a.up();
        worker_a.up();
        let worker_b = Arc::new(Tally::default());
        let mut waits_a = queue.next_job(&worker_a);
        let mut waits_b = queue.next_job(&worker_b);
        let _first = queue.enqueue(request("/1"));
        assert_eq!(path(&waits_b.recv().await), "/1");
        assert_eq!(worker_b.get(), 1);
        let _second = queue.enqueue(request("/2"));
        assert_eq!(path(&waits_a.recv().await), "/2");
        assert_eq!(queue.snapshot(Reader::Json).depth, 0);
    }

    #[tokio::test]
    async fn a_request_that_would_start_too_late_is_refused_on_arrival() {
        let queue = queue(100, Duration::from_millis(350), 1);
        // Until the service time is known, nobody is refused for it.
        let early: Vec<Wait> = (0..5).map(|n| queue.enqueue(request(&format!("/early{n}")))).collect();
        assert!(early.iter().all(|wait| wait.stage == Stage::Queued));
        for _ in 0..service::SAMPLES_FOR_MEAN {
            queue.record_service(Routing::default(), Duration::from_millis(100));
        }
        // 5 are waiting on 1 slot at 100 ms each: the next would start after 600 ms.
        let mut late = queue.enqueue(request("/late"));
        assert_eq!(late.stage, Stage::Refused(Refused::WouldTimeOut));
        assert!(matches!(late.outcome().await, Outcome::Failed(Failure::QueueTimeout)));
        let snapshot = queue.snapshot(Reader::Json);
        assert_eq!((snapshot.shed_at_arrival, snapshot.depth), (1, 5));
        assert!((snapshot.mean_service_ms - 100.0).abs() < 1e-6);
    }

    #[tokio::test]
    async fn more_slots_let_more_requests_wait() {
        let queue = queue(100, Duration::from_millis(370), 4);
        for _ in 0..service::SAMPLES_FOR_MEAN {
            queue.record_service(Routing::default(), Duration::from_millis(100));
        }
        // With 4 slots at 100 ms, the 12th in line gets a slot within 3 rounds, 300 ms: in time.
        let admitted: Vec<Wait> = (1..=12).map(|n| queue.enqueue(request(&format!("/{n}")))).collect();
        assert!(admitted.iter().all(|wait| wait.stage == Stage::Queued));
        // The 13th may need a 4th round: 400 ms, past the 370 ms timeout.
        assert_eq!(queue.enqueue(request("/13")).stage, Stage::Refused(Refused::WouldTimeOut));
    }

    #[tokio::test]
    async fn full_queue_refuses() {
        let queue = queue(1, Duration::from_secs(10), 1);
        let _a = queue.enqueue(request("/a"));
        let mut b = queue.enqueue(request("/b"));
        assert!(matches!(b.outcome().await, Outcome::Failed(Failure::QueueFull)));
        assert_eq!(queue.snapshot(Reader::Json).shed_queue_full, 1);
    }

    #[tokio::test]
    async fn a_dropped_wait_withdraws_its_request() {
        let queue = queue(10, Duration::from_secs(10), 1);
        let busy = Arc::new(Tally::default());
        let a = queue.enqueue(request("/a"));
        let _b = queue.enqueue(request("/b"));
        drop(a); // the client of /a went away
        assert_eq!(queue.snapshot(Reader::Json).depth, 1);
        assert_eq!(path(&queue.next_job(&busy).recv().await), "/b");
        assert_eq!(queue.snapshot(Reader::Json).withdrawn, 1);
        assert_eq!(queue.abandoned_running(), 0);
    }

    #[tokio::test]
    async fn a_client_leaving_a_running_request_is_counted_apart() {
        let queue = queue(10, Duration::from_secs(10), 1);
        let busy = Arc::new(Tally::default());
        let wait = queue.enqueue(request("/a"));
        let _running = queue.next_job(&busy).recv().await;
        drop(wait);
        assert_eq!((queue.snapshot(Reader::Json).withdrawn, queue.abandoned_running()), (0, 1));
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_not_started_by_its_deadline_gets_503() {
        let queue = queue(10, Duration::from_secs(2), 1);
        let mut wait = queue.enqueue(request("/a"));
        let started = Instant::now();
        assert!(matches!(wait.outcome().await, Outcome::Failed(Failure::QueueTimeout)));
        assert_eq!(started.elapsed(), Duration::from_secs(2));
        let snapshot = queue.snapshot(Reader::Json);
        assert_eq!((snapshot.shed_queue_timeout, snapshot.depth, snapshot.withdrawn), (1, 0, 0));
    }

    #[tokio::test(start_paused = true)]
    async fn each_waiting_request_is_shed_at_its_own_deadline_oldest_first() {
        let queue = queue(10, Duration::from_secs(2), 1);
        let started = Instant::now();
        let mut a = queue.enqueue(request("/a"));
        tokio::time::sleep(Duration::from_secs(1)).await;
        let mut b = queue.enqueue(request("/b"));
        assert!(matches!(a.outcome().await, Outcome::Failed(Failure::QueueTimeout)));
        assert_eq!(started.elapsed(), Duration::from_secs(2));
        assert_eq!(queue.depth(), 1, "/b has a second left");
        assert!(matches!(b.outcome().await, Outcome::Failed(Failure::QueueTimeout)));
        assert_eq!(started.elapsed(), Duration::from_secs(3));
        // A request that arrives into an empty queue long after is still shed on time.
        tokio::time::sleep(Duration::from_secs(10)).await;
        let arrived = Instant::now();
        let mut c = queue.enqueue(request("/c"));
        assert!(matches!(c.outcome().await, Outcome::Failed(Failure::QueueTimeout)));
        assert_eq!(arrived.elapsed(), Duration::from_secs(2));
        assert_eq!(queue.snapshot(Reader::Json).shed_queue_timeout, 3);
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_started_in_time_outlives_its_deadline() {
        let queue = queue(10, Duration::from_secs(2), 1);
        let busy = Arc::new(Tally::default());
        let mut wait = queue.enqueue(request("/a"));
        let job = queue.next_job(&busy).recv().await;
        tokio::time::sleep(Duration::from_secs(5)).await;
        job.answer(Outcome::Failed(Failure::WorkerTimeout));
        assert!(matches!(wait.outcome().await, Outcome::Failed(Failure::WorkerTimeout)));
        assert_eq!(queue.snapshot(Reader::Json).shed_queue_timeout, 0);
    }

    #[tokio::test(start_paused = true)]
    async fn expired_jobs_are_answered_503_not_started() {
        let queue = queue(10, Duration::from_millis(1), 1);
        let busy = Arc::new(Tally::default());
        let mut a = queue.enqueue(request("/a"));
        tokio::time::advance(Duration::from_millis(5)).await;
        let _b = queue.enqueue(request("/b"));
        let mut next = queue.next_job(&busy);
        // /a expired: the slot answers it 503 and skips it; /b was only just queued.
        assert_eq!(path(&next.recv().await), "/b");
        assert!(matches!(a.outcome().await, Outcome::Failed(Failure::QueueTimeout)));
    }

    #[tokio::test]
    async fn a_lost_job_is_a_worker_failure() {
        let queue = queue(10, Duration::from_secs(10), 1);
        let busy = Arc::new(Tally::default());
        let mut wait = queue.enqueue(request("/a"));
        drop(queue.next_job(&busy).recv().await); // the slot died with the job
        assert!(matches!(wait.outcome().await, Outcome::Failed(Failure::WorkerFailed)));
    }

    #[tokio::test]
    async fn cancelled_wait_gives_a_handed_job_back() {
        let queue = queue(10, Duration::from_secs(10), 1);
        let busy = Arc::new(Tally::default());
        let next = queue.next_job(&busy);
        let _a = queue.enqueue(request("/a")); // handed straight to the idle slot
        assert_eq!(busy.get(), 1);
        next.cancel(&busy);
        assert_eq!(busy.get(), 0);
        assert_eq!(queue.snapshot(Reader::Json).depth, 1);
        assert_eq!(path(&queue.next_job(&busy).recv().await), "/a");
    }

    #[tokio::test(start_paused = true)]
    async fn a_service_time_hint_answers_a_fresh_servers_first_burst_on_arrival() {
        let hinted = |hint| {
            let settings =
                QueueSettings { service_hint: Some(hint), ..QueueSettings::new(100, Duration::from_millis(350)) };
            Queue::with_settings(settings, 1)
        };
        let queue = hinted(Duration::from_millis(100));
        let busy = Arc::new(Tally::default());
        let _slot = queue.next_job(&busy);
        let waits: Vec<Wait> = (0..8).map(|n| queue.enqueue(request(&format!("/{n}")))).collect();
        // One runs at once, three start within 350 ms (after 100, 200, 300 ms), four cannot.
        let refused = waits.iter().filter(|wait| wait.stage == Stage::Refused(Refused::WouldTimeOut)).count();
        assert_eq!(refused, 4);
        assert_eq!(queue.snapshot(Reader::Json).shed_at_arrival, 4);

        // A hint far off is overruled by the first requests measured: with one slot, two.
        let queue = hinted(Duration::from_secs(1));
        queue.record_service(Routing::default(), Duration::from_millis(10));
        queue.record_service(Routing::default(), Duration::from_millis(12));
        let waits: Vec<Wait> = (0..8).map(|n| queue.enqueue(request(&format!("/{n}")))).collect();
        assert!(waits.iter().all(|wait| wait.stage == Stage::Queued));
    }

    #[tokio::test]
    async fn retry_after_follows_the_queue() {
        let queue = queue(100, Duration::from_secs(10), 1);
        assert_eq!(queue.retry_after_secs(), 1, "the service time is not known yet");
        for _ in 0..service::SAMPLES_FOR_MEAN {
            queue.record_service(Routing::default(), Duration::from_millis(100));
        }
        let _waits: Vec<Wait> = (0..25).map(|n| queue.enqueue(request(&format!("/{n}")))).collect();
        // A newcomer would start after 26 rounds of 100 ms.
        assert_eq!(queue.retry_after_secs(), 3);
    }
}
