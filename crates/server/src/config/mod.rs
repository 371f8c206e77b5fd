//! `headway serve` flags, and the settings each part of the server gets from them.
//!
//! Defaults follow what users of gunicorn, Puma and nginx expect where those agree, and say
//! why where headway differs. Every flag is checked here, so a wrong one ends in a one-line
//! message before anything starts.

pub(crate) mod layers;

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context as _};
use headway_common::executable::{is_executable, which};
use headway_common::python::{find_python, PYTHON_ENV};

use crate::front::forwarded::TrustedProxies;
use crate::front::h2::Http2Settings;
use crate::front::tls::{ClientAuth, ClientCas, Password, TlsFiles};
use crate::front::websocket::WebSocketSettings;
use crate::front::FrontSettings;
use crate::listener::Bind;
use crate::ops::access_log::AccessLogFormat;
use crate::queue::{LanePattern, LaneSettings, QueueSettings, Target, MAX_DECLARED};
use crate::spool::{DiskBudget, SpoolLimits};
use crate::workers::affinity::{CpuAffinity, WorkerCpus};
use crate::workers::launch::{Interface, Launch, PythonApp, TakesWebSockets};
use crate::workers::lifetime::RecyclePolicy;
use crate::workers::reload::ReloadSettings;
use crate::workers::slot::SlotSettings;
use crate::workers::slots_per_worker::SlotsPerWorker;
use crate::workers::supervisor::SupervisorConfig;
use crate::workers::zygote::ZygoteConfig;
use headway_http1::request::Limits;

#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:\n  headway serve                          the built-in demo app\n  \
    headway serve -w 4 -t 8 myapp.wsgi:application\n  \
    headway serve -w 2 main:app                  a FastAPI app: 16 slots a worker, WebSockets included\n  \
    headway serve -t 5 --cmd 'puma -t 5:5 -b unix://{socket} config.ru'")]
pub struct ServeArgs {
    /// The app as module:callable, WSGI (PEP 3333) or ASGI 3; a module alone is
    /// module:application, as in gunicorn. Without it, and without --cmd, the demo app.
    #[arg(value_name = "APP")]
    pub app: Option<String>,

    /// How the bundled worker calls the app. auto: ASGI if it is a coroutine function or has an
    /// async __call__, else WSGI. WebSockets reach an ASGI app either way (with auto, each worker
    /// tells the front once it has imported the app)
    #[arg(long, value_enum, default_value = "auto", value_name = "KIND", conflicts_with = "cmd")]
    pub interface: Interface,

    /// Worker processes [default: number of CPUs]
    #[arg(short, long, env = "WEB_CONCURRENCY", value_name = "N")]
    pub workers: Option<usize>,

    /// Request slots per worker: the most requests one worker runs at once (a WSGI app's threads,
    /// an ASGI app's tasks on its event loop). auto: 5 for a WSGI app or a --cmd server, 16 for
    /// an ASGI app, whose loop interleaves its requests at each await (with --interface auto,
    /// as each worker finds once it has imported the app)
    #[arg(short, long, default_value = "auto", value_name = "T|auto", value_parser = parse_count_or_auto)]
    pub threads: CountOrAuto,

    /// Threads of the front, which holds every client connection and the queue. auto: one for
    /// every four CPUs the server may use, at least one (one thread costs no wake-up of another
    /// per request, which below eight CPUs costs more than a second thread gains)
    #[arg(long, default_value = "auto", value_name = "N|auto", value_parser = parse_count_or_auto)]
    pub front_threads: CountOrAuto,

    /// Which CPU each worker process runs on. auto: the bundled worker's processes are pinned
    /// one to a CPU when there are at least as many workers as CPUs (its threads then wait for
    /// the GIL where they will run, and its data stays in one cache), as SCHED_BATCH, so that
    /// they never preempt the front when they wake; pin: any worker, always; off: the kernel
    /// places them
    #[arg(long, value_enum, default_value = "auto", value_name = "MODE")]
    pub cpu_affinity: CpuAffinity,

    /// Address to listen on: HOST:PORT, [IPv6]:PORT or unix:PATH; repeat for several
    /// [default: 127.0.0.1:8000, or 0.0.0.0:$PORT when PORT is set]
    #[arg(short, long = "bind", value_name = "ADDR")]
    pub bind: Vec<String>,

