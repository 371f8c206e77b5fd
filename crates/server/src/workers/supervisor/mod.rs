//! The supervisor: starts W workers, keeps them running, replaces the ones that die or hang,
//! replaces them one at a time on a reload (SIGHUP), and stops them at shutdown (the words are
//! those of [`crate::workers`]).
//!
//! A worker that dies is restarted; only the requests it was running fail (502, from its
//! slots), because nothing else was ever inside it. A worker whose request outlives the
//! request timeout is presumed stuck (a thread cannot be interrupted from outside): it takes no
//! new requests, its other running requests finish, then it is replaced. A worker that crashes
//! again right after starting is restarted with growing pauses, so a broken deploy does not
//! spin the CPU.
//!
//! A reload replaces the workers one after the other, each the way gunicorn's SIGHUP does: the
//! new process starts while the old one serves, on a socket of its own; once it listens, new
//! requests go to it, the old one finishes what it runs and is stopped. So even a single worker
//! is never away: requests wait for a slot as always, not for a boot. If a new process cannot
//! start, the reload stops there and the old process, and the workers not yet replaced, keep the
//! old code. WebSockets open to a replaced process are closed (1001, going away, to both sides)
//! as the new one takes over.
//!
//! A worker due for recycling (`--max-requests`, `--max-worker-memory`; see `recycle`) is
//! replaced the same way as on a reload, when its turn comes: recycles and reloads replace one
//! worker at a time between them, so at most one process more than the workers runs. A stuck
//! worker is replaced the same way too, except that it takes no new request from the moment it
//! is found stuck.
//!
//! With `-w MIN:MAX` the pool grows and shrinks while the server runs: [`scale`] measures the
//! queue and the workers each interval and does what [`crate::workers::scaling`] decides, or what
//! a signal or the control address asks ([`Scaling`]); a worker added starts as on a restart
//! (forked from the preloaded parent with `--preload`), and one removed drains first, so no
//! request fails for it.
//!
//! [`Supervisor::start`] starts the pool, as [`SupervisorConfig`] says; [`pool`] holds the
//! workers there are and has one join or leave; [`boot`] starts one process and puts it in
//! service; [`manage`] watches one worker for its whole life, with a handler for each event (it
//! exits, hangs, is due for recycling, is reloaded, is removed, the server stops), as gunicorn's
//! arbiter has one for each signal; [`reload`] replaces every worker in turn; [`websockets`]
//! closes workers' WebSockets and waits for them to go.

mod boot;
mod config;
mod manage;
mod pool;
mod reload;
mod scale;
#[cfg(test)]
mod tests;
mod websockets;

use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, bail, Context as _};
use tokio::sync::watch;
use tokio::task::{JoinHandle, JoinSet};
use tracing::info;

use crate::queue::Queue;
use crate::workers::recycle;
use crate::workers::slot::SlotSettings;
use crate::workers::worker::Worker;
use crate::workers::zygote::Preloaded;
use boot::start_process;
pub use config::SupervisorConfig;
pub use pool::Pool;
pub use reload::Reloader;
pub use scale::Scaling;
use websockets::close_websockets;

pub struct Supervisor {
    pool: Arc<Pool>,
    scaling: Arc<Scaling>,
    stop: watch::Sender<Option<Duration>>,
    /// Reads worker memory for `--max-worker-memory`; stopped with the supervisor.
    memory_watch: Option<JoinHandle<()>>,
    /// The scaling task; stopped with the supervisor.
    scaler: JoinHandle<()>,
    /// Holds the workers' sockets; removed when the supervisor goes.
    _socket_dir: tempfile::TempDir,
}

