//! The one queue: where a request waits, and the only place it waits.
//!
//! Every complete request of every client connection enters here in the order it became
//! complete, and every slot of every worker takes from here, oldest first. There is no other
//! queue behind it: a slot runs one request at a time, so a request is either waiting here or
//! running. This is what removes the keep-alive and wrong-worker tails of per-worker queues.
//!
//! The queue is bounded twice: by length (a request arriving at a full queue is refused at
//! once) and by time (a request not started within the timeout is refused with 503 rather
//! than left to a router's timeout). The time bound is applied at the door too: from the mean
//! service time of recent requests, a request whose turn would come only after the timeout is
//! refused on arrival, so under overload a client learns it in microseconds, not after
//! waiting out the deadline. A request whose client has gone is withdrawn and never runs.
//!
//! Dispatch: when a request arrives and slots are idle, it goes straight to the idle slot of
//! the least busy worker (spreading work across processes is what a GIL-bound or
//! single-threaded worker needs); when a slot becomes free and requests wait, it takes the
//! oldest. Both happen under one short mutex.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use headway_common::stats::{QueueSnapshot, WaitPercentiles};
use tokio::sync::oneshot;

use crate::job::{Failure, Job, Outcome, Ticket};

/// Why a request was refused at the door.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// The queue is at its length limit.
    Full,
    /// Its turn would come after the queue timeout, judging by recent service times.
    WouldTimeOut,
}

/// Finished requests needed before the mean service time is trusted to refuse anyone.
const SERVICE_SAMPLES_NEEDED: u64 = 20;
/// Weight of the newest service time in the moving mean: about the last 20 requests count.
const SERVICE_WEIGHT: f64 = 0.05;

/// Why a connection takes its request back out of the queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Withdrawal {
    /// The client went away.
    ClientGone,
    /// The wait deadline passed; the request is shed with 503.
    TimedOut,
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
    withdrawn: u64,
    /// Moving mean of how long requests ran, in seconds, and how many fed it.
    mean_service_secs: f64,
    service_samples: u64,
}