    /// Run this command as each worker instead of the Python worker: any HTTP/1.1 server that
    /// listens on the unix socket given as {socket} (also in $HEADWAY_SOCKET)
    #[arg(long, value_name = "COMMAND", conflicts_with = "app")]
    pub cmd: Option<String>,

    /// The path prefix the app is mounted under, when a router sends it a sub-path such as /api:
    /// WSGI's SCRIPT_NAME and ASGI's root_path. A request path that starts with it is taken to
    /// include it (WSGI's PATH_INFO is the rest); one that does not, to have had it removed by
    /// the router (ASGI's path gets it back). Bundled worker only. As uvicorn --root-path,
    /// gunicorn's SCRIPT_NAME
    #[arg(long, value_name = "PATH", value_parser = parse_root_path)]
    pub root_path: Option<String>,

    /// Python interpreter for the bundled worker [default: the python3 next to this program,
    /// else python3 on PATH]
    #[arg(long, env = PYTHON_ENV, value_name = "PATH")]
    pub python: Option<PathBuf>,

    /// Longest queue; a request arriving when it is full gets 503 at once
    #[arg(long, default_value_t = 1024, value_name = "N")]
    pub max_queue: usize,

    /// Seconds a request may wait in the queue before it gets 503 with Retry-After (at once,
    /// if the service time says it cannot start in time). Shorter than the 30 s of routers
    /// such as Heroku's, so clients learn of overload from us, fast
    #[arg(long, default_value = "10", value_name = "SECS", value_parser = parse_secs)]
    pub queue_timeout: Duration,

    /// Controlled delay: when the queue has stood above this wait for a whole interval and kept
    /// growing (a sustained overload, not a burst), requests beyond it get 503 at once, so the
    /// ones served wait about this long. auto: 3 x the mean service time, within 5-50 ms.
    /// 0 switches it off: requests may then wait up to --queue-timeout whatever the load
    #[arg(long, default_value = "auto", value_name = "SECS|auto", value_parser = parse_target)]
    pub queue_target: Target,

    /// Seconds over which a queue above --queue-target is judged to be standing
    #[arg(long, default_value = "0.1", value_name = "SECS", value_parser = parse_secs)]
    pub queue_interval: Duration,

    /// Seconds a request is assumed to take until enough have finished to measure it, so that a
    /// fresh server refuses on arrival what it cannot start within --queue-timeout [default: none]
    #[arg(long, value_name = "SECS", value_parser = parse_secs)]
    pub service_time_hint: Option<Duration>,

    /// Name slow routes outright: requests matching [METHOD ]PATH wait in a lane of their own
    /// and start as slow ones do, fast requests first. PATH is a glob, * within a segment and **
    /// across segments (/reports/**, 'POST /upload'); repeat for several. Without it the queue
    /// learns which routes are slow from their service times
    #[arg(long, value_name = "PATTERN", value_parser = LanePattern::parse)]
    pub lane: Vec<LanePattern>,

    /// Serve every request in arrival order: no lanes, no service times learned per route
    #[arg(long)]
    pub no_lanes: bool,

    /// Seconds a worker may take to answer (or stay silent mid-body) before the request gets
    /// 504 and the worker is replaced
    #[arg(long, default_value = "30", value_name = "SECS", value_parser = parse_secs)]
    pub timeout: Duration,

    /// Seconds to finish queued and running requests on SIGTERM/SIGINT before stopping anyway
    #[arg(long, default_value = "30", value_name = "SECS", value_parser = parse_secs)]
    pub graceful_timeout: Duration,

    /// Seconds an idle keep-alive connection is kept. Longer than load balancers' idle
    /// timeouts (60 s on AWS), so they close first and never reuse a connection we closed
    #[arg(long, default_value = "75", value_name = "SECS", value_parser = parse_secs)]
    pub keep_alive_timeout: Duration,

    /// Close every connection after one response
    #[arg(long)]
    pub no_keep_alive: bool,

    /// Close a connection after this many requests; 0 for no limit. The queue keeps service
    /// fair whatever this is, so the default is no limit
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub max_requests_per_connection: u64,

    /// Seconds a client has to send a complete request head (408 after that)
    #[arg(long, default_value = "10", value_name = "SECS", value_parser = parse_secs)]
    pub header_timeout: Duration,

    /// Seconds a client may stall while sending a body (408) or reading a response (closed)
    #[arg(long, default_value = "60", value_name = "SECS", value_parser = parse_secs)]
    pub io_timeout: Duration,

