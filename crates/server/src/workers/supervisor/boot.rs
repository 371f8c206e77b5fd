//! Starting one process for a worker, on a socket of its own, and putting it in service once it
//! serves: new connections and the slots go to it from then on.

use std::sync::Arc;

use tokio::io::unix::AsyncFd;
use tokio::io::Interest;
use tracing::{info, warn};

use super::config::SupervisorConfig;
use crate::workers::affinity;
use crate::workers::hop_link::HopLink;
use crate::workers::launch::{BootError, Launch};
use crate::workers::process::{self, Process};
use crate::workers::worker::{Phase, Transport, Worker};
use crate::workers::zygote::Preloaded;

/// A process started for a worker, not yet serving: the process, its hop region's link for the
/// bundled worker, and the slots its kind of app takes.
pub(super) struct Started {
    pub(super) process: Process,
    link: Option<Arc<HopLink>>,
    pub(super) slots: usize,
    /// The bundled worker's kind of app, once it has said it; `None` for a `--cmd` server.
    asgi: Option<bool>,
}

/// Starts the process of `worker`'s generation `generation` on its own socket, and waits until
/// it serves.
pub(super) async fn start_process(
    worker: &Worker,
    config: &SupervisorConfig,
    preloaded: Option<&Preloaded>,
    generation: u64,
) -> Result<Started, BootError> {
    let socket = worker.socket.of(generation);
    let mut command = config.launch.command(socket, worker.index, config.slots, config.scaling.most());
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
pub(super) fn put_in_service(
    worker: &Worker,
    generation: u64,
    started: Started,
    config: &SupervisorConfig,
) -> (Process, Option<Arc<HopLink>>) {
    let Started { process, link, slots, asgi } = started;
    // The Rack worker says it takes WebSockets the way an ASGI one does: its launch names it.
    let kind = match asgi {
        Some(_) if matches!(config.launch, Launch::Ruby { .. }) => " of a Rack app",
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
