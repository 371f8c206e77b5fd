//! `headway serve` flags, and the settings each part of the server gets from them.
//!
//! Defaults follow what users of gunicorn, Puma and nginx expect where those agree, and say
//! why where headway differs. Every flag is checked here, so a wrong one ends in a one-line
//! message before anything starts: [`args`] is the command line as clap reads it, [`parse`]
//! the parsers of its values ([`count_or_auto`] the value both name), and
//! [`Config::from_args`] checks the flags together and builds each part's settings, a function
//! for each part.

mod args;
mod count_or_auto;
pub(crate) mod layers;
mod parse;
mod ruby;
mod worker_count;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context as _};
use headway_common::executable::interpreter_problem;
use headway_common::python::{find_python, PYTHON_ENV};

pub use args::{LogFormat, ServeArgs};
pub use count_or_auto::CountOrAuto;
pub use parse::{parse_count_or_auto, parse_secs, parse_size, parse_target};
pub use worker_count::WorkerCount;

use crate::byte_budget::ByteBudget;
use crate::front::h2::Http2Settings;
use crate::front::static_files::{MaxAge, Mount, MountOptions, StaticSettings};
use crate::front::tls::{ClientAuth, ClientCas, TlsFiles};
use crate::front::websocket::WebSocketSettings;
use crate::front::FrontSettings;
use crate::listener::Bind;
use crate::ops::access_log::AccessLogFormat;
use crate::queue::{LaneSettings, QueueSettings, Target, MAX_DECLARED};
use crate::spool::{DiskBudget, SpoolLimits};
use crate::workers::affinity::WorkerCpus;
use crate::workers::file_watch::ReloadSettings;
use crate::workers::launch::{Interface, Launch, PythonApp, TakesWebSockets};
use crate::workers::replacement::RecyclePolicy;
use crate::workers::scaling::ScalingPolicy;
use crate::workers::slot::SlotSettings;
use crate::workers::slots_per_worker::SlotsPerWorker;
use crate::workers::supervisor::SupervisorConfig;
use crate::workers::zygote::ZygoteConfig;
use headway_http1::request::Limits;
use ruby::{rack_launch, serves_rack, RACK_SOURCES};

/// Everything `headway serve` runs with, validated.
#[derive(Debug)]
pub struct Config {
    pub front_threads: usize,
    pub binds: Vec<Bind>,
    pub control: Option<Bind>,
    pub supervisor: SupervisorConfig,
    pub front: FrontSettings,
    pub slots: SlotSettings,
    pub queue: QueueSettings,
    pub graceful_timeout: Duration,
    pub access_log: Option<PathBuf>,
    pub access_log_format: AccessLogFormat,
    pub shutdown_delay: Duration,
    pub agent_check: Option<Bind>,
    /// `--certfile` and `--keyfile`: HTTPS on every listener.
    pub tls: Option<TlsFiles>,
    /// `--reload`: what to watch.
    pub reload: Option<ReloadSettings>,
}