    /// Largest request head (431 above it)
    #[arg(long, default_value = "32KiB", value_name = "BYTES", value_parser = parse_size)]
    pub max_header_size: u64,

    /// Largest request body (413 above it); bodies are read whole before the request queues, but for
    /// a large one whose client sends it fast
    #[arg(long, default_value = "100MiB", value_name = "BYTES", value_parser = parse_size)]
    pub max_body: u64,

    /// Request body bytes kept in memory per request; the rest of a large body waiting in the
    /// queue goes to a temporary file
    #[arg(long, default_value = "256KiB", value_name = "BYTES", value_parser = parse_size)]
    pub request_buffer: u64,

    /// Response bytes kept in memory per response; the rest of a large response waiting for
    /// a slow client goes to a temporary file, so the worker's slot is free at once
    #[arg(long, default_value = "256KiB", value_name = "BYTES", value_parser = parse_size)]
    pub response_buffer: u64,

    /// The most of one response held in a temporary file for a slow client; a client that far
    /// behind holds its slot, which stops reading the worker until it catches up. 0: no file,
    /// only --response-buffer. As nginx proxy_max_temp_file_size
    #[arg(long, default_value = "1GiB", value_name = "BYTES", value_parser = parse_size)]
    pub max_temp_file_size: u64,

    /// The most disk the temporary files of every request and response take together; a
    /// response beyond it waits as at --max-temp-file-size, a request body gets 503
    #[arg(long, default_value = "2GiB", value_name = "BYTES", value_parser = parse_size)]
    pub max_temp_disk: u64,

    /// Most WebSockets open (or in their handshake) at once; a handshake beyond it gets 503.
    /// Each holds a connection to its worker, never a slot
    #[arg(long, default_value_t = 10_000, value_name = "N")]
    pub max_websockets: usize,

    /// Seconds a WebSocket may carry nothing either way before the front closes it (close code
    /// 1001 to both sides)
    #[arg(long, default_value = "300", value_name = "SECS", value_parser = parse_secs)]
    pub websocket_idle_timeout: Duration,

    /// Seconds of quiet on a WebSocket after which the front pings the client, and again every
    /// as many while it stays quiet; a live client's pong keeps the socket from the idle timeout.
    /// 0: never. As uvicorn --ws-ping-interval
    #[arg(long, default_value = "20", value_name = "SECS", value_parser = parse_secs)]
    pub websocket_ping_interval: Duration,

    /// Largest message a WebSocket client may send (its frames together); a larger one closes
    /// the socket with 1009 before any of it reaches the app
    #[arg(long, default_value = "16MiB", value_name = "BYTES", value_parser = parse_size)]
    pub max_websocket_message: u64,

    /// Speak HTTP/1.1 only: TLS offers no h2 by ALPN, and a plain connection opening with
    /// HTTP/2's preface gets 505
    #[arg(long)]
    pub no_http2: bool,

    /// HTTP/2 streams a client may have open on one connection at once; each is a request of
    /// the one queue. As gunicorn --http2-max-concurrent-streams
    #[arg(long, default_value_t = 100, value_name = "N")]
    pub http2_max_concurrent_streams: u32,

    /// Each HTTP/2 stream's receive window (what a client may send before the front asks for
    /// more). As gunicorn --http2-initial-window-size
    #[arg(long, default_value = "65535", value_name = "BYTES", value_parser = parse_size)]
    pub http2_initial_window_size: u64,

    /// Largest HTTP/2 frame payload a client may send (16KiB to 16MiB-1). As gunicorn
    /// --http2-max-frame-size
    #[arg(long, default_value = "16384", value_name = "BYTES", value_parser = parse_size)]
    pub http2_max_frame_size: u64,

    /// Largest HTTP/2 header list, as HPACK counts it (431 above it) [default: --max-header-size].
    /// As gunicorn --http2-max-header-list-size
    #[arg(long, value_name = "BYTES", value_parser = parse_size)]
    pub http2_max_header_list_size: Option<u64>,

    /// Seconds a worker may take to start listening on its socket
    #[arg(long, default_value = "60", value_name = "SECS", value_parser = parse_secs)]
    pub boot_timeout: Duration,

