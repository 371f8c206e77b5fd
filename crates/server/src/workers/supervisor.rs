//! The supervisor: starts W workers, keeps them running, replaces the ones that die or hang,
//! restarts them one at a time on reload (SIGHUP), and stops them at shutdown.
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

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context as _};
use tokio::io::unix::AsyncFd;
use tokio::io::Interest;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::{JoinHandle, JoinSet};
use tracing::{info, warn};

use crate::queue::Queue;
use crate::workers::affinity::{self, WorkerCpus};
use crate::workers::launch::{BootError, Launch, TakesWebSockets};
use crate::workers::lifetime::{Cause, RecyclePolicy};
use crate::workers::process::{self, Process};
use crate::workers::recycle::{self, Turns};
use crate::workers::region::HopLink;
use crate::workers::slot::{Slot, SlotSettings};
use crate::workers::slots_per_worker::SlotsPerWorker;
use crate::workers::worker::{Phase, Transport, Worker};
use crate::workers::zygote::{Preloaded, ZygoteConfig};

/// A worker that lives shorter than this after becoming ready is crash-looping.
const STABLE_AFTER: Duration = Duration::from_secs(1);
const FIRST_BACKOFF: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(10);
/// How long to wait for a worker's WebSockets to close. The front closes one within two seconds
/// (`front::websocket`); the rest is margin.
const WEBSOCKETS_CLOSE_TIME: Duration = Duration::from_secs(3);

#[derive(Debug, Clone)]
pub struct SupervisorConfig {
    pub workers: usize,
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

