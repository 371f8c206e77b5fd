//! What the supervisor is told to run ([`SupervisorConfig`]): how many workers, what each one is
//! and how it starts, and when one is replaced.

use std::time::Duration;

use crate::workers::affinity::WorkerCpus;
use crate::workers::launch::{Launch, TakesWebSockets};
use crate::workers::replacement::RecyclePolicy;
use crate::workers::scaling::ScalingPolicy;
use crate::workers::slots_per_worker::SlotsPerWorker;
use crate::workers::zygote::ZygoteConfig;

#[derive(Debug, Clone)]
pub struct SupervisorConfig {
    /// How many workers: at the start, and the bounds and rules of adaptive W.
    pub scaling: ScalingPolicy,
    /// `-t`: each worker's slots, by the kind of app it serves.
    pub slots: SlotsPerWorker,
    pub launch: Launch,
    pub boot_timeout: Duration,
    /// How long a hung worker's other requests may take to finish before it is replaced.
    pub request_timeout: Duration,
    /// The largest request head the front accepts (a hop's rings must hold one).
    pub max_head: usize,
    /// When healthy workers are recycled.
    pub recycle: RecyclePolicy,
    /// `--preload`: the bundled worker's app is imported once and its workers forked.
    pub preload: Option<ZygoteConfig>,
    /// Set as each bundled worker says when it is ready.
    pub takes_websockets: TakesWebSockets,
    /// `--cpu-affinity`: the CPU of each worker, if they are pinned.
    pub cpus: Option<WorkerCpus>,
}