    /// Recycle a worker after it has served N requests (plus jitter): it takes no new ones,
    /// finishes its running ones and is replaced while requests wait in the queue, one worker
    /// at a time. 0: never. Counted by the front, so --cmd workers too. As gunicorn
    /// --max-requests, uvicorn --limit-max-requests
    #[arg(long, default_value_t = 0, value_name = "N", help_heading = LIFECYCLE)]
    pub max_requests: u64,

    /// Add a random 0..=J to --max-requests for each new worker process, so that workers started
    /// together are not recycled together. As gunicorn --max-requests-jitter, uvicorn
    /// --limit-max-requests-jitter
    #[arg(long, default_value_t = 0, value_name = "J", help_heading = LIFECYCLE)]
    pub max_requests_jitter: u64,

    /// Recycle a worker whose processes' resident memory stays above SIZE (512MiB, 2G) for 3
    /// readings a second apart, the same way as --max-requests. As granian --workers-max-rss
    /// with --rss-samples 3, Puma's puma_worker_killer gem [default: no limit]
    #[arg(long, value_name = "SIZE", value_parser = parse_size, help_heading = LIFECYCLE)]
    pub max_worker_memory: Option<u64>,

    /// Import the app once, in a parent process, and fork every worker from it: the workers
    /// share its memory until they write to it. Connections opened at import must be opened
    /// again in each worker (--hooks). Bundled worker only. As gunicorn --preload, Puma
    /// preload_app!, uvicorn and granian have none
    #[arg(long, conflicts_with = "cmd", help_heading = LIFECYCLE)]
    pub preload: bool,

    /// A module whose post_fork(worker) each worker process calls once the app is imported,
    /// before it serves (with --preload, right after the fork), and on_exit(worker) as it stops
    /// cleanly (worker.index, worker.pid). Bundled worker only. As gunicorn's post_fork and
    /// worker_exit, Puma's before_worker_boot
    #[arg(long, value_name = "MODULE", help_heading = LIFECYCLE)]
    pub hooks: Option<String>,

    /// For development: replace the workers when a watched file changes (an app that no longer
    /// imports is shown and the old workers keep serving). As gunicorn, uvicorn and granian
    /// --reload; Puma has none
    #[arg(long, help_heading = LIFECYCLE)]
    pub reload: bool,

    /// A directory --reload watches, with everything below it; repeat for several. As uvicorn
    /// --reload-dir, granian --reload-paths [default: the working directory]
    #[arg(long, value_name = "DIR", help_heading = LIFECYCLE)]
    pub reload_dir: Vec<PathBuf>,

    /// File names whose change reloads, as a glob; repeat for several. Hidden directories and
    /// __pycache__ are skipped. As uvicorn --reload-include [default: *.py]
    #[arg(long, value_name = "GLOB", help_heading = LIFECYCLE)]
    pub reload_include: Vec<String>,

    /// Serve stats (JSON at /stats, Prometheus at /metrics) on this address, HOST:PORT or
    /// unix:PATH. Keep it off the public port
    #[arg(long, env = "HEADWAY_CONTROL", value_name = "ADDR")]
    pub control: Option<String>,

    /// Write an access log line per response (Apache combined format, then queue= and
    /// service= times) to this file; `-` for standard output
    #[arg(long, value_name = "PATH")]
    pub access_log: Option<PathBuf>,

    /// Log level: error, warn, info, debug or trace
    #[arg(long, default_value = "info", value_name = "LEVEL")]
    pub log_level: String,