impl Config {
    /// Checks every flag, alone and with the others it goes with, and builds each part's
    /// settings from them; the first wrong flag is the error.
    pub fn from_args(args: ServeArgs) -> anyhow::Result<Config> {
        let scaling = scaling_policy(&args)?;
        // What a worker is told of its fellows (WSGI's wsgi.multiprocess): the most there may be.
        let workers = scaling.most();
        let front_threads = front_thread_count(args.front_threads)?;
        let queue = queue_settings(&args)?;
        let (request_spool, response_spool) = spool_limits(&args)?;
        let limits = request_limits(&args)?;
        let recycle = recycle_policy(&args)?;
        let reload = reload(&args)?;
        let http2 = if args.no_http2 { None } else { Some(http2_settings(&args)?) };
        let tls = tls_files(&args)?;
        let statics = static_settings(&args)?;
        if args.websocket_idle_timeout.is_zero() {
            bail!("--websocket-idle-timeout must be more than 0");
        }
        if args.max_websocket_held < args.max_websocket_message {
            bail!("--max-websocket-held must be at least --max-websocket-message: a message of the largest size would be refused");
        }
        // Last: it looks for the interpreter on this machine, so that a wrong flag is named first.
        let launch = launch(&args)?;
        let slots = slots_per_worker(args.threads, &launch)?;
        let bundled = matches!(launch, Launch::Python { .. } | Launch::Ruby { .. });
        let cpus = WorkerCpus::choose(args.cpu_affinity, scaling.most(), bundled).context("--cpu-affinity")?;
        let Addresses { binds, control, agent_check } = addresses(&args)?;
        let preload = (bundled && args.preload).then(|| ZygoteConfig { launch: launch.clone(), slots, workers });
        let takes_websockets = TakesWebSockets::new(launch.takes_websockets());
        Ok(Config {
            front_threads,
            binds,
            control,
            supervisor: SupervisorConfig {
                scaling,
                slots,
                launch,
                boot_timeout: args.boot_timeout,
                request_timeout: args.timeout,
                max_head: limits.max_head,
                recycle,
                preload,
                takes_websockets: takes_websockets.clone(),
                cpus,
            },
            front: FrontSettings {
                limits,
                header_timeout: args.header_timeout,
                keep_alive_timeout: args.keep_alive_timeout,
                keep_alive: !args.no_keep_alive,
                max_requests_per_connection: args.max_requests_per_connection,
                io_timeout: args.io_timeout,
                request_spool,
                trusted_proxies: args.forwarded_allow_ips,
                proxy_protocol: args.proxy_protocol,
                health_path: args.health_path,
                websocket: WebSocketSettings {
                    workers_take_them: takes_websockets,
                    max_open: args.max_websockets,
                    idle_timeout: args.websocket_idle_timeout,
                    ping_interval: Some(args.websocket_ping_interval).filter(|every| !every.is_zero()),
                    max_message: args.max_websocket_message,
                    held: Arc::new(ByteBudget::new(args.max_websocket_held)),
                },
                http2,
                statics,
            },
            slots: SlotSettings { request_timeout: args.timeout, response_spool },
            queue,
            graceful_timeout: args.graceful_timeout,
            access_log: args.access_log,
            access_log_format: args.access_log_format,
            shutdown_delay: args.shutdown_delay,
            agent_check,
            tls,
            reload,
        })
    }
}

/// The most workers there may be.
const MOST_WORKERS: usize = 1024;

/// `--workers` (else one for each CPU) and the flags of adaptive W. A fixed number moves only by
/// hand (SIGTTIN, SIGTTOU, the control address), between 1 and the most there may be.
fn scaling_policy(args: &ServeArgs) -> anyhow::Result<ScalingPolicy> {
    let given =
        args.workers.unwrap_or_else(|| WorkerCount::Fixed(std::thread::available_parallelism().map_or(1, usize::from)));
    let (start, min, max, automatic) = match given {
        WorkerCount::Fixed(workers) => (workers, 1, MOST_WORKERS, false),
        WorkerCount::Range { min, max } => (min, min, max, true),
    };
    if !(1..=MOST_WORKERS).contains(&start) || !(1..=MOST_WORKERS).contains(&max) {
        bail!("--workers must be between 1 and {MOST_WORKERS}, not {given}");
    }
    if max < min {
        bail!("--workers MIN:MAX must have MIN at most MAX, not {min}:{max}");
    }
    if args.max_memory == Some(0) {
        bail!("--max-memory must be more than 0");
    }
    if args.worker_idle_timeout.is_zero() {
        bail!("--worker-idle-timeout must be more than 0");
    }
    Ok(ScalingPolicy {
        start,
        min,
        max,
        automatic,
        scale_up_wait: args.scale_up_wait,
        idle_timeout: args.worker_idle_timeout,
        max_memory: args.max_memory,
    })
}