    /// A handle that restarts the workers one at a time (for SIGHUP).
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

/// A process started for a worker, not yet serving: the process, its hop region's link for the
/// bundled worker, and the slots its kind of app takes.
struct Started {
    process: Process,
    link: Option<Arc<HopLink>>,
    slots: usize,
    /// The bundled worker's kind of app, once it has said it; `None` for a `--cmd` server.
    asgi: Option<bool>,
}

/// Starts the process of `worker`'s generation `generation` on its own socket, and waits until
/// it serves.
async fn start_process(
    worker: &Worker,
    config: &SupervisorConfig,
    preloaded: Option<&Preloaded>,
    generation: u64,
) -> Result<Started, BootError> {
    let socket = worker.socket.of(generation);
    let mut command = config.launch.command(socket, worker.index, config.slots, config.workers);
    let cpu = config.cpus.as_ref().map(|cpus| cpus.of(worker.index));
    if let Some(cpu) = cpu {
        affinity::pin_child(&mut command, cpu);
    }
    // A socket file left by a previous process would make some servers refuse to bind (a hop
    // worker listens there too, for WebSocket handshakes).
    let _ = std::fs::remove_file(socket);
    match &worker.transport {
        Transport::Http => {
            let process =
                process::boot(&mut command, worker.index, process::until_listening(socket), config.boot_timeout)
                    .await?;
            Ok(Started { process, link: None, slots: config.slots.threads, asgi: None })
        }
        Transport::Hop(_) => {
            // Made for the most slots a worker may have: the worker says its kind once it serves.
            let end = HopLink::prepare(config.slots.most(), config.max_head).map_err(BootError::Spawn)?;
            process::hand_over(&mut command, &end);
            // SAFETY: the doorbell's descriptor belongs to `end`, which the AsyncFd owns (through
            // the Arc) for its whole life.
            let doorbell = unsafe { AsyncFd::register_with_interest(end, Interest::READABLE) }
                .map_err(|err| BootError::Spawn(err.into()))?;
            let ready = HopLink::until_ready(&doorbell);
            let process = match preloaded {
                Some(preloaded) => {
                    let forked = preloaded.fork(worker.index, socket, cpu, doorbell.get_ref()).await?;
                    process::until_ready(Process::forked(forked), ready, config.boot_timeout).await?
                }
                None => process::boot(&mut command, worker.index, ready, config.boot_timeout).await?,
            };
            // The bundled worker takes WebSockets exactly when its app is ASGI.
            let asgi = doorbell.get_ref().worker_takes_websockets();
            config.takes_websockets.set(asgi);
            let slots = config.slots.of(asgi);
            Ok(Started { process, link: Some(HopLink::start(doorbell, generation)), slots, asgi: Some(asgi) })
        }
    }
}

/// Makes `started` the worker's process of `generation`: new connections and the slots go to
/// it from now on. Returns the process, and the hop link of the one it replaces.
fn put_in_service(
    worker: &Worker,
    generation: u64,
    started: Started,
    config: &SupervisorConfig,
) -> (Process, Option<Arc<HopLink>>) {
    let Started { process, link, slots, asgi } = started;
    let kind = match asgi {
        Some(true) => " of an ASGI app",
        Some(false) => " of a WSGI app",
        None => "",
    };
    info!("worker {} (pid {}) listening, {slots} slot(s){kind}", worker.index, process.pid);
    if slots != worker.slots() {
        warn!(
            "worker {}'s app now takes {slots} slots (-t auto, another kind of app): it keeps the {} of its first \
             start until headway restarts",
            worker.index,
            worker.slots()
        );
    }
    worker.socket.serve_from(generation);
    let replaced = worker.install_link(link);
    worker.set_pid(process.pid);
    worker.lifetime.begin(&config.recycle);
    worker.set_phase(Phase::Ready { generation });
    (process, replaced)
}

/// Restarts workers one at a time; see the module comment.
#[derive(Clone)]
pub struct Reloader {
    /// Per worker: where to ask its manager for a reload, and get the result.
    workers: Vec<mpsc::Sender<ReloadDone>>,
    /// Shared with recycling, so that a reload never takes a worker away while a recycle has
    /// another one away.
    turns: Turns,
    /// With `--preload`, a reload imports the new code in a new parent first.
    preloaded: Option<Arc<Preloaded>>,
}

/// Tells whoever asked for a reload whether the new process started.
type ReloadDone = oneshot::Sender<Result<(), String>>;

impl Reloader {
    /// Replaces every worker in turn. Stops at the first worker whose new process does not
    /// start, leaving the rest on the old code.
    pub async fn reload(&self) -> anyhow::Result<()> {
        if let Some(preloaded) = &self.preloaded {
            preloaded
                .renew()
                .await
                .map_err(|err| anyhow::anyhow!("a new preloaded parent {err}; the workers keep the old code"))?;
        }
        for (index, manager) in self.workers.iter().enumerate() {
            let _turn = self.turns.take().await;
            let (done, result) = oneshot::channel();
            manager.send(done).await.map_err(|_| anyhow::anyhow!("the server is stopping"))?;
            match result.await {
                Ok(Ok(())) => {}
                Ok(Err(err)) => bail!("worker {} {err}; the workers after it keep the old code", index + 1),
                Err(_) => bail!("the server is stopping"),
            }
        }
        Ok(())
    }
}

/// What a worker's manager listens to besides its process.
struct Channels {
    stop: watch::Receiver<Option<Duration>>,
    reloads: mpsc::Receiver<ReloadDone>,
    turns: Turns,
    preloaded: Option<Arc<Preloaded>>,
}

/// Why a worker's process is being replaced.
enum Event {
    Exited(String),
    Hung,
    Reload(ReloadDone),
    /// Due for recycling, and holding the turn to be replaced until the new process serves.
    Recycle(Cause, tokio::sync::OwnedSemaphorePermit),
    Stop(Duration),
}

/// Watches one worker for its whole life.
async fn manage(worker: Arc<Worker>, mut process: Process, config: Arc<SupervisorConfig>, channels: Channels) {
    let Channels { mut stop, mut reloads, turns, preloaded } = channels;
    let preloaded = preloaded.as_deref();
    let mut generation = 1;
    let mut backoff = Duration::ZERO;
    // A recycle whose new process did not start is tried again after a pause, not at once.
    let mut recycle_again_at = None;
    loop {
        let ready_at = Instant::now();
        let due = async {
            let cause = worker.lifetime.due().await;
            if let Some(at) = recycle_again_at {
                tokio::time::sleep_until(at).await;
            }
            (cause, turns.take().await)
        };
        let event = tokio::select! {
            status = process.exited() => Event::Exited(status),
            () = worker.hung(generation) => Event::Hung,
            Some(done) = reloads.recv() => Event::Reload(done),
            (cause, turn) = due => Event::Recycle(cause, turn),
            grace = stop.wait_for(Option::is_some) => Event::Stop(grace.ok().and_then(|g| *g).unwrap_or_default()),
        };
        let (cause, replaced) = match event {
            Event::Stop(grace) => {
                worker.set_phase(Phase::Stopped);
                process.terminate(grace).await;
                worker.process_gone();
                return;
            }
            Event::Exited(status) => {
                worker.set_phase(Phase::Starting);
                process.signal(libc::SIGKILL); // anything the worker left in its group
                warn!("worker {} (pid {}) exited ({status}); restarting it", worker.index, process.pid);
                worker.process_gone();
                (Cause::Crash, None)
            }
            Event::Hung => {
                // It takes nothing new from now on; its other requests may still finish.
                worker.set_phase(Phase::Draining);
                warn!("worker {} (pid {}) is stuck; replacing it", worker.index, process.pid);
                let grace = Duration::from_secs(1);
                let replaced =
                    replace(&worker, &mut process, &mut generation, &config, preloaded, Cause::Timeout, grace);
                match replaced.await {
                    Ok(()) => (Cause::Timeout, Some(())),
                    Err(err) => {
                        warn!("worker {} {err}; stopping the stuck process first", worker.index);
                        worker.close_websockets();
                        retire(&worker, &mut process, generation, config.request_timeout, Duration::from_secs(1)).await;
                        worker.process_gone();
                        (Cause::Timeout, None)
                    }
                }
            }
            Event::Reload(done) => {
                info!("worker {} (pid {}) reloading", worker.index, process.pid);
                let grace = config.request_timeout;
                let replaced =
                    replace(&worker, &mut process, &mut generation, &config, preloaded, Cause::Reload, grace).await;
                let _ = done.send(replaced.as_ref().map(|_| ()).map_err(ToString::to_string));
                if replaced.is_err() {
                    continue; // the old process keeps serving the old code
                }
                (Cause::Reload, Some(()))
            }
            Event::Recycle(cause, _turn) => {
                info!("worker {} (pid {}) recycling ({})", worker.index, process.pid, cause.label());
                let grace = config.request_timeout;
                let replaced = replace(&worker, &mut process, &mut generation, &config, preloaded, cause, grace).await;
                if let Err(err) = replaced {
                    let pause = (backoff * 2).clamp(FIRST_BACKOFF, MAX_BACKOFF);
                    warn!("worker {} {err}; the process in service stays, recycling again in {pause:?}", worker.index);
                    backoff = pause;
                    recycle_again_at = Some(tokio::time::Instant::now() + pause);
                    continue;
                }
                recycle_again_at = None;
                (cause, Some(()))
            }
        };
        backoff = if !cause.is_failure() {
            Duration::ZERO
        } else if ready_at.elapsed() < STABLE_AFTER {
            (backoff * 2).clamp(FIRST_BACKOFF, MAX_BACKOFF)
        } else {
            Duration::ZERO
        };
        if replaced.is_some() {
            continue;
        }
        count_replacement(&worker, cause);

        // The process is gone and nothing serves: start another, with growing pauses while
        // none starts.
        worker.set_pid(0);
        let started = loop {
            if pause_or_stop(backoff, &mut stop).await {
                worker.set_phase(Phase::Stopped);
                return;
            }
            match start_process(&worker, &config, preloaded, generation + 1).await {
                Ok(started) => break started,
                Err(err) => {
                    backoff = (backoff * 2).clamp(FIRST_BACKOFF, MAX_BACKOFF);
                    warn!("worker {} {err}; trying again in {backoff:?}", worker.index);
                }
            }
        };
        generation += 1;
        process = put_in_service(&worker, generation, started, &config).0;
    }
}

/// Replaces the worker's process of `generation` while it is still there, for `cause`: starts
/// the next one, puts it in service once it serves, then stops the old one when no slot runs a
/// request on it (given `grace` to exit after SIGTERM). Fails, leaving the old process as it
/// was, if the new one does not start.
async fn replace(
    worker: &Worker,
    process: &mut Process,
    generation: &mut u64,
    config: &SupervisorConfig,
    preloaded: Option<&Preloaded>,
    cause: Cause,
    grace: Duration,
) -> Result<(), BootError> {
    let next = *generation + 1;
    let started = start_process(worker, config, preloaded, next).await?;
    // Its WebSockets close now, before any can open to the new process (which would be told too).
    worker.close_websockets();
    count_replacement(worker, cause);
    let (new, replaced_link) = put_in_service(worker, next, started, config);
    let mut old = std::mem::replace(process, new);
    retire(worker, &mut old, *generation, config.request_timeout, grace).await;
    if let Some(link) = replaced_link {
        link.mark_gone();
    }
    *generation = next;
    Ok(())
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

/// Has the WebSockets open to `workers` closed, and waits until they are gone (a few seconds at
/// most).
async fn close_websockets(workers: &[Arc<Worker>]) {
    workers.iter().for_each(|worker| worker.close_websockets());
    let _ = tokio::time::timeout(WEBSOCKETS_CLOSE_TIME, async {
        for worker in workers {
            worker.websockets.zero().await;
        }
    })
    .await;
}

/// Sleeps for `pause`; returns true if a stop was requested meanwhile (or before).
async fn pause_or_stop(pause: Duration, stop: &mut watch::Receiver<Option<Duration>>) -> bool {
    if stop.borrow().is_some() {
        return true;
    }
    tokio::time::timeout(pause, stop.wait_for(Option::is_some)).await.is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::queue::job::{Failure, Outcome, RequestBody};
    use bytes::Bytes;

    /// A worker in a few lines of Python: answers every request with its pid, exits when asked
    /// to (`/exit`), as a crashing app would, and never answers `/hang`. It takes a while to
    /// start once a file `slow` is next to it.
    const WORKER: &str = r#"
import os, socket, threading, time
if os.path.exists(os.path.join(os.path.dirname(__file__), "slow")):
    time.sleep(1.5)
listener = socket.socket(socket.AF_UNIX)
listener.bind(os.environ["HEADWAY_SOCKET"])
listener.listen()

def serve(connection):
    data = b""
    while True:
        chunk = connection.recv(4096)
        if not chunk:
            break
        data += chunk
        while b"\r\n\r\n" in data:
            head, _, data = data.partition(b"\r\n\r\n")
            if b" /exit " in head:
                os._exit(3)
            if b" /hang " in head:
                time.sleep(3600)
            body = str(os.getpid()).encode()
            connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))

while True:
    threading.Thread(target=serve, args=(listener.accept()[0],), daemon=True).start()
"#;

