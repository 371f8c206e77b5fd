//! How the queue is run ([`QueueSettings`]): `headway serve`'s queue flags, and their defaults.

use std::time::Duration;

use super::controlled_delay::Target;
use super::lanes::LaneSettings;

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
