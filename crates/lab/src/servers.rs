//! The servers the lab compares, one entry each in [`PEERS`]: how to tell it is installed (and
//! how to install it when it is not), and how to start it with W processes x T request slots
//! serving the demo app (or its twin, or another WSGI app such as Flask) on 127.0.0.1; then, for
//! all of them alike, when a started one is ready and how to stop it.
//!
//! A started server is a [`RunningServer`]: a guard that stops the whole process tree when it is
//! dropped, also on an error, and that is registered so Ctrl-C stops it too ([`stop_all_live`]).

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::fs::File;
use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use headway_common::bind::Bind;
use headway_common::client;
use headway_common::executable::{is_executable, which};
use headway_common::python::{find_python, python_from_env};
use headway_common::stats::{Snapshot, WorkerState};
use serde::Serialize;

use crate::process_tree::{signal_tree, start_apart, tree_of, MemorySampler, Tree};
use crate::twins::{Twins, ASGI_APP, FLASK_APP, WSGI_APP};

/// Longest a server may take to be ready.
const BOOT_TIMEOUT: Duration = Duration::from_secs(60);
/// Longest the lab waits for one answer to its own requests (readiness, stats): a server that
/// takes longer is not ready, or not well.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(2);
/// Longest a server may take to exit after SIGTERM before it gets SIGKILL.
const STOP_TIMEOUT: Duration = Duration::from_secs(5);
const POLL_EVERY: Duration = Duration::from_millis(50);

/// The servers the lab knows. Each has its entry in [`PEERS`], in this order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum ServerKind {
    Headway,
    /// headway's front and queue with Puma (single mode) as each worker: the fix for Puma's tail
    /// that needs no change to Puma.
    HeadwayPuma,
    Puma,
    Gunicorn,
    Granian,
    Uvicorn,
    Hypercorn,
    Node,
}

/// Everything the lab knows about one server. Adding a peer is adding its [`ServerKind`] and
/// its entry here.
static PEERS: [PeerSpec; 8] = [
    PeerSpec {
        kind: ServerKind::Headway,
        name: "headway",
        find: Find::Headway { worker: None },
        install_hint: "build headway with cargo build --release",
        configuration: "headway serve -w W -t T (the demo app, Python WSGI worker)",
        twin: None,
        args: headway_args,
    },
    PeerSpec {
        kind: ServerKind::HeadwayPuma,
        name: "headway+puma",
        find: Find::Headway { worker: Some("puma") },
        install_hint: "apt-get install puma ruby-rack",
        configuration: "headway serve -w W -t T --cmd 'puma -t T:T -b unix://{socket} demo.ru'",
        twin: Some("demo.ru (Rack)"),
        args: headway_puma_args,
    },
    PeerSpec {
        kind: ServerKind::Puma,
        name: "puma",
        find: Find::Program { program: "puma", version_prefix: "" },
        install_hint: "apt-get install puma ruby-rack",
        configuration: "puma -t T:T [-w W] demo.ru (single mode when W = 1)",
        twin: Some("demo.ru (Rack)"),
        args: puma_args,
    },
    PeerSpec {
        kind: ServerKind::Gunicorn,
        name: "gunicorn",
        find: Find::PythonModule("gunicorn"),
        install_hint: "pip install gunicorn",
        configuration: "gunicorn -k gthread -w W --threads T headway.demo:app",
        twin: None,
        args: gunicorn_args,
    },
    PeerSpec {
        kind: ServerKind::Granian,
        name: "granian",
        find: Find::PythonModule("granian"),
        install_hint: "pip install granian",
        configuration: "granian --interface wsgi --workers W --blocking-threads T headway.demo:app",
        twin: None,
        args: granian_args,
    },
    PeerSpec {
        kind: ServerKind::Uvicorn,
        name: "uvicorn",
        find: Find::PythonModule("uvicorn"),
        install_hint: "pip install 'uvicorn[standard]'",
        configuration: "uvicorn --workers W headway.twins.demo_asgi:app (async: no slots)",
        twin: Some("demo_asgi (ASGI)"),
        args: uvicorn_args,
    },
    PeerSpec {
        kind: ServerKind::Hypercorn,
        name: "hypercorn",
        find: Find::PythonModule("hypercorn"),
        install_hint: "pip install hypercorn",
        configuration: "hypercorn --workers W headway.twins.demo_asgi:app (async: no slots; HTTP/2 as h2c)",
        twin: Some("demo_asgi (ASGI)"),
        args: hypercorn_args,
    },
    PeerSpec {
        kind: ServerKind::Node,
        name: "node",
        find: Find::Program { program: "node", version_prefix: "node " },
        install_hint: "apt-get install nodejs",
        configuration: "WEB_CONCURRENCY=W node demo.js (cluster when W > 1; async: no slots)",
        twin: Some("demo.js"),
        args: node_args,
    },
];

