//! The scaling task: each interval it measures the queue and the pool, asks the decision
//! ([`crate::workers::scaling`]) what to do and does it; between intervals it does what a signal
//! or the control address asks ([`Scaling::ask`]). Every change of W, and every add the memory
//! budget refused, is counted by cause and logged.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use headway_common::procfs;
use headway_common::stats::{ScalingEvents, ScalingSnapshot};
use tokio::sync::{mpsc, oneshot};
use tokio::task::{JoinHandle, JoinSet};
use tokio::time::MissedTickBehavior;
use tracing::{info, warn};

use super::pool::{Membership, Pool};
use crate::queue::{Queue, Reader, Recent};
use crate::workers::scaling::{
    Cause, Decision, Direction, Measurements, Refusal, Scaler, ScalingPolicy, WorkerView, INTERVAL,
};

/// How often the busy slots are sampled within an interval, for the fewest idle at any moment.
const SAMPLE_EVERY: Duration = Duration::from_millis(50);

/// W's bounds and what changed it: shared by the scaling task, the signals and the stats.
pub struct Scaling {
    policy: ScalingPolicy,
    pool: Arc<Pool>,
    events: [AtomicU64; Cause::ALL.len()],
    /// Workers alive x time, in microseconds, counted each interval.
    worker_micros: AtomicU64,
    hands: mpsc::Sender<Hand>,
}

/// A request by hand, and where its answer goes.
struct Hand {
    direction: Direction,
    cause: Cause,
    answer: oneshot::Sender<Result<String, String>>,
}

impl Scaling {
    /// Asks for one worker more or fewer, by a signal or the control address; the answer says
    /// what was done, or why not.
    pub async fn ask(&self, direction: Direction, cause: Cause) -> Result<String, String> {
        let (answer, answered) = oneshot::channel();
        self.hands.send(Hand { direction, cause, answer }).await.map_err(|_| "the server is stopping".to_owned())?;
        answered.await.map_err(|_| "the server is stopping".to_owned())?
    }

    pub fn snapshot(&self) -> ScalingSnapshot {
        let count = |cause: Cause| self.events[cause as usize].load(Ordering::Relaxed);
        ScalingSnapshot {
            workers: self.pool.memberships().len(),
            min: self.policy.min,
            max: self.policy.max,
            automatic: self.policy.automatic,
            events: ScalingEvents {
                queue_wait: count(Cause::QueueWait),
                idle: count(Cause::Idle),
                memory_cap: count(Cause::MemoryCap),
                signal: count(Cause::Signal),
                control: count(Cause::Control),
            },
            worker_seconds: self.worker_micros.load(Ordering::Relaxed) as f64 / 1e6,
        }
    }

    fn count(&self, cause: Cause) {
        self.events[cause as usize].fetch_add(1, Ordering::Relaxed);
    }
}

/// Starts the scaling task for `pool`, serving from `queue`.
pub(super) fn start(pool: Arc<Pool>, queue: Arc<Queue>) -> (Arc<Scaling>, JoinHandle<()>) {
    let (hands, asked) = mpsc::channel(8);
    let policy = pool.config.scaling.clone();
    let scaling = Arc::new(Scaling {
        policy,
        pool: pool.clone(),
        events: Default::default(),
        worker_micros: AtomicU64::new(0),
        hands,
    });
    let task = tokio::spawn(run(pool, queue, scaling.clone(), asked));
    (scaling, task)
}

/// The task's state between intervals.
struct Task {
    pool: Arc<Pool>,
    queue: Arc<Queue>,
    scaling: Arc<Scaling>,
    scaler: Scaler,
    /// The most busy slots of serving workers seen in this interval.
    peak_busy: usize,
    /// The queue's depth and its refusals at the end of the last interval.
    depth_before: usize,
    refused_before: u64,
    /// Workers being added.
    adds: JoinSet<Result<usize, String>>,
    /// When the last interval ended.
    judged_at: Instant,
}

async fn run(pool: Arc<Pool>, queue: Arc<Queue>, scaling: Arc<Scaling>, mut asked: mpsc::Receiver<Hand>) {
    let first = queue.recent(Reader::Scaling);
    let scaler = Scaler::new(scaling.policy.clone());
    let mut task = Task {
        pool,
        queue,
        scaling,
        scaler,
        peak_busy: 0,
        depth_before: first.depth,
        refused_before: first.refused,
        adds: JoinSet::new(),
        judged_at: Instant::now(),
    };
    let mut interval = tokio::time::interval(INTERVAL);
    let mut sample = tokio::time::interval(SAMPLE_EVERY);
    for ticks in [&mut interval, &mut sample] {
        ticks.set_missed_tick_behavior(MissedTickBehavior::Skip);
    }
    loop {
        tokio::select! {
            _ = sample.tick() => task.sample(),
            _ = interval.tick() => task.judge().await,
            Some(hand) = asked.recv() => {
                let answer = task.by_hand(hand.direction, hand.cause).await;
                let _ = hand.answer.send(answer);
            }
            Some(added) = task.adds.join_next() => task.added(added.unwrap_or_else(|err| Err(err.to_string()))),
        }
    }
}

impl Task {
    fn sample(&mut self) {
        let busy = self.pool.memberships().iter().filter(|m| !m.starting).map(|m| m.worker.busy.get()).sum();
        self.peak_busy = self.peak_busy.max(busy);
    }