    async fn start() -> (Supervisor, Arc<Queue>, tempfile::TempDir) {
        start_with(RecyclePolicy::default()).await
    }

    async fn start_with(recycle: RecyclePolicy) -> (Supervisor, Arc<Queue>, tempfile::TempDir) {
        start_with_slots(recycle, 1, Duration::from_secs(30)).await
    }

    async fn start_with_slots(
        recycle: RecyclePolicy,
        threads: usize,
        request_timeout: Duration,
    ) -> (Supervisor, Arc<Queue>, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("worker.py");
        std::fs::write(&script, WORKER).unwrap();
        let config = SupervisorConfig {
            workers: 1,
            slots: SlotsPerWorker::fixed(threads),
            launch: Launch::Command(format!("exec python3 {}", script.display())),
            boot_timeout: Duration::from_secs(30),
            request_timeout,
            max_head: 8192,
            recycle,
            preload: None,
            takes_websockets: TakesWebSockets::new(true),
            cpus: None,
        };
        let queue = Queue::new(10, Duration::from_secs(30), threads);
        let slots =
            Arc::new(SlotSettings { request_timeout, response_spool: crate::spool::SpoolLimits::unbounded(64 * 1024) });
        (Supervisor::start(config, queue.clone(), slots).await.expect("the worker starts"), queue, dir)
    }