struct PeerSpec {
    kind: ServerKind,
    /// Its name in `--servers` and in the tables.
    name: &'static str,
    find: Find,
    /// The command that installs it, for the line that says it is skipped.
    install_hint: &'static str,
    /// How it is configured for W x T, for the tables' footnotes.
    configuration: &'static str,
    /// The demo's twin it runs, as the tables name it; `None` for a WSGI server, which runs the
    /// demo app or the WSGI app its configuration names.
    twin: Option<&'static str>,
    /// Its command line for W x T on a port, after the program (or `python -m MODULE`).
    args: fn(&mut Command, &Setup),
}

/// How the lab finds a server.
enum Find {
    /// The headway binary the lab runs, and the program on PATH it runs as its worker (--cmd).
    Headway { worker: Option<&'static str> },
    /// A program on PATH whose `--version` names it (after `version_prefix`).
    Program { program: &'static str, version_prefix: &'static str },
    /// A Python module, run as `python -m MODULE` by the Python worker's interpreter when that
    /// can import it (its `__version__`, or its distribution's version, names it), else its script on
    /// PATH.
    PythonModule(&'static str),
}

impl ServerKind {
    /// Every server, in the order of [`PEERS`].
    pub fn all() -> impl Iterator<Item = ServerKind> {
        PEERS.iter().map(|spec| spec.kind)
    }

    fn spec(self) -> &'static PeerSpec {
        &PEERS[self as usize]
    }

    pub fn name(self) -> &'static str {
        self.spec().name
    }

    pub fn parse(name: &str) -> Option<ServerKind> {
        ServerKind::all().find(|kind| kind.name() == name.trim())
    }

    /// How this server is configured for W x T, for the tables' footnotes.
    pub fn configuration(self) -> &'static str {
        self.spec().configuration
    }

    /// Whether it serves HTTP/2 with prior knowledge (h2c) on a plain port, beside HTTP/1.1:
    /// headway, granian and hypercorn do by default.
    pub fn speaks_h2c(self) -> bool {
        matches!(self, ServerKind::Headway | ServerKind::Granian | ServerKind::Hypercorn)
    }

    /// headway has a control address: the lab reads its stats there.
    fn has_control(self) -> bool {
        matches!(self.spec().find, Find::Headway { .. })
    }
}

/// What the lab runs a server with, found once per run.
pub struct Environment {
    /// The `headway` binary (the running one, or another for tests).
    pub headway: PathBuf,
    /// PATH to search for peers.
    pub path: OsString,
    /// The interpreter whose `-m gunicorn` (etc.) the lab tries first: the one `headway serve`
    /// runs its Python worker with.
    pub python: Option<PathBuf>,
    pub twins: Twins,
    /// CPU cores of this machine, for the ideal.
    pub cores: usize,
    /// Flask's version where `python` imports it; asked the first time it is needed.
    flask: OnceLock<Option<String>>,
    /// Start each server in a session of its own (`headway lab run --own-sessions`), else in a
    /// process group of its own in the lab's session. Either way the lab stops it by its group.
    pub own_sessions: bool,
}

