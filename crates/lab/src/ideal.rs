//! The ideal a measurement is compared with: what a perfect server with B = W x T request slots
//! and one FIFO queue would do for C closed-loop clients, each sending its next request as soon
//! as the previous one is answered.
//!
//! What "ideal" assumes: every request takes exactly its service time S once it holds a slot
//! (no overhead for HTTP, scheduling or the network); a request waits only while all B slots are
//! busy, and then in one first-in-first-out queue; a process runs its CPU work on at most one core
//! (a GIL or an event loop), and the machine has `cores` of them. With a mix of service times we
//! use the mean, which makes the ideal throughput exact and the ideal latency the mean latency.
//!
//! Then, by Little's law for a closed loop with no think time (C = throughput x latency):
//! throughput = min(C/S, B/S, min(W, cores)/CPU) and latency = C / throughput, which is
//! S x max(1, C/B) whenever the CPU is not the limit.
//!
//! With a mix, each kind of request has an ideal of its own ([`Ideal::latency_of_kind`]): in one
//! FIFO queue a request waits behind whatever came before it, whatever its own kind, so all kinds
//! share the same mean wait, and a kind's ideal is its own service time plus that wait.

use serde::{Deserialize, Serialize};

/// What a request costs: its service time on a slot, and how much of that is CPU.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Service {
    /// Mean seconds a request holds a slot.
    pub mean_secs: f64,
    /// Mean seconds of CPU per request (part of `mean_secs`).
    pub cpu_secs: f64,
}

impl Service {
    /// A request that only waits (sleeps) for `ms` milliseconds.
    pub fn waiting_ms(ms: f64) -> Service {
        Service { mean_secs: ms / 1e3, cpu_secs: 0.0 }
    }

    /// The mean of several kinds of request, weighted by how often each is sent.
    pub fn mix(parts: &[(Service, f64)]) -> Service {
        let total: f64 = parts.iter().map(|(_, weight)| weight).sum();
        let mean = |f: fn(&Service) -> f64| parts.iter().map(|(s, w)| f(s) * w).sum::<f64>() / total;
        Service { mean_secs: mean(|s| s.mean_secs), cpu_secs: mean(|s| s.cpu_secs) }
    }
}

/// The server being measured, as the ideal sees it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Capacity {
    pub workers: usize,
    pub threads: usize,
    /// CPU cores of the machine.
    pub cores: usize,
}

impl Capacity {
    /// B = W x T.
    pub fn slots(&self) -> usize {
        self.workers * self.threads
    }

    /// Requests per second the server can finish with every slot busy: B/S, or fewer if the
    /// CPU work of min(W, cores) processes is the limit.
    pub fn max_throughput(&self, service: Service) -> f64 {
        let by_slots = self.slots() as f64 / service.mean_secs;
        let busy_cores = self.workers.min(self.cores) as f64;
        if service.cpu_secs > 0.0 {
            by_slots.min(busy_cores / service.cpu_secs)
        } else {
            by_slots
        }
    }
}

/// The ideal outcome of a closed loop of `clients` against `capacity`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Ideal {
    /// Requests per second.
    pub rps: f64,
    /// Latency of each request (seconds); with one service time, every request's.
    pub latency_secs: f64,
}

impl Ideal {
    /// The mean time a request waits for a slot: the ideal latency less the mean service time of
    /// the `mix` it was computed for (Little's law leaves exactly this once the slots' work is
    /// taken out). Zero while there are no more clients than slots.
    pub fn wait_secs(&self, mix: Service) -> f64 {
        (self.latency_secs - mix.mean_secs).max(0.0)
    }

    /// The ideal mean latency of the requests of one `kind` within `mix`, in one FIFO queue: the
    /// kind's own service time plus the wait every kind shares. A kind's order in the queue does
    /// not depend on its service time, so no kind waits more than another on average. (Per-worker
    /// queues break this: a fast request that lands behind a slow one waits for the slow one.)
    /// Assumes the slots, not the CPU, are the limit, as with requests that only wait.
    pub fn latency_of_kind(&self, mix: Service, kind: Service) -> f64 {
        kind.mean_secs + self.wait_secs(mix)
    }
}

/// C clients that each send again as soon as they are answered.
pub fn closed_loop(capacity: Capacity, service: Service, clients: usize) -> Ideal {
    let rps = (clients as f64 / service.mean_secs).min(capacity.max_throughput(service));
    Ideal { rps, latency_secs: clients as f64 / rps }
}

/// Requests arriving at `rate` per second whatever happens (an open loop). Below capacity each is
/// served in S; above it a server can only finish its capacity and must queue the rest (latency
/// then grows for as long as the overload lasts) or turn them away: the ideal is to answer
/// capacity's worth promptly and reject the excess at once.
pub fn open_loop(capacity: Capacity, service: Service, rate: f64) -> Ideal {
    Ideal { rps: rate.min(capacity.max_throughput(service)), latency_secs: service.mean_secs }
}