    /// The interval is over: measures, decides and acts.
    async fn judge(&mut self) {
        self.sample();
        let now = Instant::now();
        let alive = self.pool.workers().len() as u64;
        let elapsed = now.duration_since(std::mem::replace(&mut self.judged_at, now));
        self.scaling.worker_micros.fetch_add(alive * elapsed.as_micros() as u64, Ordering::Relaxed);
        let recent = self.queue.recent(Reader::Scaling);
        let mut m = self.measure().await;
        m.wait = recent.wait_p99.max(recent.oldest_waiting);
        m.backlog_grew =
            (recent.depth > 0 && recent.depth >= self.depth_before) || recent.refused > self.refused_before;
        // Every request that arrived was started, refused, or is waiting still.
        let arrived = (recent.started + recent.refused - self.refused_before + recent.depth as u64)
            .saturating_sub(self.depth_before as u64);
        m.arrivals = arrived as f64 / elapsed.as_secs_f64().max(1e-3);
        let ready_slots: usize = m.workers.iter().filter(|w| w.ready).count() * m.worker_slots;
        m.spare_slots = ready_slots.saturating_sub(self.peak_busy);
        m.mean_service = recent.mean_service;
        m.target = recent.target;
        (self.depth_before, self.refused_before, self.peak_busy) = (recent.depth, recent.refused, 0);
        let decision = self.scaler.decide(now, &m);
        if decision != Decision::Hold {
            // Logged as it is done; nobody waits for the answer.
            let _ = self.act(decision, &m, Some(&recent));
        }
    }

    /// A request by hand: decided within the bounds and the budget, and done.
    async fn by_hand(&mut self, direction: Direction, cause: Cause) -> Result<String, String> {
        let m = self.measure().await;
        let decision = self.scaler.by_hand(Instant::now(), direction, cause, &m);
        self.act(decision, &m, None)
    }

    /// The pool as the decision sees it (the queue's figures are the caller's).
    async fn measure(&self) -> Measurements {
        let members = self.pool.memberships();
        let rss = match self.scaling.policy.max_memory {
            Some(_) => resident_memory(&members).await,
            None => vec![0; members.len()],
        };
        let workers = members
            .iter()
            .zip(rss)
            .map(|(m, rss)| WorkerView { index: m.worker.index, ready: !m.starting, busy: m.worker.busy.get(), rss })
            .collect();
        let worker_slots = members.iter().map(|m| m.worker.slots()).max().unwrap_or(0);
        Measurements { worker_slots, workers, ..Measurements::default() }
    }

    /// Does what was decided, logs it and counts it; says what was done, or why nothing was.
    fn act(&mut self, decision: Decision, m: &Measurements, recent: Option<&Recent>) -> Result<String, String> {
        let count = m.workers.len();
        let policy = &self.scaling.policy;
        let why = |cause: Cause| match (cause, recent) {
            (Cause::QueueWait, Some(recent)) => format!(
                "requests waited {:?} for a slot (99th percentile), above --scale-up-wait {:?}",
                m.wait,
                policy.scale_up_wait.of(recent.mean_service, recent.target)
            ),
            (Cause::Idle, _) => {
                format!("a worker's slots stood idle for --worker-idle-timeout {:?}", policy.idle_timeout)
            }
            (Cause::Signal, _) => "asked by a signal".to_owned(),
            (Cause::Control, _) => "asked on the control address".to_owned(),
            (cause, _) => cause.label().to_owned(),
        };
        match decision {
            Decision::Hold => Ok("nothing to do".to_owned()),
            Decision::Add(added, cause) => {
                let workers = if added == 1 { "a worker".to_owned() } else { format!("{added} workers") };
                let said = format!("adding {workers} ({count} to {}): {}", count + added, why(cause));
                info!("{said}");
                for _ in 0..added {
                    self.scaling.count(cause);
                    let pool = self.pool.clone();
                    self.adds.spawn(async move { pool.add().await });
                }
                Ok(said)
            }
            Decision::Remove(index, cause) => {
                if !self.pool.remove(index) {
                    return Err(format!("worker {index} is not serving"));
                }
                self.scaling.count(cause);
                let said = format!("removing worker {index} ({} to {}): {}", count, count - 1, why(cause));
                info!("{said}");
                Ok(said)
            }
            Decision::Refuse(Refusal::Memory) => {
                self.scaling.count(Cause::MemoryCap);
                let rss: u64 = m.workers.iter().map(|w| w.rss).sum();
                let said = format!(
                    "not adding a worker: the {count} use {} MiB, and one more would pass --max-memory {} MiB",
                    rss >> 20,
                    policy.max_memory.unwrap_or_default() >> 20
                );
                warn!("{said}");
                Err(said)
            }
            Decision::Refuse(Refusal::AtMax) => {
                Err(format!("not adding a worker: {count} is the most ({})", policy.max))
            }
            Decision::Refuse(Refusal::AtMin) => {
                Err(format!("not removing a worker: {count} is the fewest ({})", policy.min))
            }
        }
    }

    /// A worker added serves, or failed to start (which pauses the next adds).
    fn added(&mut self, added: Result<usize, String>) {
        match added {
            Ok(index) => {
                info!("worker {index} joined the pool");
                self.scaler.add_succeeded();
            }
            Err(err) => {
                warn!("a worker added did not start: {err}; the others serve on");
                self.scaler.add_failed(Instant::now());
            }
        }
    }
}

/// The resident memory of each member's processes, in bytes (0 while it has none).
async fn resident_memory(members: &[Membership]) -> Vec<u64> {
    let processes = tokio::task::spawn_blocking(procfs::processes).await.unwrap_or_default();
    members
        .iter()
        .map(|m| match m.worker.pid() {
            0 => 0,
            pid => procfs::group_usage(&processes, pid).rss_bytes,
        })
        .collect()
}
