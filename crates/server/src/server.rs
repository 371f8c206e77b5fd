//! `headway serve`: puts the parts together and runs them until a signal says stop, in three
//! steps: [`Server::start`], [`Server::serve`], [`Server::shut_down`].
//!
//! Start-up: bind every address first (a port in use is an error before any worker starts), or
//! take the sockets systemd passed; answer health checks ("starting") while the workers start
//! and wait until each listens, then accept, and tell systemd and the balancers we are ready.
//! While serving, SIGHUP reloads: it replaces the workers one at a time (new code, same sockets and queue),
//! as `--reload` does when a watched file changes, and reads the TLS certificate and key again;
//! SIGUSR1 reopens the access log; SIGTTIN adds a worker and SIGTTOU removes one (within
//! `-w MIN:MAX` when a range is set). Shutdown on SIGTERM or SIGINT: readiness turns 503 at once,
//! the server goes on serving for --shutdown-delay while balancers notice, then stops accepting
//! (serving every connection a client made, see `listener::accept_until`), lets idle
//! connections go, finishes every queued and running request (bounded by --graceful-timeout),
//! closes the open WebSockets (1001 to both sides), stops the workers and exits 0. A second
//! signal skips the waits.

use std::process::ExitCode;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use tokio::signal::unix::{signal, Signal, SignalKind};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::{info, warn};

use crate::config::Config;
use crate::front::tls::Tls;
use crate::front::Front;
use crate::listener::{Activated, Bind, Listener};
use crate::ops::access_log::AccessLog;
use crate::ops::readiness::{Readiness, State};
use crate::ops::stats::Stats;
use crate::ops::systemd::{self, Notifier};
use crate::ops::{agent_check, control};
use crate::queue::Queue;
use crate::workers::file_watch;
use crate::workers::launch::Launch;
use crate::workers::scaling::{Cause, Direction};
use crate::workers::supervisor::Supervisor;

/// What systemd handed the process, taken before the runtime started its threads.
pub struct FromSystemd {
    pub notifier: Notifier,
    /// Sockets passed by socket activation, served instead of `--bind`.
    pub sockets: Vec<Activated>,
}

/// Runs the server until it is told to stop, and stops it.
pub async fn run(config: Config, from_systemd: FromSystemd, give_back_memory: fn()) -> anyhow::Result<ExitCode> {
    // Signals are caught from here on, so a stop during a slow boot is orderly too.
    let mut signals = Signals::catch()?;
    tokio::spawn(give_memory_back(give_back_memory));
    if let Some(server) = Server::start(config, from_systemd, &mut signals).await? {
        server.serve(&mut signals).await;
        server.shut_down(&mut signals).await;
    }
    Ok(ExitCode::SUCCESS)
}

/// How often the allocator is asked for the memory it has held free a while.
const GIVE_BACK_EVERY: Duration = Duration::from_secs(1);

/// Asks the allocator, every second, to give back to the system what it has held free for a
/// while. mimalloc does so by itself only when it is next used: a front gone quiet after a
/// burst (thousands of connections closed at once) would keep their memory for good.
async fn give_memory_back(give_back: fn()) {
    let mut every = tokio::time::interval(GIVE_BACK_EVERY);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        every.tick().await;
        give_back();
    }
}

/// The signals the server acts on.
struct Signals {
    terminate: Signal,
    interrupt: Signal,
    hangup: Signal,
    reopen_logs: Signal,
    add_worker: Signal,
    remove_worker: Signal,
}

impl Signals {
    fn catch() -> std::io::Result<Signals> {
        Ok(Signals {
            terminate: signal(SignalKind::terminate())?,
            interrupt: signal(SignalKind::interrupt())?,
            hangup: signal(SignalKind::hangup())?,
            reopen_logs: signal(SignalKind::user_defined1())?,
            add_worker: signal(SignalKind::from_raw(libc::SIGTTIN))?,
            remove_worker: signal(SignalKind::from_raw(libc::SIGTTOU))?,
        })
    }

    /// Resolves at the next SIGTERM or SIGINT.
    async fn stop(&mut self) {
        tokio::select! {
            _ = self.terminate.recv() => {}
            _ = self.interrupt.recv() => {}
        }
    }
}