impl Environment {
    pub fn new(headway: PathBuf) -> anyhow::Result<Environment> {
        let path = std::env::var_os("PATH").unwrap_or_default();
        let python = find_python(python_from_env(), Some(&headway), &path);
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        Ok(Environment {
            headway,
            path,
            python,
            twins: Twins::write()?,
            cores,
            flask: OnceLock::new(),
            own_sessions: false,
        })
    }

    /// Flask's version, if the interpreter the lab runs the Python servers with has it.
    fn flask(&self) -> Option<&str> {
        let probe = "import importlib.metadata, flask; print(importlib.metadata.version('flask'))";
        self.flask.get_or_init(|| first_line_of(Command::new(self.python.as_ref()?).args(["-c", probe]))).as_deref()
    }
}

/// How a server is launched.
#[derive(Debug, Clone)]
enum Launcher {
    Program(PathBuf),
    PythonModule { python: PathBuf, module: &'static str },
}

/// An installed server, ready to start.
#[derive(Debug, Clone)]
pub struct Peer {
    pub kind: ServerKind,
    pub version: String,
    /// How the lab found it (shown at the start of a run).
    pub found: String,
    launcher: Launcher,
}

/// A server that is not installed: the one line the lab prints for it.
#[derive(Debug, Clone, Serialize)]
pub struct Skipped {
    pub server: ServerKind,
    pub reason: String,
}

impl std::fmt::Display for Skipped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "skipping {}: {}", self.server.name(), self.reason)
    }
}

/// Finds `kind` in `env`, or says why it is skipped and how to install it.
pub fn detect(kind: ServerKind, env: &Environment) -> Result<Peer, Skipped> {
    let spec = kind.spec();
    let missing = || Skipped { server: kind, reason: format!("not installed ({})", spec.install_hint) };
    match spec.find {
        Find::Headway { worker } => {
            if !is_executable(&env.headway) {
                return Err(missing());
            }
            let mut version = format!("headway {}", env!("CARGO_PKG_VERSION"));
            let mut found = env.headway.display().to_string();
            if let Some(worker) = worker {
                let (path, worker_version) = program_version(worker, env).ok_or_else(missing)?;
                version = format!("{version} + {worker_version}");
                found = format!("{found} with {}", path.display());
            }
            Ok(Peer { kind, version, found, launcher: Launcher::Program(env.headway.clone()) })
        }
        Find::Program { program, version_prefix } => {
            let (path, version) = program_version(program, env).ok_or_else(missing)?;
            let found = path.display().to_string();
            Ok(Peer { kind, version: format!("{version_prefix}{version}"), found, launcher: Launcher::Program(path) })
        }
        Find::PythonModule(module) => {
            if let Some(python) = &env.python {
                // Hypercorn has no `__version__`: its distribution's metadata says it.
                let probe = format!(
                    "import importlib.metadata, {module}; \
                     print(getattr({module}, '__version__', None) or importlib.metadata.version('{module}'))"
                );
                if let Some(version) = first_line_of(Command::new(python).args(["-c", &probe])) {
                    return Ok(Peer {
                        kind,
                        version: format!("{module} {version}"),
                        found: format!("{} -m {module} (the Python worker's interpreter)", python.display()),
                        launcher: Launcher::PythonModule { python: python.clone(), module },
                    });
                }
            }
            let (path, version) = program_version(module, env).ok_or_else(missing)?;
            let found = format!("{} (on PATH, not importable by the worker's Python)", path.display());
            Ok(Peer { kind, version, found, launcher: Launcher::Program(path) })
        }
    }
}

/// `program` on the lab's PATH, and the first line of its `--version`.
fn program_version(program: &str, env: &Environment) -> Option<(PathBuf, String)> {
    let path = which(program, &env.path)?;
    let version = first_line_of(Command::new(&path).arg("--version"))?;
    Some((path, version))
}