struct IdleSlot {
    /// The busy-slot count of the slot's worker, to pick the least busy worker.
    worker_busy: Arc<AtomicUsize>,
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
                mean_service_secs: 0.0,
                service_samples: 0,
            }),
        }
    }

    /// How long a request may wait before it is refused.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Admits a complete request: hands it to an idle slot, or queues it at the back.
    pub fn push(&self, job: Job) -> Result<(), Refused> {
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

    /// Takes a request out of the queue if it has not started. Returns whether it was still
    /// waiting (if not, it is running or already answered).
    pub fn withdraw(&self, ticket: Ticket, why: Withdrawal) -> bool {
        let mut state = self.lock();
        let Some(index) = state.waiting.iter().position(|job| job.ticket == ticket) else {
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
    /// `worker_busy` is the busy-slot count of the slot's worker; the queue counts the job in
    /// it when handing it over, and the slot takes it out when the job is done.
    pub fn next_job(self: &Arc<Self>, worker_busy: &Arc<AtomicUsize>) -> NextJob {
        let mut state = self.lock();
        if let Some(job) = state.pop_startable(self.timeout) {
            worker_busy.fetch_add(1, Ordering::Relaxed);
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
    pub fn give_back(&self, job: Job, worker_busy: &AtomicUsize) {
        worker_busy.fetch_sub(1, Ordering::Relaxed);
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
                .min_by_key(|(index, slot)| (slot.worker_busy.load(Ordering::Relaxed), *index))
                .map(|(index, _)| index);
            let Some(slot) = best.and_then(|index| self.idle.remove(index)) else {
                return Err(job);
            };
            slot.worker_busy.fetch_add(1, Ordering::Relaxed);
            match slot.hand.send(job) {
                Ok(()) => return Ok(()),
                Err(returned) => {
                    // The slot stopped waiting; try the next one.
                    slot.worker_busy.fetch_sub(1, Ordering::Relaxed);
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
    pub fn cancel(mut self, worker_busy: &AtomicUsize) {
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
    use crate::job::RequestBody;
    use bytes::Bytes;

    fn job(path: &str) -> (Job, oneshot::Receiver<Outcome>) {
        Job::new(http::Request::builder().uri(path).body(RequestBody::Memory(Bytes::new())).unwrap())
    }

    fn path(job: &Job) -> &str {
        job.request.uri().path()
    }

    #[tokio::test]
    async fn waiting_jobs_are_served_oldest_first() {
        let queue = Arc::new(Queue::new(10, Duration::from_secs(10), 1));
        let busy = Arc::new(AtomicUsize::new(0));
        let mut keep = Vec::new();
        for name in ["/a", "/b", "/c"] {
            let (job, outcome) = job(name);
            queue.push(job).unwrap();
            keep.push(outcome);
        }
        for expected in ["/a", "/b", "/c"] {
            assert_eq!(path(&queue.next_job(&busy).recv().await), expected);
        }
        assert_eq!(busy.load(Ordering::Relaxed), 3);
        assert_eq!(queue.snapshot(Reader::Json).high_water, 3);
        assert_eq!(queue.snapshot(Reader::Json).high_water, 0, "reset by the read");
        assert_eq!(queue.snapshot(Reader::Prometheus).high_water, 3, "each reader has its own");
    }

    #[tokio::test]
    async fn arriving_job_goes_to_least_busy_worker() {
        let queue = Arc::new(Queue::new(10, Duration::from_secs(10), 1));
        let worker_a = Arc::new(AtomicUsize::new(2));
        let worker_b = Arc::new(AtomicUsize::new(0));
        let mut waits_a = queue.next_job(&worker_a);
        let mut waits_b = queue.next_job(&worker_b);
        let (first, _o1) = job("/1");
        queue.push(first).unwrap();
        assert_eq!(path(&waits_b.recv().await), "/1");
        assert_eq!(worker_b.load(Ordering::Relaxed), 1);
        let (second, _o2) = job("/2");
        queue.push(second).unwrap();
        assert_eq!(path(&waits_a.recv().await), "/2");
        assert_eq!(queue.snapshot(Reader::Json).depth, 0);
    }

    #[tokio::test]
    async fn a_request_that_would_start_too_late_is_refused_on_arrival() {
        let queue = Queue::new(100, Duration::from_millis(350), 1);
        let mut keep = Vec::new();
        let mut push = |path: String| {
            let (job, outcome) = job(&path);
            keep.push(outcome);
            queue.push(job)
        };
        // Until the service time is known, nobody is refused for it.
        for n in 0..5 {
            assert!(push(format!("/early{n}")).is_ok());
        }
        for _ in 0..SERVICE_SAMPLES_NEEDED {
            queue.record_service(Duration::from_millis(100));
        }
        // 5 are waiting on 1 slot at 100 ms each: the next would start after 600 ms.
        assert_eq!(push("/late".to_owned()), Err(Refused::WouldTimeOut));
        let snapshot = queue.snapshot(Reader::Json);
        assert_eq!((snapshot.shed_at_arrival, snapshot.depth), (1, 5));
        assert!((snapshot.mean_service_ms - 100.0).abs() < 1e-6);
    }

    #[tokio::test]
    async fn more_slots_let_more_requests_wait() {
        let queue = Queue::new(100, Duration::from_millis(370), 4);
        for _ in 0..SERVICE_SAMPLES_NEEDED {
            queue.record_service(Duration::from_millis(100));
        }
        let mut keep = Vec::new();
        // With 4 slots at 100 ms, the 12th in line gets a slot within 3 rounds, 300 ms: in time.
        for n in 1..=12 {
            let (job, outcome) = job(&format!("/{n}"));
            keep.push(outcome);
            assert!(queue.push(job).is_ok(), "request {n}");
        }
        // The 13th may need a 4th round: 400 ms, past the 370 ms timeout.
        let (job, _outcome) = job("/13");
        assert_eq!(queue.push(job), Err(Refused::WouldTimeOut));
    }

    #[tokio::test]
    async fn full_queue_refuses() {
        let queue = Queue::new(1, Duration::from_secs(10), 1);
        let (a, _oa) = job("/a");
        let (b, _ob) = job("/b");
        assert!(queue.push(a).is_ok());
        assert!(queue.push(b).is_err());
        assert_eq!(queue.snapshot(Reader::Json).shed_queue_full, 1);
    }

    #[tokio::test]
    async fn withdrawn_and_abandoned_jobs_never_reach_a_slot() {
        let queue = Arc::new(Queue::new(10, Duration::from_secs(10), 1));
        let busy = Arc::new(AtomicUsize::new(0));
        let (a, _oa) = job("/a");
        let (b, ob) = job("/b");
        let (c, _oc) = job("/c");
        let ticket_a = a.ticket;
        queue.push(a).unwrap();
        queue.push(b).unwrap();
        queue.push(c).unwrap();
        assert!(queue.withdraw(ticket_a, Withdrawal::ClientGone));
        assert!(!queue.withdraw(ticket_a, Withdrawal::TimedOut));
        drop(ob); // the client of /b went away without withdrawing
        assert_eq!(path(&queue.next_job(&busy).recv().await), "/c");
        assert_eq!(queue.snapshot(Reader::Json).withdrawn, 2);
    }

    #[tokio::test]
    async fn expired_jobs_are_answered_503_not_started() {
        let queue = Arc::new(Queue::new(10, Duration::from_millis(1), 1));
        let busy = Arc::new(AtomicUsize::new(0));
        let (a, outcome) = job("/a");
        queue.push(a).unwrap();
        std::thread::sleep(Duration::from_millis(5));
        let (b, _ob) = job("/b");
        queue.push(b).unwrap();
        let mut next = queue.next_job(&busy);
        assert!(matches!(outcome.await, Ok(Outcome::Failed(Failure::QueueTimeout))));
        // /b was pushed after /a expired but is itself only just queued.
        assert_eq!(path(&next.recv().await), "/b");
    }

    #[tokio::test]
    async fn cancelled_wait_gives_a_handed_job_back() {
        let queue = Arc::new(Queue::new(10, Duration::from_secs(10), 1));
        let busy = Arc::new(AtomicUsize::new(0));
        let next = queue.next_job(&busy);
        let (a, _oa) = job("/a");
        queue.push(a).unwrap(); // handed straight to the idle slot
        assert_eq!(busy.load(Ordering::Relaxed), 1);
        next.cancel(&busy);
        assert_eq!(busy.load(Ordering::Relaxed), 0);
        assert_eq!(queue.snapshot(Reader::Json).depth, 1);
        assert_eq!(path(&queue.next_job(&busy).recv().await), "/a");
    }
}