    /// The pid that answered `path`, or the failure.
    async fn request(queue: &Arc<Queue>, path: &str) -> Result<u32, Failure> {
        let request = http::Request::builder()
            .uri(path)
            .header(http::header::HOST, "test")
            .body(RequestBody::Memory(Bytes::new()))
            .unwrap();
        match queue.enqueue(request).outcome().await {
            Outcome::Response(response) => {
                let crate::queue::job::ResponseBody::Complete(body) = response.body else { panic!("a short body") };
                Ok(std::str::from_utf8(&body).unwrap().parse().unwrap())
            }
            Outcome::Failed(failure) => Err(failure),
            Outcome::Upgraded(_) => panic!("no WebSocket was asked for"),
        }
    }

    #[tokio::test]
    async fn a_worker_that_dies_fails_its_request_and_is_restarted() {
        let (supervisor, queue, _dir) = start().await;
        let worker = supervisor.workers()[0].clone();
        let first = request(&queue, "/").await.unwrap();
        assert_eq!(first, worker.pid());
        assert_eq!(request(&queue, "/exit").await, Err(Failure::WorkerFailed));
        // The request after the crash waits in the queue for the new process.
        let second = request(&queue, "/").await.unwrap();
        assert_ne!(second, first);
        assert_eq!(worker.restarts.load(Ordering::Relaxed), 1);
        supervisor.stop(Duration::from_secs(1)).await;
        assert_eq!(worker.phase(), Phase::Stopped);
    }