/// A started server: its parts, and what shutting it down needs.
struct Server {
    config: Config,
    stats: Arc<Stats>,
    readiness: Arc<Readiness>,
    access_log: Option<Arc<AccessLog>>,
    tls: Option<Arc<Tls>>,
    supervisor: Supervisor,
    /// The accept loops; each ends once shutdown has started and its backlog is served.
    accepting: Vec<JoinHandle<()>>,
    /// Set to true to start the shutdown of every connection.
    shutdown: watch::Sender<bool>,
    /// `--reload`'s watcher, stopped with the server.
    _watch: Option<file_watch::Watch>,
}

impl Server {
    /// Binds, starts the workers and starts accepting. `None`: told to stop before the workers
    /// were up.
    async fn start(config: Config, from_systemd: FromSystemd, signals: &mut Signals) -> anyhow::Result<Option<Self>> {
        let listeners = bind_listeners(&config, from_systemd.sockets)?;
        let control_listener = bind_optional(config.control.as_ref(), "--control")?;
        let agent_listener = bind_optional(config.agent_check.as_ref(), "--agent-check")?;
        let access_log = match &config.access_log {
            Some(path) => Some(Arc::new(
                AccessLog::open(path, config.access_log_format)
                    .with_context(|| format!("cannot open --access-log {}", path.display()))?,
            )),
            None => None,
        };
        let tls = match config.tls.clone() {
            Some(files) => Some(Arc::new(Tls::load(files, config.front.http2.is_some())?)),
            None => None,
        };

        let stats = Arc::new(Stats::default());
        // The workers' slots as far as known before they start: each says its kind of app then.
        let slots = config.supervisor.scaling.start * config.supervisor.slots.threads;
        let queue = Queue::with_settings(config.queue.clone(), slots);
        let readiness = Arc::new(Readiness::default());
        // Health checks are answered from the start: "starting" is not "dead".
        let sources = Arc::new(control::Sources {
            stats: stats.clone(),
            queue: queue.clone(),
            workers: OnceLock::new(),
            readiness: readiness.clone(),
            access_log: access_log.clone(),
            temp_files: config.slots.response_spool.disk.clone(),
            websocket_held: config.front.websocket.held.clone(),
        });
        if let Some(listener) = control_listener {
            info!("stats on {}/stats and /metrics, health on /health/live and /health/ready", listener.local_bind()?);
            tokio::spawn(control::serve(listener, sources.clone()));
        }
        if let Some(listener) = agent_listener {
            info!("HAProxy agent check on {}", listener.local_bind()?);
            tokio::spawn(agent_check::serve(listener, readiness.clone(), queue.clone()));
        }
        let status = {
            let sources = sources.clone();
            move || {
                let workers = sources.workers.get().map_or_else(Vec::new, |workers| workers.pool.workers());
                let busy: usize = workers.iter().map(|worker| worker.busy.get()).sum();
                let (queued, open) = (sources.queue.depth(), sources.stats.open_connections());
                let slots = sources.queue.slots();
                format!("{queued} queued, {busy} of {slots} slots busy, {open} connections")
            }
        };
        tokio::spawn(systemd::report(from_systemd.notifier, readiness.subscribe(), status));

        let what = match &config.supervisor.launch {
            Launch::Python { app, .. } => app.spec.clone().unwrap_or_else(|| "the demo app".to_owned()),
            Launch::Ruby { app, .. } => app.config.clone(),
            Launch::Command(command) => format!("`{command}`"),
        };
        // With -t auto each worker's slots hang on its app's kind: it says them once it serves.
        let slots = config.supervisor.slots.known().map_or(String::new(), |slots| format!(" x {slots} slot(s)"));
        let scaling = &config.supervisor.scaling;
        let range = if scaling.automatic { format!(" (up to {})", scaling.max) } else { String::new() };
        info!(
            "starting {} worker(s){range}{slots} for {what}; {} front thread(s)",
            scaling.start, config.front_threads
        );
        let supervisor = tokio::select! {
            started = Supervisor::start(config.supervisor.clone(), queue.clone(), Arc::new(config.slots.clone())) => started?,
            () = signals.stop() => return Ok(None),
        };
        let _ = sources.workers.set(control::Workers { pool: supervisor.pool(), scaling: supervisor.scaling() });
        let watch = match config.reload.clone() {
            Some(settings) => {
                Some(file_watch::start(settings, config.supervisor.launch.clone(), supervisor.reloader())?)
            }
            None => None,
        };

        let (shutdown, shutdown_rx) = watch::channel(false);
        let front = Arc::new(Front {
            settings: config.front.clone(),
            queue,
            stats: stats.clone(),
            access_log: access_log.clone(),
            readiness: readiness.clone(),
            shutdown: shutdown_rx,
            tls: tls.clone(),
        });
        let mut accepting = Vec::with_capacity(listeners.len());
        for listener in listeners {
            info!("listening on {}", listener.local_bind()?.served(tls.is_some()));
            accepting.push(tokio::spawn(front.clone().accept_loop(listener)));
        }
        readiness.set(State::Serving);
        Ok(Some(Server { config, stats, readiness, access_log, tls, supervisor, accepting, shutdown, _watch: watch }))
    }

