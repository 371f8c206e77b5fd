//! When requests go out and where: the closed-loop budget, the open-loop schedule of intended
//! send times, and the weighted choice of URL.
//!
//! Each thread owns its own share of all three, so connections never synchronize across
//! threads. Shares add up exactly: counts are split, constant schedules are interleaved, and
//! independent Poisson processes sum to one Poisson process of the total rate.

use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::plan::{LoadModel, Plan};
use crate::settings::Arrival;

/// Where one thread's requests come from.
#[derive(Debug)]
pub enum Demand {
    /// Closed loop: a count (if any) and a time after which nothing new is sent.
    Closed { remaining: Option<u64>, deadline: Option<Instant> },
    /// Open loop: intended send times.
    Open(Box<OpenSchedule>),
}

impl Demand {
    /// The share of `plan` for thread `index`, which runs `connections` of the connections.
    pub fn for_thread(plan: &Plan, index: usize, connections: usize, start: Instant) -> Demand {
        let share = connections as f64 / plan.config.connections as f64;
        let remaining = plan.requests.map(|n| split(n, plan.config.connections as u64, index, plan.threads));
        let deadline = plan.config.duration.map(|d| start + d);
        match plan.model {
            LoadModel::Closed { .. } => Demand::Closed { remaining, deadline },
            LoadModel::Open { rate, arrival } => Demand::Open(Box::new(OpenSchedule {
                start,
                // Thread i starts i/rate in, so constant schedules of equal shares interleave.
                offset: index as f64 / rate,
                rate: rate * share,
                arrival,
                rng: StdRng::seed_from_u64(plan.config.seed.wrapping_add(index as u64)),
                remaining,
                deadline,
            })),
        }
    }

    /// The next request to send: `Some(None)` in the closed loop (send now), `Some(Some(t))` in
    /// the open loop (send at `t`), `None` when this thread has sent everything.
    pub fn next(&mut self, now: Instant) -> Option<Option<Instant>> {
        match self {
            Demand::Closed { remaining, deadline } => {
                if deadline.is_some_and(|d| now >= d) || *remaining == Some(0) {
                    return None;
                }
                if let Some(n) = remaining {
                    *n -= 1;
                }
                Some(None)
            }
            Demand::Open(schedule) => schedule.next().map(Some),
        }
    }
}

/// Splits `total` over `parts` connections, then gives thread `index` of `threads` its
/// connections' share (connections are dealt to threads the same way).
fn split(total: u64, parts: u64, index: usize, threads: usize) -> u64 {
    let (first, count) = thread_connections(parts as usize, index, threads);
    let per = |i: u64| total / parts + u64::from(i < total % parts);
    (first as u64..(first + count) as u64).map(per).sum()
}

/// The first connection and the number of connections of thread `index`.
pub fn thread_connections(connections: usize, index: usize, threads: usize) -> (usize, usize) {
    let base = connections / threads;
    let extra = connections % threads;
    let count = base + usize::from(index < extra);
    let first = index * base + index.min(extra);
    (first, count)
}

/// One thread's intended send times.
#[derive(Debug)]
pub struct OpenSchedule {
    start: Instant,
    /// Seconds after `start` of the next intended send.
    offset: f64,
    rate: f64,
    arrival: Arrival,
    rng: StdRng,
    remaining: Option<u64>,
    deadline: Option<Instant>,
}

impl OpenSchedule {
    fn next(&mut self) -> Option<Instant> {
        if self.remaining == Some(0) {
            return None;
        }
        let at = self.start + Duration::from_secs_f64(self.offset);
        if self.deadline.is_some_and(|d| at >= d) {
            return None;
        }
        if let Some(n) = &mut self.remaining {
            *n -= 1;
        }
        self.offset += match self.arrival {
            Arrival::Constant => 1.0 / self.rate,
            // Inverse transform: -ln(U)/rate with U in (0, 1].
            Arrival::Poisson => -(1.0 - self.rng.random::<f64>()).ln() / self.rate,
        };
        Some(at)
    }
}

/// Smooth weighted round robin (as nginx balances upstreams): over any window of
/// `sum(weights)` picks, each item is picked exactly `weight` times, evenly spread.
#[derive(Debug, Clone)]
struct WeightedCycle {
    items: Vec<(usize, i64, i64)>,
    total: i64,
}

impl WeightedCycle {
    fn new(items: impl IntoIterator<Item = (usize, u32)>) -> WeightedCycle {
        let items: Vec<(usize, i64, i64)> = items.into_iter().map(|(id, w)| (id, i64::from(w), 0)).collect();
        let total = items.iter().map(|&(_, w, _)| w).sum();
        WeightedCycle { items, total }
    }

    fn pick(&mut self) -> usize {
        let mut best = 0;
        for i in 0..self.items.len() {
            self.items[i].2 += self.items[i].1;
            if self.items[i].2 > self.items[best].2 {
                best = i;
            }
        }
        self.items[best].2 -= self.total;
        self.items[best].0
    }
}

/// Chooses the URL of each request: first a destination (weighted by the sum of its URLs'
/// weights), then URLs within it, so a pipelined batch shares one connection.
#[derive(Debug, Clone)]
pub struct Picker {
    origins: WeightedCycle,
    targets: Vec<WeightedCycle>,
}

impl Picker {
    pub fn new(plan: &Plan) -> Picker {
        let weight = |t: &usize| plan.targets[*t].weight;
        Picker {
            origins: WeightedCycle::new(
                plan.origins.iter().enumerate().map(|(i, o)| (i, o.targets.iter().map(weight).sum())),
            ),
            targets: plan
                .origins
                .iter()
                .map(|o| WeightedCycle::new(o.targets.iter().map(|t| (*t, weight(t)))))
                .collect(),
        }
    }

    pub fn origin(&mut self) -> usize {
        self.origins.pick()
    }

    pub fn target(&mut self, origin: usize) -> usize {
        self.targets[origin].pick()
    }
}