/// The first non-empty line a command prints (stdout, else stderr), if it runs and succeeds.
fn first_line_of(command: &mut Command) -> Option<String> {
    let output = command.stdin(Stdio::null()).output().ok()?;
    if !output.status.success() {
        return None;
    }
    let text = [output.stdout, output.stderr].concat();
    String::from_utf8_lossy(&text).lines().map(str::trim).find(|line| !line.is_empty()).map(str::to_owned)
}

/// W x T and what headway needs beyond it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ServerConfig {
    pub workers: usize,
    pub threads: usize,
    /// headway's --queue-timeout (seconds), when the scenario sets one.
    pub queue_timeout: Option<f64>,
    /// The WSGI app (module:callable) that headway, gunicorn and granian serve instead of the demo
    /// app: the app under `recommend`; [`FLASK_APP`] for `throughput`, which falls back to the demo
    /// app where Flask is not installed. The other servers run the demo's twins whatever it says.
    pub app: Option<String>,
    /// More `headway serve` flags (for `scale-out`: the agent check, health path, shutdown delay).
    pub headway_flags: Vec<String>,
    /// The cases speak HTTP/2 with prior knowledge: servers that do not serve it are skipped.
    pub http2: bool,
}

impl ServerConfig {
    pub fn new(workers: usize, threads: usize) -> ServerConfig {
        ServerConfig { workers, threads, queue_timeout: None, app: None, headway_flags: Vec::new(), http2: false }
    }
}

/// Roots of the servers running now, for [`stop_all_live`].
static LIVE: Mutex<BTreeSet<u32>> = Mutex::new(BTreeSet::new());

/// Kills every server the lab started that is still running (on Ctrl-C).
pub fn stop_all_live() {
    let roots: Vec<u32> = LIVE.lock().map(|live| live.iter().copied().collect()).unwrap_or_default();
    for root in roots {
        signal_tree(&tree_of(root), libc::SIGKILL);
    }
}

/// Has [`stop_all_live`] stop `pid` too: a process the lab started itself (HAProxy), until
/// [`forget_live`].
pub fn watch_live(pid: u32) {
    if let Ok(mut live) = LIVE.lock() {
        live.insert(pid);
    }
}

pub fn forget_live(pid: u32) {
    if let Ok(mut live) = LIVE.lock() {
        live.remove(&pid);
    }
}

/// A server the lab started. Dropping it stops it.
pub struct RunningServer {
    pub kind: ServerKind,
    pub port: u16,
    pub control_port: Option<u16>,
    pub config: ServerConfig,
    /// The app it serves, as the tables name it.
    pub app: String,
    child: Child,
    log: PathBuf,
    pub memory: MemorySampler,
}

impl Peer {
    /// Starts the server and waits until it is ready (see [`RunningServer::readiness`]).
    pub async fn start(&self, env: &Environment, config: &ServerConfig) -> anyhow::Result<RunningServer> {
        self.start_on(env, config, free_port()?).await
    }

    /// [`Peer::start`] on a given port (to restart a server where a balancer expects it).
    pub async fn start_on(&self, env: &Environment, config: &ServerConfig, port: u16) -> anyhow::Result<RunningServer> {
        let control_port = self.kind.has_control().then(free_port).transpose()?;
        let log = env.twins.log_path(&format!("{}-{}x{}-{port}", self.kind.name(), config.workers, config.threads));
        let (wsgi_app, app) = self.app(env, config);
        let mut command = self.command(&Setup { env, config, port, control_port, wsgi_app: wsgi_app.as_deref() });
        let config = config.clone();
        let output = File::create(&log).with_context(|| format!("cannot create {}", log.display()))?;
        command.stdin(Stdio::null()).stdout(output.try_clone()?).stderr(output);
        start_apart(&mut command, env.own_sessions);
        let child = command.spawn().with_context(|| format!("cannot start {}", self.kind.name()))?;
        if let Ok(mut live) = LIVE.lock() {
            live.insert(child.id());
        }
        let memory = MemorySampler::start(child.id());
        let mut server = RunningServer { kind: self.kind, port, control_port, config, app, child, log, memory };
        server.wait_ready().await?;
        Ok(server)
    }