    /// Serves until SIGTERM or SIGINT, reloading on SIGHUP, reopening the access log on SIGUSR1,
    /// and adding or removing a worker on SIGTTIN or SIGTTOU.
    async fn serve(&self, signals: &mut Signals) {
        let reloader = self.supervisor.reloader();
        let reloading = Arc::new(tokio::sync::Mutex::new(()));
        loop {
            tokio::select! {
                _ = signals.terminate.recv() => return,
                _ = signals.interrupt.recv() => return,
                _ = signals.hangup.recv() => {
                    if let Some(tls) = self.tls.clone() {
                        tokio::spawn(tls.reload());
                    }
                    // One reload at a time; a SIGHUP during a reload is covered by it.
                    let Ok(guard) = reloading.clone().try_lock_owned() else { continue };
                    let (reloader, readiness) = (reloader.clone(), self.readiness.clone());
                    readiness.set(State::Reloading);
                    tokio::spawn(async move {
                        info!("reloading: replacing workers one at a time");
                        match reloader.reload().await {
                            Ok(()) => info!("reload done"),
                            Err(err) => warn!("reload stopped: {err:#}"),
                        }
                        readiness.reload_done();
                        drop(guard);
                    });
                }
                _ = signals.add_worker.recv() => self.scale_by_signal(Direction::Up),
                _ = signals.remove_worker.recv() => self.scale_by_signal(Direction::Down),
                _ = signals.reopen_logs.recv() => {
                    if let Some(log) = self.access_log.clone() {
                        info!("reopening the access log");
                        // Off the event loop: it waits if the log writer is behind.
                        tokio::task::spawn_blocking(move || log.reopen());
                    }
                }
            }
        }
    }

    /// One worker more or fewer, as SIGTTIN or SIGTTOU asks; a refusal is logged.
    fn scale_by_signal(&self, direction: Direction) {
        let scaling = self.supervisor.scaling();
        tokio::spawn(async move {
            if let Err(refused) = scaling.ask(direction, Cause::Signal).await {
                warn!("{refused}");
            }
        });
    }

    /// Stops gracefully, as the module's comment says; a second signal skips the waits.
    async fn shut_down(self, signals: &mut Signals) {
        let Server { config, stats, readiness, supervisor, accepting, shutdown, .. } = self;
        readiness.set(State::ShuttingDown);
        let mut hurry = false;
        if !config.shutdown_delay.is_zero() {
            info!("shutting down in {:?}: readiness is 503, still serving meanwhile", config.shutdown_delay);
            hurry = tokio::select! {
                () = tokio::time::sleep(config.shutdown_delay) => false,
                () = signals.stop() => true,
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
                () = signals.stop() => false,
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
    }
}

/// The public listeners: `--bind`, or the sockets systemd passed instead.
fn bind_listeners(config: &Config, activated: Vec<Activated>) -> anyhow::Result<Vec<Listener>> {
    if activated.is_empty() {
        return config
            .binds
            .iter()
            .map(|bind| {
                Listener::bind(bind).with_context(|| format!("cannot listen on {}", bind.served(config.tls.is_some())))
            })
            .collect();
    }
    info!("serving the {} socket(s) systemd passed, not --bind", activated.len());
    activated
        .into_iter()
        .map(|socket| Listener::activated(socket).context("cannot serve a socket systemd passed"))
        .collect()
}

/// A listener for an optional address such as `--control`.
fn bind_optional(bind: Option<&Bind>, flag: &str) -> anyhow::Result<Option<Listener>> {
    bind.map(|bind| Listener::bind(bind).with_context(|| format!("cannot listen on {flag} {bind}"))).transpose()
}
