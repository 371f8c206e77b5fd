//! One worker's manager: watches its process for the worker's whole life and answers each event
//! with a handler of its own, as gunicorn's arbiter has one for each signal. Each handler says
//! what became of the process ([`Outcome`]); the loop then either watches the process that serves,
//! or starts another with growing pauses while none starts. The worker's life ends when the
//! server stops, or when the pool removes it ([`super::pool`]): it drains, then stops.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, oneshot, watch, OwnedSemaphorePermit};
use tracing::{info, warn};

use super::boot::{put_in_service, start_process};
use super::config::SupervisorConfig;
use super::websockets::WEBSOCKETS_CLOSE_TIME;
use crate::workers::launch::BootError;
use crate::workers::process::Process;
use crate::workers::recycle::Turns;
use crate::workers::replacement::Cause;
use crate::workers::worker::{Phase, Worker};
use crate::workers::zygote::Preloaded;

/// Tells whoever asked for a reload whether the new process started.
pub(super) type ReloadDone = oneshot::Sender<Result<(), String>>;

/// A worker that lives shorter than this after becoming ready is crash-looping.
const STABLE_AFTER: Duration = Duration::from_secs(1);
const FIRST_BACKOFF: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(10);

/// What a worker's manager listens to besides its process.
pub(super) struct Channels {
    pub(super) stop: watch::Receiver<Option<Duration>>,
    pub(super) reloads: mpsc::Receiver<ReloadDone>,
    /// Turns true when the pool removes the worker.
    pub(super) removal: watch::Receiver<bool>,
    pub(super) turns: Turns,
    pub(super) preloaded: Option<Arc<Preloaded>>,
}

/// What happened to a worker's process.
enum Event {
    Exited(String),
    Hung,
    Reload(ReloadDone),
    /// Due for recycling, and holding the turn to be replaced until the new process serves.
    Recycle(Cause, OwnedSemaphorePermit),
    Stop(Duration),
    /// The pool removes the worker.
    Remove,
}

/// What became of the worker's process after an event.
enum Outcome {
    /// A new process serves in place of the old one, replaced for this cause.
    Replaced(Cause),
    /// The process is gone, for this cause, and none serves: another must start.
    Gone(Cause),
    /// The new process did not start: the one in service serves on.
    Kept,
}

/// One worker, its process in service, and the state of its restarts.
struct Manager {
    worker: Arc<Worker>,
    process: Process,
    config: Arc<SupervisorConfig>,
    channels: Channels,
    generation: u64,
    backoff: Duration,
    /// A recycle whose new process did not start is tried again after a pause, not at once.
    recycle_again_at: Option<tokio::time::Instant>,
}

/// Watches one worker for its whole life.
pub(super) async fn manage(worker: Arc<Worker>, process: Process, config: Arc<SupervisorConfig>, channels: Channels) {
    let mut manager =
        Manager { worker, process, config, channels, generation: 1, backoff: Duration::ZERO, recycle_again_at: None };
    loop {
        let ready_at = Instant::now();
        let outcome = match manager.next_event().await {
            Event::Stop(grace) => return manager.on_stop(grace).await,
            Event::Remove => return manager.on_remove().await,
            Event::Exited(status) => manager.on_exit(&status),
            Event::Hung => manager.on_hung().await,
            Event::Reload(done) => manager.on_reload(done).await,
            Event::Recycle(cause, _turn) => manager.on_recycle(cause).await,
        };
        match outcome {
            Outcome::Kept => {}
            Outcome::Replaced(cause) => manager.settle_backoff(cause, ready_at),
            Outcome::Gone(cause) => {
                manager.settle_backoff(cause, ready_at);
                count_replacement(&manager.worker, cause);
                if !manager.restart().await {
                    return;
                }
            }
        }
    }
}