    /// Peers whose X-Forwarded-* and Forwarded headers are believed: comma-separated addresses
    /// and CIDR ranges, or * for any. From other peers they are replaced with what the front
    /// sees. Unix-socket clients are always trusted
    #[arg(long, env = "FORWARDED_ALLOW_IPS", default_value = "127.0.0.1,::1", value_name = "LIST",
          value_parser = TrustedProxies::parse)]
    pub forwarded_allow_ips: TrustedProxies,

    /// Serve HTTPS: the certificate chain (PEM, the server's certificate first) for every
    /// listener. Read again on SIGHUP. As gunicorn --certfile, uvicorn --ssl-certfile
    #[arg(long, visible_alias = "ssl-certfile", value_name = "PATH")]
    pub certfile: Option<PathBuf>,

    /// The private key of --certfile (PEM: PKCS#8, RSA or EC; an encrypted PKCS#8 one with
    /// --keyfile-password). As gunicorn --keyfile, uvicorn --ssl-keyfile
    #[arg(long, visible_alias = "ssl-keyfile", value_name = "PATH")]
    pub keyfile: Option<PathBuf>,

    /// The password of an encrypted --keyfile; better given as $HEADWAY_KEYFILE_PASSWORD or in
    /// the config file than on a command line others can read. As uvicorn --ssl-keyfile-password
    #[arg(long, visible_alias = "ssl-keyfile-password", value_name = "PASSWORD", value_parser = Password::parse)]
    pub keyfile_password: Option<Password>,

    /// Ask clients for a certificate signed by one of these CAs (PEM); the app gets the one
    /// shown in X-Forwarded-Client-Cert. Read again on SIGHUP. As gunicorn --ca-certs, uvicorn
    /// --ssl-ca-certs
    #[arg(long, visible_alias = "ssl-ca-certs", value_name = "PATH")]
    pub ca_certs: Option<PathBuf>,

    /// With --ca-certs: whether a client must show a certificate (required, or 2 as in gunicorn
    /// and uvicorn) or may connect without one (optional, or 1). A certificate shown is always
    /// checked
    #[arg(long, visible_alias = "ssl-cert-reqs", value_name = "WHEN", value_parser = ClientAuth::parse)]
    pub cert_reqs: Option<ClientAuth>,

    /// TCP connections start with a PROXY protocol header (v1 or v2, as HAProxy's send-proxy,
    /// an AWS NLB or a router send): its client becomes the peer. Connections without one are
    /// closed
    #[arg(long)]
    pub proxy_protocol: bool,

    /// Answer GET PATH on the public port from the server's readiness (200, or 503 while
    /// starting or shutting down), without taking a slot: for balancers that probe the traffic
    /// port
    #[arg(long, value_name = "PATH", value_parser = parse_health_path)]
    pub health_path: Option<String>,

    /// Seconds to keep accepting and serving after SIGTERM, with readiness already 503, so that
    /// load balancers deregister this instance before it stops accepting
    #[arg(long, default_value = "0", value_name = "SECS", value_parser = parse_secs)]
    pub shutdown_delay: Duration,

    /// Serve HAProxy's agent-check protocol on this HOST:PORT: `ready maxconn:<slots>`, or
    /// `drain` while shutting down or reloading
    #[arg(long, value_name = "ADDR")]
    pub agent_check: Option<String>,

    /// Format of --access-log lines: combined (Apache's, then queue= and service=) or json
    #[arg(long, value_enum, default_value = "combined", value_name = "FORMAT")]
    pub access_log_format: AccessLogFormat,

    /// Format of the server's own log on stderr: text or json
    #[arg(long, value_enum, default_value = "text", value_name = "FORMAT")]
    pub log_format: LogFormat,

    /// Read settings from this TOML file: keys are the flags' long names (`workers = 4`,
    /// `bind = ["127.0.0.1:8000"]`). Flags and HEADWAY_<FLAG> variables override it
    #[arg(short = 'c', long, env = "HEADWAY_CONFIG", value_name = "FILE")]
    pub config: Option<PathBuf>,

    /// Print the effective settings, and where each comes from, then exit
    #[arg(long)]
    pub print_config: bool,
}

/// The `--help` heading that groups the flags of a worker's life (recycling, reloading).
const LIFECYCLE: &str = "Worker lifecycle";

