//! The one queue: where a request waits, and the only place it waits.
//!
//! Every complete request of every client connection enters here in the order it became
//! complete, and every slot of every worker takes from here, oldest first. There is no other
//! queue behind it: a slot runs one request at a time, so a request is either waiting here or
//! running. This is what removes the keep-alive and wrong-worker tails of per-worker queues.
//!
//! A request's whole wait is one object, [`Wait`], which its connection holds: everything that
//! can end a wait is decided in this file.
//! - Refused at the door: the queue is at its length limit, or, from the mean service time of
//!   recent requests, its turn would come only after the queue timeout (so under overload a
//!   client learns it in microseconds, not after waiting out the deadline). 503 at once.
//! - The deadline: a request not started within the queue timeout is withdrawn and gets 503,
//!   rather than being left to a router's timeout. A slot never starts an expired request.
//! - The client leaves: dropping the [`Wait`] withdraws the request, which then never runs.
//! - A slot starts it: from then on the wait is for the worker's answer.
//!
//! Dispatch: when a request arrives and slots are idle, it goes straight to the idle slot of
//! the least busy worker (spreading work across processes is what a GIL-bound or
//! single-threaded worker needs); when a slot becomes free and requests wait, it takes the
//! oldest. Both happen under one short mutex.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use hdrhistogram::Histogram;
use headway_common::stats::{QueueSnapshot, WaitPercentiles};
use tokio::sync::oneshot;
use tokio::time::{sleep_until, Instant};

use crate::job::{Failure, Job, Outcome, RequestBody, Ticket};
use crate::tally::Tally;

/// Why a request was refused at the door.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// The queue is at its length limit.
    Full,
    /// Its turn would come after the queue timeout, judging by recent service times.
    WouldTimeOut,
}

impl Refused {
    fn failure(self) -> Failure {
        match self {
            Refused::Full => Failure::QueueFull,
            Refused::WouldTimeOut => Failure::QueueTimeout,
        }
    }
}

/// Finished requests needed before the mean service time is trusted to refuse anyone.
const SERVICE_SAMPLES_NEEDED: u64 = 20;
/// Weight of the newest service time in the moving mean: about the last 20 requests count.
const SERVICE_WEIGHT: f64 = 0.05;

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
    /// Slots of all workers together: how many requests finish in one mean service time.
    slots: usize,
    state: Mutex<State>,
}

struct State {
    waiting: VecDeque<Job>,
    /// Slots with nothing to do, oldest first. Non-empty only while `waiting` is empty.
    idle: VecDeque<IdleSlot>,
    high_water: [usize; 2],
    /// Time from entering the queue to being handed to a slot, in microseconds.
    waits: Histogram<u64>,
    shed_full: u64,
    shed_timeout: u64,
    shed_at_arrival: u64,
    /// Requests whose client left while they waited: taken out, never run.
    withdrawn: u64,
    /// Requests whose client left while they ran.
    abandoned_running: u64,
    /// Moving mean of how long requests ran, in seconds, and how many fed it.
    mean_service_secs: f64,
    service_samples: u64,
}

struct IdleSlot {
    /// The busy slots of the slot's worker, to pick the least busy worker.
    worker_busy: Arc<Tally>,
    hand: oneshot::Sender<Job>,
}

impl Queue {
    pub fn new(max_len: usize, timeout: Duration, slots: usize) -> Self {
        let waits =
            Histogram::new_with_max(timeout.as_micros().max(1_000_000) as u64 * 2, 3).expect("valid histogram bounds");
        Queue {
            max_len,
            timeout,
            slots: slots.max(1),
            state: Mutex::new(State {
                waiting: VecDeque::new(),
                idle: VecDeque::new(),
                high_water: [0; 2],
                waits,
                shed_full: 0,
                shed_timeout: 0,
                shed_at_arrival: 0,
                withdrawn: 0,
                abandoned_running: 0,
                mean_service_secs: 0.0,
                service_samples: 0,
            }),
        }
    }