/// `--front-threads`, with `auto` as [`front_threads_for`] says.
fn front_thread_count(given: CountOrAuto) -> anyhow::Result<usize> {
    Ok(match given {
        CountOrAuto::Auto => front_threads_for(std::thread::available_parallelism().map_or(1, usize::from)),
        CountOrAuto::Count(threads) if (1..=256).contains(&threads) => threads,
        CountOrAuto::Count(threads) => bail!("--front-threads must be between 1 and 256, not {threads}"),
    })
}

/// The queue's flags: its length, its timeouts, controlled delay and lanes.
fn queue_settings(args: &ServeArgs) -> anyhow::Result<QueueSettings> {
    if args.max_queue == 0 {
        bail!("--max-queue must be at least 1");
    }
    if !(Duration::from_millis(1)..=Duration::from_secs(60)).contains(&args.queue_interval) {
        bail!("--queue-interval must be between 0.001 and 60 seconds");
    }
    if let Target::Fixed(target) = args.queue_target {
        if target >= args.queue_timeout {
            bail!("--queue-target must be shorter than --queue-timeout (or 0 to switch it off)");
        }
    }
    if args.no_lanes && !args.lane.is_empty() {
        bail!("--lane needs lanes: drop --no-lanes");
    }
    if args.lane.len() > MAX_DECLARED {
        bail!("--lane may be given at most {MAX_DECLARED} times");
    }
    Ok(QueueSettings {
        max_len: args.max_queue,
        timeout: args.queue_timeout,
        target: args.queue_target,
        interval: args.queue_interval,
        service_hint: args.service_time_hint.filter(|hint| !hint.is_zero()),
        lanes: LaneSettings { enabled: !args.no_lanes, declared: args.lane.clone() },
    })
}

/// What request bodies and responses may keep in memory and in temporary files: one disk
/// budget for both.
fn spool_limits(args: &ServeArgs) -> anyhow::Result<(SpoolLimits, SpoolLimits)> {
    if args.max_temp_disk != 0 && args.max_temp_disk < 1 << 20 {
        bail!("--max-temp-disk must be 0 (no temporary files) or at least 1MiB");
    }
    let disk = DiskBudget::new(args.max_temp_disk);
    let request = SpoolLimits { memory: args.request_buffer as usize, file: u64::MAX, disk: disk.clone() };
    let response = SpoolLimits { memory: args.response_buffer as usize, file: args.max_temp_file_size, disk };
    Ok((request, response))
}

/// The largest request head and body.
fn request_limits(args: &ServeArgs) -> anyhow::Result<Limits> {
    if args.max_header_size < 1024 {
        bail!("--max-header-size must be at least 1KiB");
    }
    Ok(Limits { max_head: args.max_header_size as usize, max_body: args.max_body })
}

/// `--max-requests`, its jitter and `--max-worker-memory`: when a worker is recycled.
fn recycle_policy(args: &ServeArgs) -> anyhow::Result<RecyclePolicy> {
    if args.max_requests == 0 && args.max_requests_jitter > 0 {
        bail!("--max-requests-jitter needs --max-requests");
    }
    if args.max_worker_memory == Some(0) {
        bail!("--max-worker-memory must be more than 0");
    }
    Ok(RecyclePolicy {
        max_requests: args.max_requests,
        max_requests_jitter: args.max_requests_jitter,
        max_memory: args.max_worker_memory,
    })
}

/// How each worker process starts: `--cmd`, else the bundled worker with the app.
fn launch(args: &ServeArgs) -> anyhow::Result<Launch> {
    // Checked here rather than by clap's `requires`: the flag and what it needs may come from
    // different layers (a flag, the environment, the file).
    if args.hooks.is_some() && args.cmd.is_some() {
        bail!("--hooks runs in the bundled worker, not in a --cmd worker");
    }
    if args.root_path.is_some() && args.cmd.is_some() {
        bail!("--root-path is for the bundled worker; give a --cmd worker its own (uvicorn --root-path)");
    }
    if let Some(launch) = rack_launch(args)? {
        return Ok(launch);
    }
    Ok(match &args.cmd {
        Some(cmd) if cmd.trim().is_empty() => bail!("--cmd needs a command"),
        Some(cmd) => Launch::Command(cmd.clone()),
        None => Launch::Python {
            python: worker_python(args.python.clone())?,
            app: PythonApp {
                spec: args.app.clone(),
                interface: args.interface,
                hooks: args.hooks.clone(),
                root_path: args.root_path.clone().filter(|root| !root.is_empty()),
            },
        },
    })
}

