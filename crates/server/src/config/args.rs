//! The `headway serve` command line: every flag, its default and its help, as clap reads them.
//! What each flag means for the parts of the server is built from them in [`super::Config`].

use std::path::PathBuf;
use std::time::Duration;

use headway_common::python::PYTHON_ENV;

use super::count_or_auto::CountOrAuto;
use super::parse::{parse_count_or_auto, parse_health_path, parse_root_path, parse_secs, parse_size, parse_target};
use super::parse::{parse_scale_up_wait, parse_worker_count};
use super::worker_count::WorkerCount;
use crate::front::forwarding_fields::TrustedProxies;
use crate::front::static_files::{Mount, Sendfile};
use crate::front::tls::{ClientAuth, Password};
use crate::ops::access_log::AccessLogFormat;
use crate::queue::{LanePattern, Target};
use crate::workers::affinity::CpuAffinity;
use crate::workers::launch::Interface;
use crate::workers::scaling::ScaleUpWait;

#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:\n  headway serve                          the built-in demo app\n  \
    headway serve -w 4 -t 8 myapp.wsgi:application\n  \
    headway serve -w 2 main:app                  a FastAPI app: 16 slots a worker, WebSockets included\n  \
    headway serve -t 5 config.ru                 a Rack app in the bundled Ruby worker\n  \
    headway serve -t 5 --cmd 'puma -t 5:5 -b unix://{socket} config.ru'")]
pub struct ServeArgs {
    /// The app as module:callable, WSGI (PEP 3333) or ASGI 3; a module alone is
    /// module:application, as in gunicorn; or a Rack app's config.ru (a path ending in .ru), served
    /// by the bundled Ruby worker. Without it, and without --cmd, the demo app.
    #[arg(value_name = "APP")]
    pub app: Option<String>,

    /// How the bundled worker calls the app. auto: ASGI if it is a coroutine function or has an
    /// async __call__, else WSGI. WebSockets reach an ASGI app either way (with auto, each worker
    /// tells the front once it has imported the app)
    #[arg(long, value_enum, default_value = "auto", value_name = "KIND", conflicts_with = "cmd")]
    pub interface: Interface,

    /// Worker processes; MIN:MAX (2:8) starts MIN and adds workers while requests wait for a
    /// slot, removes them once idle (--scale-up-wait, --worker-idle-timeout, --max-memory).
    /// SIGTTIN adds one, SIGTTOU removes one [default: number of CPUs]
    #[arg(short, long, env = "WEB_CONCURRENCY", value_name = "N|MIN:MAX", value_parser = parse_worker_count)]
    pub workers: Option<WorkerCount>,

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
    /// WSGI's and Rack's SCRIPT_NAME and ASGI's root_path. A request path that starts with it is
    /// taken to include it (WSGI's and Rack's PATH_INFO is the rest); one that does not, to have
    /// had it removed by the router (ASGI's path gets it back). Bundled workers only. As uvicorn
    /// --root-path, gunicorn's SCRIPT_NAME
    #[arg(long, value_name = "PATH", value_parser = parse_root_path)]
    pub root_path: Option<String>,

    /// Python interpreter for the bundled worker [default: the python3 next to this program,
    /// else python3 on PATH]
    #[arg(long, env = PYTHON_ENV, value_name = "PATH")]
    pub python: Option<PathBuf>,

    /// Ruby interpreter for the bundled Rack worker (an APP ending in .ru, or --interface rack)
    /// [default: ruby on PATH]
    #[arg(long, env = "HEADWAY_RUBY", value_name = "PATH")]
    pub ruby: Option<PathBuf>,

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

    /// The most memory the unfinished fragmented messages of every WebSocket hold together (a
    /// fragmented message waits in the front until its last frame shows it fits
    /// --max-websocket-message); a socket whose message would take more is closed with 1013
    #[arg(long, default_value = "256MiB", value_name = "BYTES", value_parser = parse_size)]
    pub max_websocket_held: u64,

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