impl Manager {
    /// Waits for the next thing that happens to the worker's process.
    async fn next_event(&mut self) -> Event {
        let (worker, turns, recycle_again_at) = (&self.worker, &self.channels.turns, self.recycle_again_at);
        let due = async {
            let cause = worker.lifetime.due().await;
            if let Some(at) = recycle_again_at {
                tokio::time::sleep_until(at).await;
            }
            (cause, turns.take().await)
        };
        let (stop, removal) = (&mut self.channels.stop, &mut self.channels.removal);
        tokio::select! {
            Ok(_) = removal.wait_for(|removed| *removed) => Event::Remove,
            status = self.process.exited() => Event::Exited(status),
            () = worker.hung(self.generation) => Event::Hung,
            Some(done) = self.channels.reloads.recv() => Event::Reload(done),
            (cause, turn) = due => Event::Recycle(cause, turn),
            grace = stop.wait_for(Option::is_some) => Event::Stop(grace.ok().and_then(|g| *g).unwrap_or_default()),
        }
    }

    /// The server stops: so does the process, given `grace` to exit after SIGTERM.
    async fn on_stop(&mut self, grace: Duration) {
        self.worker.set_phase(Phase::Stopped);
        self.process.terminate(grace).await;
        self.worker.process_gone();
    }

    /// The pool removes the worker: it takes no new requests, finishes the ones it runs (up to
    /// the request timeout, as on a reload), and stops.
    async fn on_remove(&mut self) {
        let worker = &self.worker;
        worker.set_phase(Phase::Draining);
        info!("worker {} (pid {}) draining, to leave the pool", worker.index, self.process.pid);
        worker.close_websockets();
        retire(worker, &mut self.process, self.generation, self.config.request_timeout, self.config.request_timeout)
            .await;
        worker.set_phase(Phase::Stopped);
        worker.process_gone();
        info!("worker {} left the pool", worker.index);
    }

    /// The process exited on its own.
    fn on_exit(&mut self, status: &str) -> Outcome {
        let worker = &self.worker;
        worker.set_phase(Phase::Starting);
        self.process.signal(libc::SIGKILL); // anything the worker left in its group
        warn!("worker {} (pid {}) exited ({status}); restarting it", worker.index, self.process.pid);
        worker.process_gone();
        Outcome::Gone(Cause::Crash)
    }

    /// A request outlived the timeout: the process is stuck, and replaced.
    async fn on_hung(&mut self) -> Outcome {
        // It takes nothing new from now on; its other requests may still finish.
        self.worker.set_phase(Phase::Draining);
        warn!("worker {} (pid {}) is stuck; replacing it", self.worker.index, self.process.pid);
        let grace = Duration::from_secs(1);
        match self.replace(Cause::Timeout, grace).await {
            Ok(()) => Outcome::Replaced(Cause::Timeout),
            Err(err) => {
                let worker = &self.worker;
                warn!("worker {} {err}; stopping the stuck process first", worker.index);
                worker.close_websockets();
                retire(worker, &mut self.process, self.generation, self.config.request_timeout, grace).await;
                worker.process_gone();
                Outcome::Gone(Cause::Timeout)
            }
        }
    }

    /// A reload: a new process for the new code, or the old one serves on if it does not start.
    async fn on_reload(&mut self, done: ReloadDone) -> Outcome {
        info!("worker {} (pid {}) reloading", self.worker.index, self.process.pid);
        let replaced = self.replace(Cause::Reload, self.config.request_timeout).await;
        let _ = done.send(replaced.as_ref().map(|_| ()).map_err(ToString::to_string));
        match replaced {
            Ok(()) => Outcome::Replaced(Cause::Reload),
            Err(_) => Outcome::Kept, // the old process keeps serving the old code
        }
    }

    /// Due for recycling: a new process, or the old one serves on and it is tried again later.
    async fn on_recycle(&mut self, cause: Cause) -> Outcome {
        info!("worker {} (pid {}) recycling ({})", self.worker.index, self.process.pid, cause.label());
        if let Err(err) = self.replace(cause, self.config.request_timeout).await {
            let pause = (self.backoff * 2).clamp(FIRST_BACKOFF, MAX_BACKOFF);
            warn!("worker {} {err}; the process in service stays, recycling again in {pause:?}", self.worker.index);
            self.backoff = pause;
            self.recycle_again_at = Some(tokio::time::Instant::now() + pause);
            return Outcome::Kept;
        }
        self.recycle_again_at = None;
        Outcome::Replaced(cause)
    }

