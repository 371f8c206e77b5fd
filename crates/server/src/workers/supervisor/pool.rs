//! The pool: the workers there are now, and how one joins it or leaves it while the server runs
//! (adaptive W, [`crate::workers::scaling`]).
//!
//! A worker joins once its process serves: until then it is listed as starting, is no capacity,
//! and requests keep waiting in the queue, not in it. It gets its slots and a manager
//! ([`super::manage`]) as the first workers do. A worker that fails to start is dropped from the
//! list and changes nothing else. A worker leaves by draining: its manager stops it taking
//! requests, lets it finish the ones it runs, stops its process, and the pool forgets it. The
//! queue counts the slots of the workers that serve and stay.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;

use super::boot::{put_in_service, start_process, Started};
use super::config::SupervisorConfig;
use super::manage::{manage, Channels, ReloadDone};
use crate::queue::Queue;
use crate::workers::recycle::Turns;
use crate::workers::slot::{Slot, SlotSettings};
use crate::workers::worker::Worker;
use crate::workers::zygote::Preloaded;

/// The workers, and what a worker joining needs.
pub struct Pool {
    members: Mutex<Vec<Member>>,
    /// The managers, waited for as the server stops.
    managers: Mutex<JoinSet<()>>,
    pub(super) config: Arc<SupervisorConfig>,
    queue: Arc<Queue>,
    slot_settings: Arc<SlotSettings>,
    socket_dir: PathBuf,
    stop: watch::Receiver<Option<Duration>>,
    pub(super) turns: Turns,
    pub(super) preloaded: Option<Arc<Preloaded>>,
}

/// A worker of the pool, and where it is in its membership.
struct Member {
    worker: Arc<Worker>,
    stage: Stage,
}

enum Stage {
    /// Its first process is starting: no capacity yet.
    Starting,
    /// Serving (or restarting after a crash); its manager listens on these.
    Serving { reload: mpsc::Sender<ReloadDone>, remove: watch::Sender<bool> },
    /// Draining away.
    Leaving,
}

/// A worker as scaling sees it.
pub struct Membership {
    pub worker: Arc<Worker>,
    /// Its first process still starting.
    pub starting: bool,
}

impl Pool {
    pub(super) fn new(
        config: Arc<SupervisorConfig>,
        queue: Arc<Queue>,
        slot_settings: Arc<SlotSettings>,
        socket_dir: PathBuf,
        stop: watch::Receiver<Option<Duration>>,
        preloaded: Option<Arc<Preloaded>>,
    ) -> Pool {
        Pool {
            members: Mutex::new(Vec::new()),
            managers: Mutex::new(JoinSet::new()),
            config,
            queue,
            slot_settings,
            socket_dir,
            stop,
            turns: Turns::default(),
            preloaded,
        }
    }

    /// Every worker listed: starting, serving or draining away.
    pub fn workers(&self) -> Vec<Arc<Worker>> {
        self.members().iter().map(|member| member.worker.clone()).collect()
    }

    /// The workers that serve or start, not those leaving.
    pub fn memberships(&self) -> Vec<Membership> {
        self.members()
            .iter()
            .filter_map(|member| match member.stage {
                Stage::Starting => Some(Membership { worker: member.worker.clone(), starting: true }),
                Stage::Serving { .. } => Some(Membership { worker: member.worker.clone(), starting: false }),
                Stage::Leaving => None,
            })
            .collect()
    }

    /// Lists a new worker as starting, at the lowest place free.
    pub(super) fn new_worker(&self) -> Arc<Worker> {
        let mut members = self.members();
        let index = (1..).find(|index| members.iter().all(|member| member.worker.index != *index)).expect("a place");
        let socket = self.socket_dir.join(format!("worker-{index}.sock"));
        let worker = Arc::new(Worker::new(index, socket, self.config.launch.transport()));
        members.push(Member { worker: worker.clone(), stage: Stage::Starting });
        members.sort_by_key(|member| member.worker.index);
        worker
    }

    /// Starts a worker's first process and has it join; the worker is dropped from the list if
    /// it does not start. Returns its index.
    pub(super) async fn add(self: &Arc<Self>) -> Result<usize, String> {
        let worker = self.new_worker();
        match start_process(&worker, &self.config, self.preloaded.as_deref(), 1).await {
            Ok(started) => {
                self.join(&worker, started);
                Ok(worker.index)
            }
            Err(err) => {
                self.forget(worker.index);
                Err(format!("worker {} {err}", worker.index))
            }
        }
    }

    /// Puts a started worker in service: its slots, its manager, and the queue's count of slots.
    pub(super) fn join(self: &Arc<Self>, worker: &Arc<Worker>, started: Started) {
        // A worker keeps the slots of its first process: a slot runs for the worker's life.
        let count = started.slots;
        worker.set_slots(count);
        let (process, _) = put_in_service(worker, 1, started, &self.config);
        for index in 0..count {
            tokio::spawn(Slot::new(worker.clone(), index, self.queue.clone(), self.slot_settings.clone()).run());
        }
        let (reload, reloads) = mpsc::channel(1);
        let (remove, removal) = watch::channel(false);
        let channels = Channels {
            stop: self.stop.clone(),
            reloads,
            removal,
            turns: self.turns.clone(),
            preloaded: self.preloaded.clone(),
        };
        if let Some(member) = self.members().iter_mut().find(|member| Arc::ptr_eq(&member.worker, worker)) {
            member.stage = Stage::Serving { reload, remove };
        }
        self.count_slots();
        let (pool, worker) = (self.clone(), worker.clone());
        let mut managers = self.managers.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        // Managers of workers gone are reaped as others join, so the set stays as long as the pool.
        while managers.try_join_next().is_some() {}
        managers.spawn(async move {
            manage(worker.clone(), process, pool.config.clone(), channels).await;
            pool.forget(worker.index);
        });
    }

    /// Has worker `index` drain and leave; false if it is not serving.
    pub(super) fn remove(&self, index: usize) -> bool {
        let mut members = self.members();
        let Some(member) = members.iter_mut().find(|member| member.worker.index == index) else { return false };
        let Stage::Serving { remove, .. } = std::mem::replace(&mut member.stage, Stage::Leaving) else {
            return false;
        };
        let _ = remove.send(true);
        drop(members);
        self.count_slots();
        true
    }

    /// Where to ask each serving worker's manager for a reload, in the order of the workers.
    pub(super) fn reloads(&self) -> Vec<(usize, mpsc::Sender<ReloadDone>)> {
        self.members()
            .iter()
            .filter_map(|member| match &member.stage {
                Stage::Serving { reload, .. } => Some((member.worker.index, reload.clone())),
                _ => None,
            })
            .collect()
    }

    /// Waits for every manager to end (the server stops).
    pub(super) async fn managers_ended(&self) {
        let mut managers = std::mem::take(&mut *self.managers.lock().unwrap_or_else(|poisoned| poisoned.into_inner()));
        while managers.join_next().await.is_some() {}
    }

    fn forget(&self, index: usize) {
        self.members().retain(|member| member.worker.index != index);
    }

    /// Tells the queue how many slots serve: those of the workers serving and staying.
    fn count_slots(&self) {
        let slots = self
            .members()
            .iter()
            .filter(|member| matches!(member.stage, Stage::Serving { .. }))
            .map(|member| member.worker.slots())
            .sum();
        self.queue.set_slots(slots);
    }

    fn members(&self) -> MutexGuard<'_, Vec<Member>> {
        self.members.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}
