//! `headway serve`: puts the parts together and runs them until a signal says stop.
//!
//! Start-up: bind every address first (a port in use is an error before any worker starts),
//! start the workers and wait until each listens, then accept. Shutdown on SIGTERM or SIGINT:
//! stop accepting, let idle connections go, finish every queued and running request (bounded
//! by --graceful-timeout), close the open WebSockets (1001 to both sides), then stop the workers
//! and exit 0. A second signal skips the wait.
//! SIGHUP restarts the workers one at a time (new code, same sockets and queue).

use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::watch;
use tracing::{info, warn};

use crate::access_log::AccessLog;
use crate::config::Config;
use crate::control;
use crate::front::listener::Listener;
use crate::front::Front;
use crate::queue::Queue;
use crate::stats::Stats;
use crate::supervisor::Supervisor;
use crate::worker::Launch;

pub async fn run(config: Config) -> anyhow::Result<ExitCode> {
    let mut listeners = Vec::with_capacity(config.binds.len());
    for bind in &config.binds {
        listeners.push(Listener::bind(bind).with_context(|| format!("cannot listen on {bind}"))?);
    }
    let control_listener = match &config.control {
        Some(bind) => Some(Listener::bind(bind).with_context(|| format!("cannot listen on --control {bind}"))?),
        None => None,
    };
    let access_log = match &config.access_log {
        Some(path) => {
            Some(AccessLog::open(path).with_context(|| format!("cannot open --access-log {}", path.display()))?)
        }
        None => None,
    };
    // Signals are caught from here on, so a stop during a slow boot is orderly too.
    let mut terminate = signal(SignalKind::terminate())?;
    let mut interrupt = signal(SignalKind::interrupt())?;
    let mut hangup = signal(SignalKind::hangup())?;

    let stats = Arc::new(Stats::default());
    let slots = config.supervisor.workers * config.supervisor.threads;
    let queue = Arc::new(Queue::new(config.max_queue, config.queue_timeout, slots));
    let threads = config.supervisor.threads;
    let what = match &config.supervisor.launch {
        Launch::Python { app, .. } => app.clone().unwrap_or_else(|| "the demo app".to_owned()),
        Launch::Command(command) => format!("`{command}`"),
    };
    info!("starting {} worker(s) x {threads} slot(s) for {what}", config.supervisor.workers);
    let supervisor = tokio::select! {
        started = Supervisor::start(config.supervisor.clone(), queue.clone(), Arc::new(config.slots.clone())) => started?,
        _ = terminate.recv() => return Ok(ExitCode::SUCCESS),
        _ = interrupt.recv() => return Ok(ExitCode::SUCCESS),
    };

    let (shutdown, shutdown_rx) = watch::channel(false);
    let front = Arc::new(Front {
        settings: config.front.clone(),
        queue: queue.clone(),
        stats: stats.clone(),
        access_log,
        shutdown: shutdown_rx,
    });
    for listener in listeners {
        info!("listening on {}", listener.local_bind()?);
        tokio::spawn(front.clone().accept_loop(listener));
    }
    if let Some(listener) = control_listener {
        info!("stats on {}/stats and /metrics", listener.local_bind()?);
        let sources = control::Sources { stats: stats.clone(), queue, workers: supervisor.workers().to_vec(), threads };
        tokio::spawn(control::serve(listener, Arc::new(sources)));
    }

    let reloader = supervisor.reloader();
    let reloading = Arc::new(tokio::sync::Mutex::new(()));
    loop {
        tokio::select! {
            _ = terminate.recv() => break,
            _ = interrupt.recv() => break,
            _ = hangup.recv() => {
                // One reload at a time; a SIGHUP during a reload is covered by it.
                let Ok(guard) = reloading.clone().try_lock_owned() else { continue };
                let reloader = reloader.clone();
                tokio::spawn(async move {
                    info!("reloading: restarting workers one at a time");
                    match reloader.reload().await {
                        Ok(()) => info!("reload done"),
                        Err(err) => warn!("reload stopped: {err:#}"),
                    }
                    drop(guard);
                });
            }
        }
    }
    let deadline = Instant::now() + config.graceful_timeout;
    info!(
        "shutting down: finishing {} open connection(s), up to {:?}",
        stats.open_connections(),
        config.graceful_timeout
    );
    shutdown.send_replace(true);
    let drained = tokio::select! {
        closed = tokio::time::timeout_at(deadline.into(), stats.all_connections_closed()) => closed.is_ok(),
        _ = terminate.recv() => false,
        _ = interrupt.recv() => false,
    };
    if !drained {
        warn!("stopping with {} connection(s) still open", stats.open_connections());
    }
    if stats.open_websockets() > 0 {
        info!("closing {} WebSocket(s)", stats.open_websockets());
        supervisor.close_websockets().await;
    }
    let grace = deadline.saturating_duration_since(Instant::now()).max(Duration::from_secs(1));
    supervisor.stop(grace).await;
    info!("stopped");
    Ok(ExitCode::SUCCESS)
}
