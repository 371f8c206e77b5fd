//! `headway serve`: puts the parts together and runs them until a signal says stop.
//!
//! Start-up: bind every address first (a port in use is an error before any worker starts), or
//! take the sockets systemd passed; answer health checks ("starting") while the workers start
//! and wait until each listens, then accept, and tell systemd and the balancers we are ready.
//! Shutdown on SIGTERM or SIGINT: readiness turns 503 at once, the server goes on serving for
//! --shutdown-delay while balancers notice, then stops accepting (serving every connection a
//! client made, see `front::listener::accept_until`), lets idle connections go, finishes every
//! queued and running request (bounded by --graceful-timeout), closes the open WebSockets (1001
//! to both sides), stops the workers and exits 0. A second signal skips the waits. SIGHUP
//! restarts the workers one at a time (new code, same sockets and queue), as `--reload` does
//! when a watched file changes, and reads the TLS certificate and key again; SIGUSR1 reopens
//! the access log.

use std::process::ExitCode;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::watch;
use tracing::{info, warn};

use crate::access_log::AccessLog;
use crate::agent_check;
use crate::config::Config;
use crate::control;
use crate::front::listener::{Bind, Listener};
use crate::front::tls::Tls;
use crate::front::Front;
use crate::queue::Queue;
use crate::readiness::{Readiness, State};
use crate::reload;
use crate::stats::Stats;
use crate::supervisor::Supervisor;
use crate::systemd::{self, Activated, Notifier};
use crate::worker::Launch;

/// What systemd handed the process, taken before the runtime started its threads.
pub struct FromSystemd {
    pub notifier: Notifier,
    /// Sockets passed by socket activation, served instead of `--bind`.
    pub sockets: Vec<Activated>,
}