/// `--log-format`.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    Json,
}

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
    pub fn from_args(args: ServeArgs) -> anyhow::Result<Config> {
        let workers = match args.workers {
            Some(n) => n,
            None => std::thread::available_parallelism().map_or(1, usize::from),
        };
        if !(1..=1024).contains(&workers) {
            bail!("--workers must be between 1 and 1024, not {workers}");
        }
        let front_threads = match args.front_threads {
            CountOrAuto::Auto => front_threads_for(std::thread::available_parallelism().map_or(1, usize::from)),
            CountOrAuto::Count(threads) if (1..=256).contains(&threads) => threads,
            CountOrAuto::Count(threads) => bail!("--front-threads must be between 1 and 256, not {threads}"),
        };
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
        if args.max_temp_disk != 0 && args.max_temp_disk < 1 << 20 {
            bail!("--max-temp-disk must be 0 (no temporary files) or at least 1MiB");
        }
        if args.max_header_size < 1024 {
            bail!("--max-header-size must be at least 1KiB");
        }
        if args.max_requests == 0 && args.max_requests_jitter > 0 {
            bail!("--max-requests-jitter needs --max-requests");
        }
        // Checked here rather than by clap's `requires`: the flag and what it needs may come from
        // different layers (a flag, the environment, the file).
        if args.hooks.is_some() && args.cmd.is_some() {
            bail!("--hooks runs in the bundled worker, not in a --cmd worker");
        }
        if args.root_path.is_some() && args.cmd.is_some() {
            bail!("--root-path is for the bundled worker; give a --cmd worker its own (uvicorn --root-path)");
        }
        if !args.reload && (!args.reload_dir.is_empty() || !args.reload_include.is_empty()) {
            bail!("--reload-dir and --reload-include need --reload");
        }
        let http2 = if args.no_http2 { None } else { Some(http2_settings(&args)?) };
        let client_cas = match (args.ca_certs, args.cert_reqs) {
            (Some(path), when) => Some(ClientCas { path, when: when.unwrap_or(ClientAuth::Required) }),
            (None, Some(_)) => bail!("--cert-reqs needs --ca-certs: the CAs client certificates are checked against"),
            (None, None) => None,
        };
        let tls = match (args.certfile, args.keyfile) {
            (Some(cert), Some(key)) => Some(TlsFiles { cert, key, key_password: args.keyfile_password, client_cas }),
            (None, None) if client_cas.is_some() => bail!("--ca-certs needs --certfile and --keyfile"),
            (None, None) if args.keyfile_password.is_some() => bail!("--keyfile-password needs --keyfile"),
            (None, None) => None,
            _ => bail!("--certfile and --keyfile go together"),
        };
        if args.max_worker_memory == Some(0) {
            bail!("--max-worker-memory must be more than 0");
        }
        if args.websocket_idle_timeout.is_zero() {
            bail!("--websocket-idle-timeout must be more than 0");
        }
        let launch = match args.cmd {
            Some(cmd) if cmd.trim().is_empty() => bail!("--cmd needs a command"),
            Some(cmd) => Launch::Command(cmd),
            None => Launch::Python {
                python: worker_python(args.python)?,
                app: PythonApp {
                    spec: args.app,
                    interface: args.interface,
                    hooks: args.hooks,
                    root_path: args.root_path.filter(|root| !root.is_empty()),
                },
            },
        };
        let slots = slots_per_worker(args.threads, &launch)?;
        let bundled = matches!(launch, Launch::Python { .. });
        let cpus = WorkerCpus::choose(args.cpu_affinity, workers, bundled).context("--cpu-affinity")?;
        let mut binds = Vec::new();
        for text in default_binds(args.bind, std::env::var("PORT").ok()) {
            binds.extend(Bind::parse_all(&text).map_err(|err| anyhow::anyhow!("--bind {err}"))?);
        }
        let control = match args.control {
            Some(text) => {
                let mut all = Bind::parse_all(&text).map_err(|err| anyhow::anyhow!("--control {err}"))?;
                Some(all.remove(0))
            }
            None => None,
        };
        // Port 0 asks the kernel for a free port at each bind: two such binds never meet.
        let collides =
            |control: &&Bind| binds.contains(control) && !matches!(control, Bind::Tcp(addr) if addr.port() == 0);
        if let Some(control) = control.as_ref().filter(collides) {
            bail!("--control {control} is also a public --bind address; give it its own");
        }
        let agent_check = match args.agent_check {
            Some(text) => match Bind::parse_all(&text).map_err(|err| anyhow::anyhow!("--agent-check {err}"))?.remove(0)
            {
                Bind::Unix(_) => bail!("--agent-check must be HOST:PORT: HAProxy's agent check speaks TCP"),
                tcp => Some(tcp),
            },
            None => None,
        };
        let preload = match (&launch, args.preload) {
            (Launch::Python { python, app }, true) => {
                Some(ZygoteConfig { python: python.clone(), app: app.clone(), slots, workers })
            }
            _ => None,
        };
        let reload = if args.reload { Some(reload_settings(args.reload_dir, args.reload_include)?) } else { None };
        let takes_websockets = TakesWebSockets::new(launch.takes_websockets());
        let disk = DiskBudget::new(args.max_temp_disk);
        let request_spool = SpoolLimits { memory: args.request_buffer as usize, file: u64::MAX, disk: disk.clone() };
        let response_spool = SpoolLimits { memory: args.response_buffer as usize, file: args.max_temp_file_size, disk };
        Ok(Config {
            front_threads,
            binds,
            control,
            supervisor: SupervisorConfig {
                workers,
                slots,
                launch,
                boot_timeout: args.boot_timeout,
                request_timeout: args.timeout,
                max_head: args.max_header_size as usize,
                recycle: RecyclePolicy {
                    max_requests: args.max_requests,
                    max_requests_jitter: args.max_requests_jitter,
                    max_memory: args.max_worker_memory,
                },
                preload,
                takes_websockets: takes_websockets.clone(),
                cpus,
            },
            front: FrontSettings {
                limits: Limits { max_head: args.max_header_size as usize, max_body: args.max_body },
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
                    workers_take_them: takes_websockets.clone(),
                    max_open: args.max_websockets,
                    idle_timeout: args.websocket_idle_timeout,
                    ping_interval: Some(args.websocket_ping_interval).filter(|every| !every.is_zero()),
                    max_message: args.max_websocket_message,
                },
                http2,
            },
            slots: SlotSettings { request_timeout: args.timeout, response_spool },
            queue: QueueSettings {
                max_len: args.max_queue,
                timeout: args.queue_timeout,
                target: args.queue_target,
                interval: args.queue_interval,
                service_hint: args.service_time_hint.filter(|hint| !hint.is_zero()),
                lanes: LaneSettings { enabled: !args.no_lanes, declared: args.lane },
            },
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
/// `--reload-include`, with their defaults.
fn reload_settings(dirs: Vec<PathBuf>, include: Vec<String>) -> anyhow::Result<ReloadSettings> {
    let dirs = if dirs.is_empty() { vec![PathBuf::from(".")] } else { dirs };
    let dirs = dirs
        .into_iter()
        .map(|dir| {
            let absolute = dir.canonicalize().with_context(|| format!("--reload-dir {}", dir.display()))?;
            anyhow::ensure!(absolute.is_dir(), "--reload-dir {} is not a directory", dir.display());
            Ok(absolute)
        })
        .collect::<anyhow::Result<_>>()?;
    let include = if include.is_empty() { vec!["*.py".to_owned()] } else { include };
    let include = include
        .iter()
        .map(|text| glob::Pattern::new(text).map_err(|err| anyhow::anyhow!("--reload-include '{text}': {err}")))
        .collect::<anyhow::Result<_>>()?;
    Ok(ReloadSettings { dirs, include })
}

/// The interpreter for the bundled worker, by the rules of [`find_python`]; one given that
/// cannot be run is an error here, naming it, rather than a bare "No such file" from each worker.
fn worker_python(given: Option<PathBuf>) -> anyhow::Result<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    if let Some(given) = &given {
        let problem = if given.components().count() == 1 {
            which(&given.to_string_lossy(), &path).is_none().then_some("not found on PATH")
        } else if !given.exists() {
            Some("no such file")
        } else {
            (!is_executable(given)).then_some("not an executable file")
        };
        if let Some(problem) = problem {
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

/// `--root-path`: an absolute path of plain URL characters (no percent-encoding: it is compared
/// with decoded paths), kept without a trailing slash (`/` alone is no prefix at all).
fn parse_root_path(text: &str) -> Result<String, String> {
    let allowed = |b: u8| b.is_ascii_alphanumeric() || b"/-._~!$&'()*+,;=:@".contains(&b);
    if !text.starts_with('/') || !text.bytes().all(allowed) {
        return Err("must be a path such as /api: starting with /, of URL path characters".to_owned());
    }
    Ok(text.trim_end_matches('/').to_owned())
}

/// `--health-path`: an absolute path, matched without its query.
fn parse_health_path(text: &str) -> Result<String, String> {
    if !text.starts_with('/') || text.contains(['?', '#', ' ']) {
        return Err(format!("'{text}' is not a path such as /healthz"));
    }
    Ok(text.to_owned())
}

/// Seconds, fractions allowed: `10`, `0.5`.
pub fn parse_secs(text: &str) -> Result<Duration, String> {
    let secs: f64 = text.trim().parse().map_err(|_| format!("'{text}' is not a number of seconds"))?;
    if !secs.is_finite() || !(0.0..=1e9).contains(&secs) {
        return Err(format!("'{text}' is not a number of seconds"));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// `--threads` and `--front-threads`: a number, or `auto` for the rule the flag names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CountOrAuto {
    Auto,
    Count(usize),
}

pub fn parse_count_or_auto(text: &str) -> Result<CountOrAuto, String> {
    if text.trim().eq_ignore_ascii_case("auto") {
        return Ok(CountOrAuto::Auto);
    }
    text.trim().parse().map(CountOrAuto::Count).map_err(|_| format!("'{text}' is not a number or auto"))
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
                Interface::Wsgi => Some(false),
            },
            Launch::Command(_) => Some(false),
        }),
    })
}