/// `--static` and the flags of files the front sends: each directory resolved once, here.
fn static_settings(args: &ServeArgs) -> anyhow::Result<StaticSettings> {
    if args.static_mounts.is_empty() && (args.static_only || args.static_dotfiles || args.static_max_age.is_some()) {
        bail!("--static-only, --static-dotfiles and --static-max-age need --static");
    }
    let sendfile_roots = resolved_dirs("--sendfile-root", &args.sendfile_root)?;
    let every_mount = MountOptions { only: args.static_only, dot_files: args.static_dotfiles };
    let mounts = args
        .static_mounts
        .iter()
        .map(|mount| Mount { options: mount.options.with(every_mount), ..mount.clone() })
        .collect();
    Ok(StaticSettings {
        mounts,
        max_age: args.static_max_age.map(MaxAge::new),
        accel_mappings: args.accel_mapping.clone(),
        sendfile_roots,
        sendfile: args.sendfile,
    })
}

/// `--reload`, with what it watches.
fn reload(args: &ServeArgs) -> anyhow::Result<Option<ReloadSettings>> {
    if !args.reload {
        if !args.reload_dir.is_empty() || !args.reload_include.is_empty() {
            bail!("--reload-dir and --reload-include need --reload");
        }
        return Ok(None);
    }
    let include = if args.reload_include.is_empty() && serves_rack(args) {
        RACK_SOURCES.map(str::to_owned).to_vec()
    } else {
        args.reload_include.clone()
    };
    reload_settings(args.reload_dir.clone(), include).map(Some)
}

/// `--certfile`, `--keyfile` and the client certificates they may ask for: HTTPS, or none.
fn tls_files(args: &ServeArgs) -> anyhow::Result<Option<TlsFiles>> {
    let client_cas = match (&args.ca_certs, args.cert_reqs) {
        (Some(path), when) => Some(ClientCas { path: path.clone(), when: when.unwrap_or(ClientAuth::Required) }),
        (None, Some(_)) => bail!("--cert-reqs needs --ca-certs: the CAs client certificates are checked against"),
        (None, None) => None,
    };
    Ok(match (&args.certfile, &args.keyfile) {
        (Some(cert), Some(key)) => Some(TlsFiles {
            cert: cert.clone(),
            key: key.clone(),
            key_password: args.keyfile_password.clone(),
            client_cas,
        }),
        (None, None) if client_cas.is_some() => bail!("--ca-certs needs --certfile and --keyfile"),
        (None, None) if args.keyfile_password.is_some() => bail!("--keyfile-password needs --keyfile"),
        (None, None) => None,
        _ => bail!("--certfile and --keyfile go together"),
    })
}

/// Where the server listens: the public binds, the control port, the agent check.
struct Addresses {
    binds: Vec<Bind>,
    control: Option<Bind>,
    agent_check: Option<Bind>,
}