    /// The WSGI app it is to serve for `config` (`None`: the demo app), and the name of what it
    /// serves.
    fn app(&self, env: &Environment, config: &ServerConfig) -> (Option<String>, String) {
        if let Some(twin) = self.kind.spec().twin {
            return (None, twin.to_owned());
        }
        match config.app.as_deref() {
            None => (None, "demo".to_owned()),
            Some(FLASK_APP) => match env.flask() {
                Some(version) => (Some(FLASK_APP.to_owned()), format!("Flask {version}")),
                None => (None, "demo (no Flask)".to_owned()),
            },
            Some(app) => (Some(app.to_owned()), app.to_owned()),
        }
    }

    fn command(&self, setup: &Setup) -> Command {
        let mut command = match &self.launcher {
            Launcher::Program(path) => Command::new(path),
            Launcher::PythonModule { python, module } => {
                let mut command = Command::new(python);
                command.args(["-m", module]);
                command
            }
        };
        let spec = self.kind.spec();
        (spec.args)(&mut command, setup);
        if matches!(spec.find, Find::PythonModule(_)) {
            // The Python peers import the demo app from the twins' directory.
            let mut path = OsString::from(setup.env.twins.python_path());
            if let Some(old) = std::env::var_os("PYTHONPATH").filter(|old| !old.is_empty()) {
                path.push(":");
                path.push(old);
            }
            command.env("PYTHONPATH", path);
        }
        command
    }
}

/// What a server's command line is made of.
struct Setup<'a> {
    env: &'a Environment,
    config: &'a ServerConfig,
    port: u16,
    /// headway's control port.
    control_port: Option<u16>,
    /// The WSGI app to serve instead of the demo app.
    wsgi_app: Option<&'a str>,
}

impl Setup<'_> {
    fn workers(&self) -> String {
        self.config.workers.to_string()
    }

    fn threads(&self) -> String {
        self.config.threads.to_string()
    }

    fn host_port(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }
}

fn headway_args(command: &mut Command, setup: &Setup) {
    let (w, t, bind) = (setup.workers(), setup.threads(), setup.host_port());
    command.arg("serve").args(setup.wsgi_app);
    command.args(["-w", &w, "-t", &t, "-b", &bind, "--log-level", "warn", "--graceful-timeout", "1"]);
    if let Some(control) = setup.control_port {
        command.args(["--control", &format!("127.0.0.1:{control}")]);
    }
    if let Some(secs) = setup.config.queue_timeout {
        command.args(["--queue-timeout", &secs.to_string()]);
    }
    command.args(&setup.config.headway_flags);
}

fn headway_puma_args(command: &mut Command, setup: &Setup) {
    headway_args(command, setup);
    let t = setup.threads();
    let puma = which("puma", &setup.env.path).unwrap_or_else(|| "puma".into());
    let cmd = format!(
        "exec {} -e production -t {t}:{t} -b unix://{{socket}} {}",
        shell_quote(&puma),
        shell_quote(&setup.env.twins.rack_app())
    );
    command.args(["--cmd", &cmd]);
}

fn puma_args(command: &mut Command, setup: &Setup) {
    let t = setup.threads();
    command.args(["-e", "production", "-t", &format!("{t}:{t}"), "-b", &format!("tcp://{}", setup.host_port())]);
    if setup.config.workers > 1 {
        command.args(["-w", &setup.workers()]);
    }
    command.arg(setup.env.twins.rack_app());
}

fn gunicorn_args(command: &mut Command, setup: &Setup) {
    command.args(["-k", "gthread", "-w", &setup.workers(), "--threads", &setup.threads(), "-b", &setup.host_port()]);
    command.args(["--log-level", "warning", "--graceful-timeout", "1", setup.wsgi_app.unwrap_or(WSGI_APP)]);
}

fn granian_args(command: &mut Command, setup: &Setup) {
    command.args(["--interface", "wsgi", "--workers", &setup.workers(), "--blocking-threads", &setup.threads()]);
    command.args(["--host", "127.0.0.1", "--port", &setup.port.to_string(), "--log-level", "warning"]);
    command.arg(setup.wsgi_app.unwrap_or(WSGI_APP));
}