    /// Admits a request that is complete now (head and body read) and returns its wait: handed
    /// to an idle slot, queued at the back, or refused at the door.
    pub fn enqueue(self: &Arc<Self>, request: http::Request<RequestBody>) -> Wait {
        let (job, outcome) = Job::new(request);
        let ticket = job.ticket;
        let deadline = job.complete_at + self.timeout;
        let stage = match self.push(job) {
            Ok(()) => Stage::Queued,
            Err(refused) => Stage::Refused(refused),
        };
        Wait { queue: self.clone(), ticket, deadline, outcome, stage }
    }

    fn push(&self, job: Job) -> Result<(), Refused> {
        let mut state = self.lock();
        let job = if state.waiting.is_empty() {
            let waited = job.complete_at.elapsed();
            match state.hand_to_idle(job) {
                Ok(()) => {
                    state.record_wait(waited);
                    return Ok(());
                }
                Err(job) => job,
            }
        } else {
            job
        };
        if state.waiting.len() >= self.max_len {
            state.shed_full += 1;
            return Err(Refused::Full);
        }
        if self
            .expected_start(&state)
            .is_some_and(|start| start > self.timeout.saturating_sub(job.complete_at.elapsed()))
        {
            state.shed_at_arrival += 1;
            return Err(Refused::WouldTimeOut);
        }
        state.waiting.push_back(job);
        let depth = state.waiting.len();
        for mark in state.high_water.iter_mut() {
            *mark = (*mark).max(depth);
        }
        Ok(())
    }

    /// How long a request joining the queue now may wait for its turn: everyone ahead of it
    /// and itself must get a slot, and each slot frees up once per mean service time. The
    /// rounds are counted whole: when the slots run in step (a burst of like requests), one
    /// arriving just after they all started waits every round in full, and a request admitted
    /// only to be shed at the deadline would wait the whole timeout for nothing. `None` until
    /// enough requests have finished to know the mean.
    fn expected_start(&self, state: &State) -> Option<Duration> {
        if state.service_samples < SERVICE_SAMPLES_NEEDED {
            return None;
        }
        let rounds = (state.waiting.len() + 1).div_ceil(self.slots);
        Some(Duration::from_secs_f64(rounds as f64 * state.mean_service_secs))
    }

    /// Learns from a finished request how long service takes.
    pub fn record_service(&self, took: Duration) {
        let mut state = self.lock();
        let took = took.as_secs_f64();
        state.mean_service_secs = match state.service_samples {
            0 => took,
            _ => state.mean_service_secs + SERVICE_WEIGHT * (took - state.mean_service_secs),
        };
        state.service_samples += 1;
    }

    /// Takes a request out of the queue if it has not started: its deadline passed, or its
    /// client left. Returns whether it was still waiting (if not, it is running or answered).
    fn withdraw(&self, ticket: Ticket, why: Withdrawal) -> bool {
        let mut state = self.lock();
        let Some(index) = state.waiting.iter().position(|job| job.ticket == ticket) else {
            if why == Withdrawal::ClientGone {
                state.abandoned_running += 1;
            }
            return false;
        };
        state.waiting.remove(index);
        match why {
            Withdrawal::ClientGone => state.withdrawn += 1,
            Withdrawal::TimedOut => state.shed_timeout += 1,
        }
        true
    }

    /// Called by a free slot: returns the oldest waiting request, or waits for the next one.
    /// `worker_busy` holds the busy slots of the slot's worker; the queue counts the job in it
    /// when handing it over, and the slot takes it out when the job is done.
    pub fn next_job(self: &Arc<Self>, worker_busy: &Arc<Tally>) -> NextJob {
        let mut state = self.lock();
        if let Some(job) = state.pop_startable(self.timeout) {
            worker_busy.up();
            return NextJob { queue: self.clone(), ready: Some(job), waiting: None };
        }
        let (hand, receive) = oneshot::channel();
        // Slots that stopped waiting leave closed entries behind; clear them here so the list
        // stays as long as the number of slots.
        state.idle.retain(|slot| !slot.hand.is_closed());
        state.idle.push_back(IdleSlot { worker_busy: worker_busy.clone(), hand });
        NextJob { queue: self.clone(), ready: None, waiting: Some(receive) }
    }