fn addresses(args: &ServeArgs) -> anyhow::Result<Addresses> {
    let mut binds = Vec::new();
    for text in default_binds(args.bind.clone(), std::env::var("PORT").ok()) {
        binds.extend(Bind::parse_all(&text).map_err(|err| anyhow::anyhow!("--bind {err}"))?);
    }
    let control = match &args.control {
        Some(text) => {
            let mut all = Bind::parse_all(text).map_err(|err| anyhow::anyhow!("--control {err}"))?;
            Some(all.remove(0))
        }
        None => None,
    };
    // Port 0 asks the kernel for a free port at each bind: two such binds never meet.
    let collides = |control: &&Bind| binds.contains(control) && !matches!(control, Bind::Tcp(addr) if addr.port() == 0);
    if let Some(control) = control.as_ref().filter(collides) {
        bail!("--control {control} is also a public --bind address; give it its own");
    }
    let agent_check = match &args.agent_check {
        Some(text) => match Bind::parse_all(text).map_err(|err| anyhow::anyhow!("--agent-check {err}"))?.remove(0) {
            Bind::Unix(_) => bail!("--agent-check must be HOST:PORT: HAProxy's agent check speaks TCP"),
            tcp => Some(tcp),
        },
        None => None,
    };
    Ok(Addresses { binds, control, agent_check })
}

/// `--bind` as given, else the platform convention: `$PORT` on all interfaces (Heroku and
/// gunicorn do the same), else 127.0.0.1:8000.
fn default_binds(given: Vec<String>, port: Option<String>) -> Vec<String> {
    if !given.is_empty() {
        return given;
    }
    match port {
        Some(port) if !port.is_empty() => vec![format!("0.0.0.0:{port}")],
        _ => vec!["127.0.0.1:8000".to_owned()],
    }
}

/// `--reload-dir` (each must exist; made absolute, as the watcher reports paths) and
/// `--reload-include` (`*.py` unless given; the Rack worker's are [`RACK_SOURCES`]), with their
/// defaults.
fn reload_settings(dirs: Vec<PathBuf>, include: Vec<String>) -> anyhow::Result<ReloadSettings> {
    let dirs = if dirs.is_empty() { vec![PathBuf::from(".")] } else { dirs };
    let dirs = resolved_dirs("--reload-dir", &dirs)?;
    let include = if include.is_empty() { vec!["*.py".to_owned()] } else { include };
    let include = include
        .iter()
        .map(|text| glob::Pattern::new(text).map_err(|err| anyhow::anyhow!("--reload-include '{text}': {err}")))
        .collect::<anyhow::Result<_>>()?;
    Ok(ReloadSettings { dirs, include })
}

/// The directories a `flag` names, each resolved (absolute, symlinks followed); each must exist.
fn resolved_dirs(flag: &str, dirs: &[PathBuf]) -> anyhow::Result<Vec<PathBuf>> {
    dirs.iter()
        .map(|dir| {
            let resolved = dir.canonicalize().with_context(|| format!("{flag} {}", dir.display()))?;
            anyhow::ensure!(resolved.is_dir(), "{flag} {} is not a directory", dir.display());
            Ok(resolved)
        })
        .collect()
}

/// The interpreter for the bundled worker, by the rules of [`find_python`]; one given that
/// cannot be run is an error here, naming it, rather than a bare "No such file" from each worker.
fn worker_python(given: Option<PathBuf>) -> anyhow::Result<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    if let Some(given) = &given {
        if let Some(problem) = interpreter_problem(given, &path) {
            bail!(
                "--python {} (or ${PYTHON_ENV}): {problem}; it names the interpreter whose environment has \
                 headway and the app's packages",
                given.display()
            );
        }
    }
    // Where this program is only narrows the search: not knowing it skips that rule.
    let headway = std::env::current_exe().ok();
    find_python(given, headway.as_deref(), &path)
        .context("no python3 found: give one with --python, or run another server with --cmd")
}
/// `--threads` for workers started as `launch` says: `auto` knows the kind of app only when
/// `--interface` or `--cmd` says it.
fn slots_per_worker(threads: CountOrAuto, launch: &Launch) -> anyhow::Result<SlotsPerWorker> {
    Ok(match threads {
        CountOrAuto::Count(threads) if (1..=1024).contains(&threads) => SlotsPerWorker::fixed(threads),
        CountOrAuto::Count(threads) => bail!("--threads must be between 1 and 1024, not {threads}"),
        CountOrAuto::Auto => SlotsPerWorker::auto(match launch {
            Launch::Python { app, .. } => match app.interface {
                Interface::Auto => None,
                Interface::Asgi => Some(true),
                Interface::Wsgi | Interface::Rack => Some(false),
            },
            Launch::Ruby { .. } | Launch::Command(_) => Some(false),
        }),
    })
}