/// Requests pipelined on one connection, all sent at once: a server that runs them on its B slots
/// in order of arrival (and sends the answers in order) has answered the last one when the
/// busiest slot is done. Returns that time in seconds, for `services` in request order.
pub fn pipelined(capacity: Capacity, services: &[Service]) -> Ideal {
    let mut free_at = vec![0.0f64; capacity.slots().max(1)];
    let mut done = 0.0f64;
    for service in services {
        let slot = free_at.iter_mut().min_by(|a, b| a.total_cmp(b)).expect("at least one slot");
        *slot += service.mean_secs;
        done = done.max(*slot);
    }
    Ideal { rps: services.len() as f64 / done, latency_secs: done }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn near(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9 * b.abs().max(1.0)
    }

    const FIVE_SLOTS: Capacity = Capacity { workers: 1, threads: 5, cores: 2 };

    #[test]
    fn seed_000_five_slots_ten_clients_200_ms() {
        // hey -c 10 against Puma -t 5:5 and a 200 ms endpoint: 25 requests/s, 0.4 s each.
        let ideal = closed_loop(FIVE_SLOTS, Service::waiting_ms(200.0), 10);
        assert!(near(ideal.rps, 25.0));
        assert!(near(ideal.latency_secs, 0.4));
    }

    #[test]
    fn fewer_clients_than_slots_wait_for_nothing() {
        let ideal = closed_loop(FIVE_SLOTS, Service::waiting_ms(200.0), 3);
        assert!(near(ideal.rps, 15.0));
        assert!(near(ideal.latency_secs, 0.2));
    }

    #[test]
    fn fifo_latency_is_service_times_clients_over_slots() {
        let capacity = Capacity { workers: 2, threads: 4, cores: 2 };
        for (clients, factor) in [(4, 1.0), (8, 1.0), (12, 1.5), (16, 2.0), (32, 4.0)] {
            let ideal = closed_loop(capacity, Service::waiting_ms(10.0), clients);
            assert!(near(ideal.latency_secs, 0.010 * factor), "{clients} clients: {ideal:?}");
            assert!(near(ideal.rps, clients.min(8) as f64 / 0.010));
        }
    }

    #[test]
    fn a_mix_uses_the_mean_service_time() {
        let mix = Service::mix(&[(Service::waiting_ms(20.0), 9.0), (Service::waiting_ms(500.0), 1.0)]);
        assert!(near(mix.mean_secs, 0.068));
        let ideal = closed_loop(Capacity { workers: 2, threads: 2, cores: 2 }, mix, 8);
        assert!(near(ideal.rps, 4.0 / 0.068));
        assert!(near(ideal.latency_secs, 0.136));
    }

    #[test]
    fn each_kind_of_a_mix_pays_its_own_service_plus_the_shared_wait() {
        // mixed-tail: 90 % of 20 ms + 10 % of 500 ms (mean 68 ms) on 2 x 2 slots.
        let (fast, slow) = (Service::waiting_ms(20.0), Service::waiting_ms(500.0));
        let mix = Service::mix(&[(fast, 9.0), (slow, 1.0)]);
        let capacity = Capacity { workers: 2, threads: 2, cores: 2 };

        // 8 clients on 4 slots: 136 ms in all, of which 68 ms waiting for a slot; both kinds wait
        // those 68 ms: 20 + 68 = 88 ms and 500 + 68 = 568 ms.
        let ideal = closed_loop(capacity, mix, 8);
        assert!(near(ideal.wait_secs(mix), 0.068));
        assert!(near(ideal.latency_of_kind(mix, fast), 0.088));
        assert!(near(ideal.latency_of_kind(mix, slow), 0.568));
        // The kinds' ideals, weighted by how often each is sent, give back the mix's.
        let weighted = 0.9 * ideal.latency_of_kind(mix, fast) + 0.1 * ideal.latency_of_kind(mix, slow);
        assert!(near(weighted, ideal.latency_secs));

        // 4 clients, 4 slots: nobody waits, each kind takes its own service time.
        let ideal = closed_loop(capacity, mix, 4);
        assert!(near(ideal.wait_secs(mix), 0.0));
        assert!(near(ideal.latency_of_kind(mix, fast), 0.020));
        assert!(near(ideal.latency_of_kind(mix, slow), 0.500));
    }

    #[test]
    fn cpu_work_is_limited_by_processes_and_cores() {
        // seed 001's 100 ms CPU + 1 ms I/O: one process (a GIL) finishes at most 10/s whatever its
        // threads; eight processes on two cores at most 20/s.
        let service = Service { mean_secs: 0.101, cpu_secs: 0.100 };
        let threads_only = Capacity { workers: 1, threads: 8, cores: 2 };
        assert!(near(closed_loop(threads_only, service, 8).rps, 10.0));
        assert!(near(closed_loop(threads_only, service, 8).latency_secs, 0.8));
        let processes_only = Capacity { workers: 8, threads: 1, cores: 2 };
        assert!(near(closed_loop(processes_only, service, 8).rps, 20.0));
        // One client never waits for the CPU.
        assert!(near(closed_loop(processes_only, service, 1).latency_secs, 0.101));
    }

    #[test]
    fn pipelined_requests_spread_over_the_slots() {
        // 20 requests of 200, 190, .. 10 ms on 5 slots: list scheduling in order.
        let services: Vec<Service> = (1..=20).rev().map(|i| Service::waiting_ms(10.0 * i as f64)).collect();
        let ideal = pipelined(FIVE_SLOTS, &services);
        // The slots start on 200..160; each next request goes to the slot free first; the last
        // slot is done at 420 ms (against 2100 ms for one request at a time).
        assert!(near(ideal.latency_secs, 0.42), "{ideal:?}");
        // One slow request, then fast ones: the fast ones go to the other slots.
        let mut flood = vec![Service::waiting_ms(1000.0)];
        flood.extend(std::iter::repeat_n(Service::waiting_ms(0.0), 100));
        assert!(near(pipelined(FIVE_SLOTS, &flood).latency_secs, 1.0));
    }

    #[test]
    fn open_loop_above_capacity_serves_capacity_and_sheds_the_rest() {
        let capacity = Capacity { workers: 2, threads: 4, cores: 2 };
        let service = Service::waiting_ms(100.0);
        let ideal = open_loop(capacity, service, 160.0);
        assert!(near(ideal.rps, 80.0));
        assert!(near(ideal.latency_secs, 0.1));
        assert!(near(open_loop(capacity, service, 40.0).rps, 40.0));
    }
}
