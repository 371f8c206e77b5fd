//! The progress line: once a second, on stderr, answers so far, the last second's rate and
//! errors. Only drawn when stderr is a terminal, so pipes and logs get the report alone.

use std::io::{IsTerminal, Write};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::record::LiveCounters;

pub fn wanted() -> bool {
    std::io::stderr().is_terminal()
}

/// Redraws the line every second until aborted.
pub async fn draw(live: Arc<[LiveCounters]>, start: Instant) {
    let mut tick = tokio::time::interval_at((start + Duration::from_secs(1)).into(), Duration::from_secs(1));
    let mut last = 0;
    loop {
        tick.tick().await;
        let responses: u64 = live.iter().map(|c| c.responses.load(Ordering::Relaxed)).sum();
        let errors: u64 = live.iter().map(|c| c.errors.load(Ordering::Relaxed)).sum();
        let line = format!(
            "\r\x1b[2K  {:>4.0}s  {responses} responses  {} req/s  {errors} errors",
            start.elapsed().as_secs_f64(),
            responses - last,
        );
        last = responses;
        // A terminal that stopped accepting output is no reason to stop the run.
        let _ = std::io::stderr().write_all(line.as_bytes());
    }
}

/// Erases the line so the report starts on a clean line.
pub fn clear() {
    let _ = std::io::stderr().write_all(b"\r\x1b[2K");
}