/// `--front-threads auto` on a machine (or cpuset, or CPU quota) of `cpus` CPUs: one thread for
/// every four, at least one. One front thread takes a request for some 25 us of CPU, whatever the
/// app, so a machine whose workers need about three times that per request or more (any app
/// doing real work) keeps up with one thread in four; a second thread of tokio's scheduler costs
/// each request a third to a half more of the front's CPU in wake-ups between threads, which only
/// pays where one thread is the limit: not on 2 or 4 CPUs (docs/design/speed.md).
pub fn front_threads_for(cpus: usize) -> usize {
    (cpus / 4).max(1)
}

/// `--queue-target`: `auto`, or seconds where 0 means off.
pub fn parse_target(text: &str) -> Result<Target, String> {
    if text.trim().eq_ignore_ascii_case("auto") {
        return Ok(Target::Auto);
    }
    let secs = parse_secs(text).map_err(|_| format!("'{text}' is not a number of seconds or auto"))?;
    Ok(if secs.is_zero() { Target::Off } else { Target::Fixed(secs) })
}

/// A byte count, with an optional binary unit: `4096`, `32KiB`, `100MiB`, `1G` (K, M and G
/// are 1024-based too, as in nginx).
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

pub fn parse_size(text: &str) -> Result<u64, String> {
    let trimmed = text.trim();
    let split = trimmed.find(|c: char| !c.is_ascii_digit()).unwrap_or(trimmed.len());
    let (digits, unit) = trimmed.split_at(split);
    let multiplier: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        _ => return Err(format!("'{text}' is not a size such as 4096, 32KiB or 100MiB")),
    };
    digits
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(multiplier))
        .ok_or_else(|| format!("'{text}' is not a size such as 4096, 32KiB or 100MiB"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workers::launch::PythonApp;

    #[test]
    fn threads() {
        assert_eq!(parse_count_or_auto("auto"), Ok(CountOrAuto::Auto));
        assert_eq!(parse_count_or_auto("8"), Ok(CountOrAuto::Count(8)));
        assert!(parse_count_or_auto("many").is_err());
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
    fn sizes() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("32KiB"), Ok(32 * 1024));
        assert_eq!(parse_size("100M"), Ok(100 << 20));
        assert_eq!(parse_size("1 GiB"), Ok(1 << 30));
        assert!(parse_size("12 parsecs").is_err());
        assert!(parse_size("KiB").is_err());
        assert!(parse_size("99999999999G").is_err());
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
    fn queue_targets() {
        assert_eq!(parse_target("auto"), Ok(Target::Auto));
        assert_eq!(parse_target("0"), Ok(Target::Off));
        assert_eq!(parse_target("0.02"), Ok(Target::Fixed(Duration::from_millis(20))));
        assert_eq!(parse_target("soon"), Err("'soon' is not a number of seconds or auto".to_owned()));
    }

    #[test]
    fn front_threads() {
        let auto: Vec<usize> = [1, 2, 4, 8, 16, 32, 64].into_iter().map(front_threads_for).collect();
        assert_eq!(auto, [1, 1, 1, 2, 4, 8, 16]);
    }

    #[test]
    fn root_paths() {
        assert_eq!(parse_root_path("/api"), Ok("/api".to_owned()));
        assert_eq!(parse_root_path("/shop/v2/"), Ok("/shop/v2".to_owned()));
        assert_eq!(parse_root_path("/"), Ok(String::new()));
        for bad in ["api", "/a b", "/a?x=1", "/a#top", "/caf\u{e9}", "/caf%C3%A9", ""] {
            assert!(parse_root_path(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn seconds() {
        assert_eq!(parse_secs("10"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_secs("0.25"), Ok(Duration::from_millis(250)));
        assert!(parse_secs("-1").is_err());
        assert!(parse_secs("soon").is_err());
        assert!(parse_secs("inf").is_err());
    }
}