pub async fn run(config: Config, from_systemd: FromSystemd) -> anyhow::Result<ExitCode> {
    let mut listeners = Vec::with_capacity(config.binds.len());
    if from_systemd.sockets.is_empty() {
        for bind in &config.binds {
            listeners.push(Listener::bind(bind).with_context(|| format!("cannot listen on {bind}"))?);
        }
    } else {
        info!("serving the {} socket(s) systemd passed, not --bind", from_systemd.sockets.len());
        for socket in from_systemd.sockets {
            listeners.push(Listener::activated(socket).context("cannot serve a socket systemd passed")?);
        }
    }
    let control_listener = match &config.control {
        Some(bind) => Some(Listener::bind(bind).with_context(|| format!("cannot listen on --control {bind}"))?),
        None => None,
    };
    let agent_listener = match &config.agent_check {
        Some(bind) => Some(Listener::bind(bind).with_context(|| format!("cannot listen on --agent-check {bind}"))?),
        None => None,
    };
    let access_log = match &config.access_log {
        Some(path) => Some(Arc::new(
            AccessLog::open(path, config.access_log_format)
                .with_context(|| format!("cannot open --access-log {}", path.display()))?,
        )),
        None => None,
    };
    let tls = match config.tls.clone() {
        Some(files) => Some(Arc::new(Tls::load(files)?)),
        None => None,
    };
    // Signals are caught from here on, so a stop during a slow boot is orderly too.
    let mut terminate = signal(SignalKind::terminate())?;
    let mut interrupt = signal(SignalKind::interrupt())?;
    let mut hangup = signal(SignalKind::hangup())?;
    let mut reopen_logs = signal(SignalKind::user_defined1())?;

    let stats = Arc::new(Stats::default());
    let slots = config.supervisor.workers * config.supervisor.threads;
    let queue = Queue::with_settings(config.queue.clone(), slots);
    let threads = config.supervisor.threads;
    let readiness = Arc::new(Readiness::default());
    // Health checks are answered from the start: "starting" is not "dead".
    let sources = Arc::new(control::Sources {
        stats: stats.clone(),
        queue: queue.clone(),
        workers: OnceLock::new(),
        threads,
        readiness: readiness.clone(),
        access_log: access_log.clone(),
    });
    if let Some(listener) = control_listener {
        info!("stats on {}/stats and /metrics, health on /health/live and /health/ready", listener.local_bind()?);
        tokio::spawn(control::serve(listener, sources.clone()));
    }
    if let Some(listener) = agent_listener {
        info!("HAProxy agent check on {}", listener.local_bind()?);
        tokio::spawn(agent_check::serve(listener, readiness.clone(), slots));
    }
    let status = {
        let sources = sources.clone();
        move || {
            let workers = sources.workers.get().map_or(&[][..], Vec::as_slice);
            let busy: usize = workers.iter().map(|worker| worker.busy.get()).sum();
            let (queued, open) = (sources.queue.depth(), sources.stats.open_connections());
            format!("{queued} queued, {busy} of {slots} slots busy, {open} connections")
        }
    };
    tokio::spawn(systemd::report(from_systemd.notifier, readiness.subscribe(), status));

    let what = match &config.supervisor.launch {
        Launch::Python { app, .. } => app.spec.clone().unwrap_or_else(|| "the demo app".to_owned()),
        Launch::Command(command) => format!("`{command}`"),
    };
    info!("starting {} worker(s) x {threads} slot(s) for {what}", config.supervisor.workers);
    let supervisor = tokio::select! {
        started = Supervisor::start(config.supervisor.clone(), queue.clone(), Arc::new(config.slots.clone())) => started?,
        _ = terminate.recv() => return Ok(ExitCode::SUCCESS),
        _ = interrupt.recv() => return Ok(ExitCode::SUCCESS),
    };
    let _ = sources.workers.set(supervisor.workers().to_vec());
    let _watch = match config.reload.clone() {
        Some(settings) => Some(reload::start(settings, config.supervisor.launch.clone(), supervisor.reloader())?),
        None => None,
    };

    let (shutdown, shutdown_rx) = watch::channel(false);
    let front = Arc::new(Front {
        settings: config.front.clone(),
        queue: queue.clone(),
        stats: stats.clone(),
        access_log: access_log.clone(),
        readiness: readiness.clone(),
        shutdown: shutdown_rx,
        tls: tls.clone(),
    });
    let mut accepting = Vec::new();
    for listener in listeners {
        match (listener.local_bind()?, &tls) {
            (Bind::Tcp(addr), Some(_)) => info!("listening on https://{addr}"),
            (Bind::Unix(path), Some(_)) => info!("listening on unix:{} (HTTPS)", path.display()),
            (bind, None) => info!("listening on {bind}"),
        }
        accepting.push(tokio::spawn(front.clone().accept_loop(listener)));
    }
    readiness.set(State::Serving);

    let reloader = supervisor.reloader();
    let reloading = Arc::new(tokio::sync::Mutex::new(()));
    loop {
        tokio::select! {
            _ = terminate.recv() => break,
            _ = interrupt.recv() => break,
            _ = hangup.recv() => {
                if let Some(tls) = tls.clone() {
                    tokio::spawn(tls.reload());
                }
                // One reload at a time; a SIGHUP during a reload is covered by it.
                let Ok(guard) = reloading.clone().try_lock_owned() else { continue };
                let (reloader, readiness) = (reloader.clone(), readiness.clone());
                readiness.set(State::Reloading);
                tokio::spawn(async move {
                    info!("reloading: restarting workers one at a time");
                    match reloader.reload().await {
                        Ok(()) => info!("reload done"),
                        Err(err) => warn!("reload stopped: {err:#}"),
                    }
                    readiness.reload_done();
                    drop(guard);
                });
            }
            _ = reopen_logs.recv() => {
                if let Some(log) = access_log.clone() {
                    info!("reopening the access log");
                    // Off the event loop: it waits if the log writer is behind.
                    tokio::task::spawn_blocking(move || log.reopen());
                }
            }
        }
    }
    readiness.set(State::ShuttingDown);
    let mut hurry = false;
    if !config.shutdown_delay.is_zero() {
        info!("shutting down in {:?}: readiness is 503, still serving meanwhile", config.shutdown_delay);
        hurry = tokio::select! {
            () = tokio::time::sleep(config.shutdown_delay) => false,
            _ = terminate.recv() => true,
            _ = interrupt.recv() => true,
        };
    }
    let deadline = Instant::now() + config.graceful_timeout;
    info!(
        "shutting down: finishing {} open connection(s), up to {:?}",
        stats.open_connections(),
        config.graceful_timeout
    );
    shutdown.send_replace(true);
    let drained = !hurry
        && tokio::select! {
            closed = tokio::time::timeout_at(deadline.into(), async {
                // The listeners' last accepts first: a connection counts as open from its accept.
                for listener in accepting {
                    let _ = listener.await;
                }
                stats.all_connections_closed().await;
            }) => closed.is_ok(),
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