impl Supervisor {
    /// Starts the first workers, waits until each listens, and starts their slots. Fails,
    /// stopping whatever did start, if any of them cannot start.
    pub async fn start(config: SupervisorConfig, queue: Arc<Queue>, slots: Arc<SlotSettings>) -> anyhow::Result<Self> {
        let socket_dir = tempfile::Builder::new()
            .prefix("headway-")
            .tempdir()
            .context("cannot create a directory for worker sockets")?;
        let preloaded = match &config.preload {
            Some(zygote) => Some(
                Preloaded::start(zygote.clone(), config.boot_timeout)
                    .await
                    .map_err(|err| anyhow!("the preloaded parent {err}"))?,
            ),
            None => None,
        };
        let config = Arc::new(config);
        if let Some(cpus) = &config.cpus {
            info!("worker processes pinned one to a CPU, in turn over CPUs {} (--cpu-affinity)", cpus.describe());
        }
        let (stop, _) = watch::channel(None);
        let pool = Arc::new(Pool::new(
            config.clone(),
            queue.clone(),
            slots,
            socket_dir.path().to_owned(),
            stop.subscribe(),
            preloaded.clone(),
        ));
        let workers: Vec<Arc<Worker>> = (0..config.scaling.start).map(|_| pool.new_worker()).collect();

        let mut processes = Vec::with_capacity(workers.len());
        // Unless a preloaded parent has imported the app already, the first worker starts alone:
        // an app that does not import (or a --cmd that does not listen) then fails once, with one
        // traceback, rather than W times at once with their lines interleaved.
        let mut rest = &workers[..];
        if preloaded.is_none() {
            let started =
                start_process(&workers[0], &config, None, 1).await.map_err(|err| anyhow!("worker 1 {err}"))?;
            processes.push((workers[0].clone(), started));
            rest = &workers[1..];
        }
        let mut boots = JoinSet::new();
        for worker in rest {
            let (worker, config, preloaded) = (worker.clone(), config.clone(), preloaded.clone());
            boots.spawn(async move {
                let result = start_process(&worker, &config, preloaded.as_deref(), 1).await;
                (worker, result)
            });
        }
        let mut failures = Vec::new();
        while let Some(joined) = boots.join_next().await {
            let (worker, result) = joined.context("worker start task failed")?;
            match result {
                Ok(started) => processes.push((worker, started)),
                Err(err) => failures.push(format!("worker {} {err}", worker.index)),
            }
        }
        if !failures.is_empty() {
            for (_, started) in &mut processes {
                started.process.terminate(Duration::from_secs(1)).await;
            }
            failures.sort();
            bail!("{}", failures.join("; "));
        }
        processes.sort_by_key(|(worker, _)| worker.index);
        for (worker, started) in processes {
            pool.join(&worker, started);
        }

        let memory_watch = config.recycle.max_memory.map(|limit| {
            let pool = pool.clone();
            tokio::spawn(recycle::watch_memory(move || pool.workers(), limit))
        });
        let (scaling, scaler) = scale::start(pool.clone(), queue);
        Ok(Supervisor { pool, scaling, stop, memory_watch, scaler, _socket_dir: socket_dir })
    }

    /// The pool, for the stats.
    pub fn pool(&self) -> Arc<Pool> {
        self.pool.clone()
    }

    /// Where W is asked to change by hand, and what it counts.
    pub fn scaling(&self) -> Arc<Scaling> {
        self.scaling.clone()
    }

    /// A handle that reloads: replaces the workers one at a time (for SIGHUP and `--reload`).
    pub fn reloader(&self) -> Reloader {
        Reloader { pool: self.pool.clone() }
    }

    /// Closes every open WebSocket (1001 to both sides) and waits, briefly, until all are gone.
    pub async fn close_websockets(&self) {
        close_websockets(&self.pool.workers()).await;
    }

    /// Stops every worker, giving each `grace` to exit after SIGTERM.
    pub async fn stop(self, grace: Duration) {
        self.scaler.abort();
        if let Some(watch) = &self.memory_watch {
            watch.abort();
        }
        self.stop.send_replace(Some(grace));
        self.pool.managers_ended().await;
    }
}