    /// Puts back a job a slot received but cannot run (its worker connection broke before it
    /// was sent). It was the oldest when it was handed out, so it goes to the front.
    pub fn give_back(&self, job: Job, worker_busy: &Tally) {
        worker_busy.down();
        let mut state = self.lock();
        if let Err(job) = state.hand_to_idle(job) {
            state.waiting.push_front(job);
        }
    }

    pub fn snapshot(&self, reader: Reader) -> QueueSnapshot {
        let mut state = self.lock();
        let depth = state.waiting.len();
        let high_water = std::mem::replace(&mut state.high_water[reader as usize], depth);
        let ms = |micros: u64| micros as f64 / 1000.0;
        let waits = &state.waits;
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
            withdrawn: state.withdrawn,
            mean_service_ms: if state.service_samples >= SERVICE_SAMPLES_NEEDED {
                state.mean_service_secs * 1000.0
            } else {
                0.0
            },
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

    /// The oldest request that can still start. Requests past their deadline are answered
    /// with 503 here, so none starts late even if its connection has not noticed yet.
    fn pop_startable(&mut self, timeout: Duration) -> Option<Job> {
        let now = Instant::now();
        while let Some(job) = self.waiting.pop_front() {
            let waited = now.saturating_duration_since(job.complete_at);
            if job.reply.is_closed() {
                self.withdrawn += 1;
            } else if waited > timeout {
                self.shed_timeout += 1;
                job.answer(Outcome::Failed(Failure::QueueTimeout));
            } else {
                self.record_wait(waited);
                return Some(job);
            }
        }
        None
    }

    fn record_wait(&mut self, waited: Duration) {
        let micros = waited.as_micros() as u64;
        self.waits.saturating_record(micros);
    }
}

/// Why a request leaves the queue before a slot starts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Withdrawal {
    /// The client went away.
    ClientGone,
    /// The wait deadline passed; the request is shed with 503.
    TimedOut,
}

/// One request's wait, from the moment it is complete to its outcome. Its connection holds it
/// while it also watches the client; dropping it before the outcome means the client left, and
/// withdraws the request if it has not started.
pub struct Wait {
    queue: Arc<Queue>,
    ticket: Ticket,
    /// When the request is shed if no slot has started it.
    deadline: Instant,
    outcome: oneshot::Receiver<Outcome>,
    stage: Stage,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    Refused(Refused),
    /// In the queue, or possibly already started by a slot.
    Queued,
    /// Past its deadline but started in time: only the worker's answer is awaited now.
    Started,
    /// The outcome was delivered.
    Over,
}

impl Wait {
    /// The outcome: the worker's response, a worker failure (502, 504), or 503 when refused at
    /// the door or not started by the deadline. Cancel-safe: the connection calls it again
    /// after reading ahead on the client connection.
    pub async fn outcome(&mut self) -> Outcome {
        loop {
            match self.stage {
                Stage::Refused(refused) => return self.deliver(Ok(Outcome::Failed(refused.failure()))),
                Stage::Queued => {
                    tokio::select! {
                        biased;
                        result = &mut self.outcome => return self.deliver(result),
                        () = sleep_until(self.deadline) => {
                            if self.queue.withdraw(self.ticket, Withdrawal::TimedOut) {
                                return self.deliver(Ok(Outcome::Failed(Failure::QueueTimeout)));
                            }
                            self.stage = Stage::Started; // it started just in time
                        }
                    }
                }
                Stage::Started => {
                    let result = (&mut self.outcome).await;
                    return self.deliver(result);
                }
                Stage::Over => return std::future::pending().await,
            }
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
        if matches!(self.stage, Stage::Queued | Stage::Started) {
            self.queue.withdraw(self.ticket, Withdrawal::ClientGone);
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
        Arc::new(Queue::new(max_len, timeout, slots))
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
        for _ in 0..SERVICE_SAMPLES_NEEDED {
            queue.record_service(Duration::from_millis(100));
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
        for _ in 0..SERVICE_SAMPLES_NEEDED {
            queue.record_service(Duration::from_millis(100));
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
}