    #[tokio::test]
    async fn a_reload_replaces_the_worker_with_no_failed_request() {
        let (supervisor, queue, _dir) = start().await;
        let before = request(&queue, "/").await.unwrap();
        let reloader = supervisor.reloader();
        let reload = tokio::spawn(async move { reloader.reload().await });
        // Requests made during the reload wait for the new process; none fails.
        let during = request(&queue, "/").await;
        reload.await.unwrap().expect("the reload completes");
        let after = request(&queue, "/").await.unwrap();
        assert!(during.is_ok(), "{during:?}");
        assert_ne!(after, before);
        assert_eq!(supervisor.workers()[0].restarts.load(Ordering::Relaxed), 0, "a reload is not a restart");
        supervisor.stop(Duration::from_secs(1)).await;
    }

    #[tokio::test]
    async fn a_worker_that_served_its_max_requests_is_recycled_with_no_failed_request() {
        let policy = RecyclePolicy { max_requests: 3, ..RecyclePolicy::default() };
        let (supervisor, queue, _dir) = start_with(policy).await;
        let mut pids: Vec<u32> = Vec::new();
        // Until a third process has answered (a process answers on while its replacement starts).
        while pids.chunk_by(|a, b| a == b).count() < 3 {
            assert!(pids.len() < 100_000, "no recycle");
            pids.push(request(&queue, "/").await.expect("no request fails"));
        }
        let worker = supervisor.workers()[0].clone();
        let processes: Vec<&[u32]> = pids.chunk_by(|a, b| a == b).collect();
        // Each process served its three, and went on serving while its replacement started.
        assert!(processes.len() >= 2, "{pids:?}");
        assert!(processes[..processes.len() - 1].iter().all(|served| served.len() >= 3), "{pids:?}");
        let recycled = worker.recycles.snapshot().max_requests;
        assert!(recycled as usize >= processes.len() - 1, "{recycled} for {pids:?}");
        assert_eq!(worker.restarts.load(Ordering::Relaxed), 0, "a recycle is not a restart");
        supervisor.stop(Duration::from_secs(1)).await;
    }

    #[tokio::test]
    async fn a_reload_of_the_only_worker_serves_from_the_old_process_until_the_new_one_listens() {
        let (supervisor, queue, dir) = start().await;
        let old = request(&queue, "/").await.unwrap();
        std::fs::write(dir.path().join("slow"), "").unwrap(); // the next process boots for 1.5 s
        let reloader = supervisor.reloader();
        let reload = tokio::spawn(async move { reloader.reload().await });
        let mut answered = Vec::new();
        while !reload.is_finished() {
            answered.push(request(&queue, "/").await.expect("no request fails during a reload"));
        }
        reload.await.unwrap().expect("the reload completes");
        let new = request(&queue, "/").await.unwrap();
        assert_ne!(new, old);
        // In order: the old process answered while the new one booted, then the new one.
        let by_process: Vec<u32> = answered.chunk_by(|a, b| a == b).map(|run| run[0]).collect();
        assert!(by_process == [old] || by_process == [old, new], "{by_process:?}");
        assert!(answered.iter().filter(|&&pid| pid == old).count() >= 3, "the old process served during the boot");
        supervisor.stop(Duration::from_secs(1)).await;
    }

    #[tokio::test]
    async fn a_stuck_worker_is_replaced_once_however_many_of_its_requests_time_out() {
        let (supervisor, queue, _dir) = start_with_slots(RecyclePolicy::default(), 2, Duration::from_millis(500)).await;
        let worker = supervisor.workers()[0].clone();
        let stuck = worker.pid();
        let (first, second) = tokio::join!(request(&queue, "/hang"), request(&queue, "/hang"));
        assert_eq!((first, second), (Err(Failure::WorkerTimeout), Err(Failure::WorkerTimeout)));
        let fresh = request(&queue, "/").await.unwrap();
        assert_ne!(fresh, stuck);
        // Long enough for a stale report to have killed it, as it once did.
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(request(&queue, "/").await.unwrap(), fresh, "the fresh process still serves");
        assert_eq!(worker.recycles.snapshot().timeout, 1);
        assert_eq!(worker.restarts.load(Ordering::Relaxed), 1);
        supervisor.stop(Duration::from_secs(1)).await;
    }
}
