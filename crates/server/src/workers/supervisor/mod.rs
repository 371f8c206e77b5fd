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
//! [`Supervisor::start`] starts the pool, as [`SupervisorConfig`] says; [`boot`] starts one process
//! and puts it in service; [`manage`] watches one worker for its whole life, with a handler for
//! each event (it exits, hangs, is due for recycling, is reloaded, the server stops), as
//! gunicorn's arbiter has one for each signal; [`reload`] replaces every worker in turn;
//! [`websockets`] closes workers' WebSockets and waits for them to go.

mod boot;
mod config;
mod manage;
mod reload;
#[cfg(test)]
mod tests;
mod websockets;

use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, bail, Context as _};
use tokio::sync::{mpsc, watch};
use tokio::task::{JoinHandle, JoinSet};
use tracing::info;

use crate::queue::Queue;
use crate::workers::recycle::{self, Turns};
use crate::workers::slot::{Slot, SlotSettings};
use crate::workers::worker::Worker;
use crate::workers::zygote::Preloaded;
use boot::{put_in_service, start_process, Started};
pub use config::SupervisorConfig;
use manage::{manage, Channels};
pub use reload::Reloader;
use websockets::close_websockets;

pub struct Supervisor {
    workers: Vec<Arc<Worker>>,
    reloader: Reloader,
    stop: watch::Sender<Option<Duration>>,
    managers: Vec<JoinHandle<()>>,
    /// Reads worker memory for `--max-worker-memory`; stopped with the supervisor.
    memory_watch: Option<JoinHandle<()>>,
    /// Holds the workers' sockets; removed when the supervisor goes.
    _socket_dir: tempfile::TempDir,
}

impl Supervisor {
    /// Starts every worker, waits until each listens, and starts their slots. Fails, stopping
    /// whatever did start, if any worker cannot start.
    pub async fn start(config: SupervisorConfig, queue: Arc<Queue>, slots: Arc<SlotSettings>) -> anyhow::Result<Self> {
        let socket_dir = tempfile::Builder::new()
            .prefix("headway-")
            .tempdir()
            .context("cannot create a directory for worker sockets")?;
        let workers: Vec<Arc<Worker>> = (1..=config.workers)
            .map(|index| {
                let socket = socket_dir.path().join(format!("worker-{index}.sock"));
                Arc::new(Worker::new(index, socket, config.launch.transport()))
            })
            .collect();
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

        let mut processes: Vec<Option<Started>> = (0..config.workers).map(|_| None).collect();
        // Unless a preloaded parent has imported the app already, the first worker starts alone:
        // an app that does not import (or a --cmd that does not listen) then fails once, with one
        // traceback, rather than W times at once with their lines interleaved.
        let mut rest = &workers[..];
        if preloaded.is_none() {
            let started =
                start_process(&workers[0], &config, None, 1).await.map_err(|err| anyhow!("worker 1 {err}"))?;
            processes[0] = Some(started);
            rest = &workers[1..];
        }
        let mut boots = JoinSet::new();
        for worker in rest {
            let (worker, config, preloaded) = (worker.clone(), config.clone(), preloaded.clone());
            boots.spawn(async move {
                let result = start_process(&worker, &config, preloaded.as_deref(), 1).await;
                (worker.index, result)
            });
        }
        let mut failures = Vec::new();
        while let Some(joined) = boots.join_next().await {
            let (index, result) = joined.context("worker start task failed")?;
            match result {
                Ok(started) => processes[index - 1] = Some(started),
                Err(err) => failures.push(format!("worker {index} {err}")),
            }
        }
        if !failures.is_empty() {
            for started in processes.iter_mut().flatten() {
                started.process.terminate(Duration::from_secs(1)).await;
            }
            failures.sort();
            bail!("{}", failures.join("; "));
        }

        let (stop, _) = watch::channel(None);
        let turns = Turns::default();
        let mut managers = Vec::with_capacity(workers.len());
        let mut reloads = Vec::with_capacity(workers.len());
        let mut total_slots = 0;
        for (worker, started) in workers.iter().zip(processes) {
            let started = started.expect("every worker started");
            // A worker keeps the slots of its first process: a slot runs for the server's life.
            let count = started.slots;
            worker.set_slots(count);
            let (process, _) = put_in_service(worker, 1, started, &config);
            for index in 0..count {
                tokio::spawn(Slot::new(worker.clone(), index, queue.clone(), slots.clone()).run());
            }
            total_slots += count;
            let (reload, reload_requests) = mpsc::channel(1);
            reloads.push(reload);
            let channels = Channels {
                stop: stop.subscribe(),
                reloads: reload_requests,
                turns: turns.clone(),
                preloaded: preloaded.clone(),
            };
            managers.push(tokio::spawn(manage(worker.clone(), process, config.clone(), channels)));
        }
        queue.set_slots(total_slots);
        let memory_watch =
            config.recycle.max_memory.map(|limit| tokio::spawn(recycle::watch_memory(workers.clone(), limit)));
        Ok(Supervisor {
            workers,
            reloader: Reloader { workers: reloads, turns, preloaded },
            stop,
            managers,
            memory_watch,
            _socket_dir: socket_dir,
        })
    }

    pub fn workers(&self) -> &[Arc<Worker>] {
        &self.workers
    }

    /// A handle that reloads: replaces the workers one at a time (for SIGHUP and `--reload`).
    pub fn reloader(&self) -> Reloader {
        self.reloader.clone()
    }

    /// Closes every open WebSocket (1001 to both sides) and waits, briefly, until all are gone.
    pub async fn close_websockets(&self) {
        close_websockets(&self.workers).await;
    }

    /// Stops every worker, giving each `grace` to exit after SIGTERM.
    pub async fn stop(self, grace: Duration) {
        if let Some(watch) = &self.memory_watch {
            watch.abort();
        }
        self.stop.send_replace(Some(grace));
        for manager in self.managers {
            let _ = manager.await;
        }
    }
}