    /// The pause before the next start: growing while processes fail soon after they start.
    fn settle_backoff(&mut self, cause: Cause, ready_at: Instant) {
        self.backoff = if cause.is_failure() && ready_at.elapsed() < STABLE_AFTER {
            (self.backoff * 2).clamp(FIRST_BACKOFF, MAX_BACKOFF)
        } else {
            Duration::ZERO
        };
    }

    /// The process is gone and nothing serves: starts another, with growing pauses while none
    /// starts. False if the server stops first.
    async fn restart(&mut self) -> bool {
        let worker = &self.worker;
        worker.set_pid(0);
        let preloaded = self.channels.preloaded.as_deref();
        let started = loop {
            if pause_or_leave(self.backoff, &mut self.channels.stop, &mut self.channels.removal).await {
                worker.set_phase(Phase::Stopped);
                return false;
            }
            match start_process(worker, &self.config, preloaded, self.generation + 1).await {
                Ok(started) => break started,
                Err(err) => {
                    self.backoff = (self.backoff * 2).clamp(FIRST_BACKOFF, MAX_BACKOFF);
                    warn!("worker {} {err}; trying again in {:?}", worker.index, self.backoff);
                }
            }
        };
        self.generation += 1;
        self.process = put_in_service(worker, self.generation, started, &self.config).0;
        true
    }

    /// Replaces the worker's process while it is still there, for `cause`: starts the next one,
    /// puts it in service once it serves, then stops the old one when no slot runs a request on
    /// it (given `grace` to exit after SIGTERM). Fails, leaving the old process as it was, if the
    /// new one does not start.
    async fn replace(&mut self, cause: Cause, grace: Duration) -> Result<(), BootError> {
        let (worker, config) = (&self.worker, &self.config);
        let next = self.generation + 1;
        let started = start_process(worker, config, self.channels.preloaded.as_deref(), next).await?;
        // Its WebSockets close now, before any can open to the new process (which would be told too).
        worker.close_websockets();
        count_replacement(worker, cause);
        let (new, replaced_link) = put_in_service(worker, next, started, config);
        let mut old = std::mem::replace(&mut self.process, new);
        retire(worker, &mut old, self.generation, config.request_timeout, grace).await;
        if let Some(link) = replaced_link {
            link.mark_gone();
        }
        self.generation = next;
        Ok(())
    }
}

/// Counts a replacement of the worker's process (with the restarts, if it failed).
fn count_replacement(worker: &Worker, cause: Cause) {
    worker.recycles.count(cause);
    if cause.is_failure() {
        worker.restarts.fetch_add(1, Ordering::Relaxed);
    }
}

/// Stops the worker's process of `generation` once no slot is linked to it (up to `limit`) and
/// the WebSockets told to close have closed (a few seconds at most: the count is the worker's,
/// and may hold new ones), giving it `grace` to exit after SIGTERM.
async fn retire(worker: &Worker, process: &mut Process, generation: u64, limit: Duration, grace: Duration) {
    let _ = tokio::time::timeout(limit, worker.socket.unlinked(generation)).await;
    let _ = tokio::time::timeout(WEBSOCKETS_CLOSE_TIME, worker.websockets.zero()).await;
    process.terminate(grace).await;
}

/// Sleeps for `pause`; returns true if a stop or the worker's removal was requested meanwhile
/// (or before).
async fn pause_or_leave(
    pause: Duration,
    stop: &mut watch::Receiver<Option<Duration>>,
    removal: &mut watch::Receiver<bool>,
) -> bool {
    if stop.borrow().is_some() || *removal.borrow() {
        return true;
    }
    let leave = async {
        tokio::select! {
            _ = stop.wait_for(Option::is_some) => {}
            Ok(_) = removal.wait_for(|removed| *removed) => {}
        }
    };
    tokio::time::timeout(pause, leave).await.is_ok()
}