fn uvicorn_args(command: &mut Command, setup: &Setup) {
    command.args(["--workers", &setup.workers(), "--host", "127.0.0.1", "--port", &setup.port.to_string()]);
    command.args(["--log-level", "warning", ASGI_APP]);
}

fn hypercorn_args(command: &mut Command, setup: &Setup) {
    command.args(["--workers", &setup.workers(), "--bind", &setup.host_port(), "--log-level", "warning", ASGI_APP]);
}

fn node_args(command: &mut Command, setup: &Setup) {
    command.arg(setup.env.twins.node_app()).env("WEB_CONCURRENCY", setup.workers());
    command.env("PORT", setup.port.to_string()).env_remove("HEADWAY_SOCKET");
}

fn shell_quote(path: &Path) -> String {
    format!("'{}'", path.display().to_string().replace('\'', r"'\''"))
}

/// A port nobody listens on now (the kernel's pick; the server binds it a moment later).
pub fn free_port() -> anyhow::Result<u16> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).context("cannot find a free port")?;
    Ok(listener.local_addr()?.port())
}

impl RunningServer {
    pub fn name(&self) -> &'static str {
        self.kind.name()
    }

    /// The process the lab started: the root of the server's process tree.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    async fn wait_ready(&mut self) -> anyhow::Result<()> {
        let deadline = Instant::now() + BOOT_TIMEOUT;
        loop {
            if let Some(status) = self.child.try_wait()? {
                bail!("{} exited with {status} while starting; its last output:\n{}", self.name(), self.log_tail());
            }
            let not_yet = match self.readiness().await {
                Ok(true) => return Ok(()),
                Ok(false) => "not every worker is ready".to_owned(),
                Err(err) => format!("{err:#}"),
            };
            if Instant::now() > deadline {
                bail!(
                    "{} was not ready within {BOOT_TIMEOUT:?} ({not_yet}); its last output:\n{}",
                    self.name(),
                    self.log_tail()
                );
            }
            tokio::time::sleep(POLL_EVERY).await;
        }
    }

    /// Whether the server is ready, by its own account, not by any page of the app (an app under
    /// `recommend` may have none the lab knows): headway when its control address shows every
    /// worker ready; any other server when its port answers HTTP at all, whatever the status.
    /// An error is a server that does not answer (yet).
    async fn readiness(&self) -> anyhow::Result<bool> {
        match self.stats().await? {
            Some(stats) => {
                let ready = stats.workers.iter().filter(|worker| worker.state == WorkerState::Ready).count();
                Ok(ready >= self.config.workers)
            }
            None => {
                let public = local(self.port);
                in_time(&public, "/", client::get(&public, "/")).await.map(|_| true)
            }
        }
    }

    /// headway's stats, from its control address; `None` for a peer, which has none.
    pub async fn stats(&self) -> anyhow::Result<Option<Snapshot>> {
        let Some(port) = self.control_port else { return Ok(None) };
        let control = local(port);
        let body = in_time(&control, "/stats", client::get_stats(&control)).await?;
        let stats = serde_json::from_slice(&body).with_context(|| format!("{control}/stats is not headway's stats"))?;
        Ok(Some(stats))
    }

    /// The last lines of the server's output.
    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }

    /// Stops the server: SIGTERM to its whole tree, SIGKILL to whatever is left after a few
    /// seconds. Returns how long that took.
    pub fn stop(mut self) -> Duration {
        self.stop_now()
    }

    /// Stops the server as its operator would: SIGTERM to the main process alone, which
    /// shuts down in its own order (headway: readiness off, serve on for its shutdown delay,
    /// drain, stop its workers); whatever is left after `limit` is killed.
    pub async fn stop_gracefully(mut self, limit: Duration) {
        // SAFETY: kill(2) with a pid this guard owns and has not reaped yet.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM) };
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline && matches!(self.child.try_wait(), Ok(None)) {
            tokio::time::sleep(POLL_EVERY).await;
        }
        self.stop_now();
    }

    fn stop_now(&mut self) -> Duration {
        let started = Instant::now();
        let root = self.child.id();
        let mut seen = tree_of(root);
        signal_tree(&seen, libc::SIGTERM);
        let deadline = started + STOP_TIMEOUT;
        while Instant::now() < deadline {
            let now = tree_of(root);
            if matches!(self.child.try_wait(), Ok(Some(_))) && all_gone(&seen) {
                break;
            }
            seen.pids.extend(now.pids);
            seen.groups.extend(now.groups);
            std::thread::sleep(POLL_EVERY);
        }
        signal_tree(&seen, libc::SIGKILL);
        let _ = self.child.wait();
        if let Ok(mut live) = LIVE.lock() {
            live.remove(&root);
        }
        started.elapsed()
    }
}