    /// With -w MIN:MAX: add a worker when requests waited longer than this for a slot over an
    /// interval while every slot was busy and the backlog did not drain. auto: the mean service
    /// time, below half of --queue-target (a held overload keeps waits there)
    #[arg(long, default_value = "auto", value_name = "SECS|auto", value_parser = parse_scale_up_wait,
          help_heading = LIFECYCLE)]
    pub scale_up_wait: ScaleUpWait,

    /// With -w MIN:MAX: remove a worker (it finishes its requests first) once a worker's worth of
    /// slots has stood idle this long, never below MIN. As NGINX Unit's idle_timeout
    #[arg(long, default_value = "30", value_name = "SECS", value_parser = parse_secs, help_heading = LIFECYCLE)]
    pub worker_idle_timeout: Duration,

    /// Never add a worker when the workers' resident memory together, plus one more worker's
    /// (the mean of theirs), would pass SIZE (4G) [default: no limit]
    #[arg(long, value_name = "SIZE", value_parser = parse_size, help_heading = LIFECYCLE)]
    pub max_memory: Option<u64>,

    /// Import the app once, in a parent process, and fork every worker from it: the workers
    /// share its memory until they write to it. Connections opened at import must be opened
    /// again in each worker (--hooks). Bundled worker only (the Rack worker loads config.ru once
    /// and runs GC.compact before forking). As gunicorn --preload, Puma preload_app!, uvicorn and
    /// granian have none
    #[arg(long, conflicts_with = "cmd", help_heading = LIFECYCLE)]
    pub preload: bool,

    /// A module whose post_fork(worker) each worker process calls once the app is imported,
    /// before it serves (with --preload, right after the fork), and on_exit(worker) as it stops
    /// cleanly (worker.index, worker.pid). Bundled worker only. As gunicorn's post_fork and
    /// worker_exit, Puma's before_worker_boot. For the Rack worker, a Ruby file of
    /// on_worker_boot { |worker| } and on_worker_shutdown { |worker| } blocks (and, with --preload,
    /// before_fork { }), as in Puma
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

    /// Serve the files of DIR under URL_PREFIX at the front (GET and HEAD, with ETag, ranges and
    /// precompressed .br/.gz variants), without a slot or the queue; a file that is not there
    /// goes to the app. After DIR, `:only` answers 404 for such a file instead and `:dotfiles`
    /// serves names starting with a dot (.well-known/). Repeat for several. As granian
    /// --static-path-mount, WhiteNoise
    #[arg(long = "static", value_name = "URL_PREFIX=DIR[:only][:dotfiles]", value_parser = Mount::parse_static, help_heading = FILES)]
    pub static_mounts: Vec<Mount>,

    /// Cache-Control max-age, in seconds, for files served by --static; a name carrying a digest
    /// (app-5c1f4d8e.css, app.3f9a1c2b7d4e.css) is also immutable [default: no Cache-Control]
    #[arg(long, value_name = "SECS", value_parser = parse_secs, help_heading = FILES)]
    pub static_max_age: Option<Duration>,

    /// A request under a --static prefix for a file that is not there gets 404, not the app (every
    /// mount's :only)
    #[arg(long, help_heading = FILES)]
    pub static_only: bool,

    /// Serve files whose names start with a dot (.well-known/acme-challenge/...) under every
    /// --static prefix (every mount's :dotfiles); `..` is refused all the same [default: refused]
    #[arg(long, help_heading = FILES)]
    pub static_dotfiles: bool,

    /// Take a worker's X-Accel-Redirect under URI_PREFIX: the front sends the file of DIR it
    /// names in place of the worker's body. Repeat for several. As nginx's internal locations
    #[arg(long, value_name = "URI_PREFIX=DIR", value_parser = Mount::parse, help_heading = FILES)]
    pub accel_mapping: Vec<Mount>,

    /// Take a worker's X-Sendfile naming a file under DIR: the front sends it in place of the
    /// worker's body. Repeat for several. As mod_xsendfile's XSendFilePath
    #[arg(long, value_name = "DIR", help_heading = FILES)]
    pub sendfile_root: Vec<PathBuf>,

    /// When the front sends a file's bytes with sendfile(2) rather than copied: a local client
    /// (a proxy, a load tool) reads a large file faster copied. As nginx's sendfile
    #[arg(long, value_enum, default_value = "auto", value_name = "WHEN", help_heading = FILES)]
    pub sendfile: Sendfile,

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

/// The `--help` heading that groups the flags of files the front sends itself.
const FILES: &str = "Static files";

/// `--log-format`.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    Json,
}