/// `--front-threads auto` on a machine (or cpuset, or CPU quota) of `cpus` CPUs: one thread for
/// every four, at least one. What the front spends on a request is small beside what any app doing
/// real work spends, so one front thread in four keeps up; a second thread of tokio's scheduler
/// costs each request more of the front's CPU in wake-ups between threads, which only pays where
/// one thread is the limit: not on 2 or 4 CPUs (docs/design/speed.md has the reasoning,
/// docs/benchmarks.md the figures).
pub fn front_threads_for(cpus: usize) -> usize {
    (cpus / 4).max(1)
}
/// The `--http2-*` flags, checked against what HTTP/2 allows (RFC 9113 section 6.5.2).
fn http2_settings(args: &ServeArgs) -> anyhow::Result<Http2Settings> {
    if args.http2_max_concurrent_streams == 0 {
        bail!("--http2-max-concurrent-streams must be more than 0 (--no-http2 switches HTTP/2 off)");
    }
    let window = u32::try_from(args.http2_initial_window_size).ok().filter(|window| *window < (1 << 31));
    let Some(window) = window else { bail!("--http2-initial-window-size must be at most 2147483647 (2^31-1)") };
    let frame = u32::try_from(args.http2_max_frame_size).ok().filter(|frame| (16_384..(1 << 24)).contains(frame));
    let Some(frame) = frame else { bail!("--http2-max-frame-size must be from 16384 to 16777215") };
    let header_list = args.http2_max_header_list_size.unwrap_or(args.max_header_size);
    let Ok(header_list) = u32::try_from(header_list) else { bail!("--http2-max-header-list-size must be under 4GiB") };
    let mut settings = Http2Settings::new(header_list);
    settings.max_concurrent_streams = args.http2_max_concurrent_streams;
    settings.initial_window_size = window;
    settings.max_frame_size = frame;
    Ok(settings)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threads() {
        let python = |interface| Launch::Python {
            python: PathBuf::from("python3"),
            app: PythonApp { spec: None, interface, hooks: None, root_path: None },
        };
        let auto = |launch: &Launch| slots_per_worker(CountOrAuto::Auto, launch).unwrap();
        assert_eq!(auto(&python(Interface::Auto)), SlotsPerWorker { threads: 5, asgi: 16 });
        assert_eq!(auto(&python(Interface::Asgi)), SlotsPerWorker::fixed(16));
        assert_eq!(auto(&python(Interface::Wsgi)), SlotsPerWorker::fixed(5));
        assert_eq!(auto(&Launch::Command("node server.js".into())), SlotsPerWorker::fixed(5));
        let given = slots_per_worker(CountOrAuto::Count(3), &python(Interface::Auto)).unwrap();
        assert_eq!(given, SlotsPerWorker::fixed(3));
        assert!(slots_per_worker(CountOrAuto::Count(0), &python(Interface::Auto)).is_err());
    }

    #[test]
    fn default_binds_follow_port() {
        let given = vec!["unix:/tmp/x.sock".to_owned()];
        assert_eq!(default_binds(given.clone(), Some("5000".into())), given);
        assert_eq!(default_binds(vec![], Some("5000".into())), ["0.0.0.0:5000"]);
        assert_eq!(default_binds(vec![], None), ["127.0.0.1:8000"]);
        assert_eq!(default_binds(vec![], Some(String::new())), ["127.0.0.1:8000"]);
    }

    #[test]
    fn front_threads() {
        let auto: Vec<usize> = [1, 2, 4, 8, 16, 32, 64].into_iter().map(front_threads_for).collect();
        assert_eq!(auto, [1, 1, 1, 2, 4, 8, 16]);
    }
}