fn all_gone(tree: &Tree) -> bool {
    tree.pids.iter().all(|pid| !Path::new(&format!("/proc/{pid}")).exists())
}

impl Drop for RunningServer {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            self.stop_now();
        }
    }
}

/// 127.0.0.1:`port`, where the lab runs every server.
fn local(port: u16) -> Bind {
    Bind::Tcp(SocketAddr::from((Ipv4Addr::LOCALHOST, port)))
}

/// The answer to `request` (a GET of `path` at `bind`), if it comes within [`ANSWER_TIMEOUT`].
async fn in_time<T>(
    bind: &Bind,
    path: &str,
    request: impl std::future::Future<Output = anyhow::Result<T>>,
) -> anyhow::Result<T> {
    tokio::time::timeout(ANSWER_TIMEOUT, request)
        .await
        .with_context(|| format!("no answer from {bind}{path} within {ANSWER_TIMEOUT:?}"))?
}

#[cfg(test)]
mod tests {
    use super::*;

    fn environment_with_path(path: &str) -> Environment {
        Environment {
            headway: PathBuf::from("/nonexistent/headway"),
            path: OsString::from(path),
            python: None,
            twins: Twins::write().expect("temp dir"),
            cores: 2,
            flask: OnceLock::new(),
            own_sessions: false,
        }
    }

    #[test]
    fn a_missing_peer_is_skipped_with_how_to_install_it() {
        let env = environment_with_path("/nonexistent");
        let skipped = detect(ServerKind::Puma, &env).expect_err("no puma on this PATH");
        assert_eq!(skipped.to_string(), "skipping puma: not installed (apt-get install puma ruby-rack)");
        let skipped = detect(ServerKind::Gunicorn, &env).expect_err("no python, no gunicorn");
        assert_eq!(skipped.to_string(), "skipping gunicorn: not installed (pip install gunicorn)");
        let skipped = detect(ServerKind::Headway, &env).expect_err("no headway binary there");
        assert!(skipped.to_string().starts_with("skipping headway: not installed"));
    }

    #[test]
    fn a_program_that_fails_its_version_check_is_skipped() {
        let dir = tempfile::tempdir().expect("temp dir");
        let fake = dir.path().join("node");
        std::fs::write(&fake, "#!/bin/sh\nexit 1\n").expect("write");
        std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755)).expect("chmod");
        let env = environment_with_path(&dir.path().display().to_string());
        let skipped = detect(ServerKind::Node, &env).expect_err("a broken node is not installed");
        assert_eq!(skipped.to_string(), "skipping node: not installed (apt-get install nodejs)");
    }

    #[test]
    fn names_round_trip() {
        for kind in ServerKind::all() {
            assert_eq!(ServerKind::parse(kind.name()), Some(kind));
        }
        assert_eq!(ServerKind::parse("apache"), None);
    }

    #[test]
    fn peers_are_listed_in_the_order_of_their_kinds() {
        for (index, spec) in PEERS.iter().enumerate() {
            assert_eq!(spec.kind as usize, index, "{} is out of place in PEERS", spec.name);
        }
    }
}
