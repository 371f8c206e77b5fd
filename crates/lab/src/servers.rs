//! The servers the lab compares, one definition each: how to tell it is installed (and how to
//! install it when it is not), how to start it with W processes x T request slots serving the
//! demo app (or its twin) on 127.0.0.1, when it is ready, and how to stop it.
//!
//! A started server is a [`RunningServer`]: a guard that stops the whole process tree when it is
//! dropped, also on an error, and that is registered so Ctrl-C stops it too ([`stop_all_live`]).

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::fs::File;
use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use headway_common::bind::Bind;
use headway_common::client;
use headway_common::executable::{is_executable, which};
use headway_common::python::{find_python, python_from_env};
use headway_common::stats::{Snapshot, WorkerState};
use serde::Serialize;

use crate::process_tree::{signal_tree, tree_of, MemorySampler, Tree};
use crate::twins::{Twins, ASGI_APP, WSGI_APP};

/// Longest a server may take to be ready.
const BOOT_TIMEOUT: Duration = Duration::from_secs(60);
/// Longest the lab waits for one answer to its own requests (readiness, stats): a server that
/// takes longer is not ready, or not well.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(2);
/// Longest a server may take to exit after SIGTERM before it gets SIGKILL.
const STOP_TIMEOUT: Duration = Duration::from_secs(5);
const POLL_EVERY: Duration = Duration::from_millis(50);

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
    Node,
}

impl ServerKind {
    pub const ALL: [ServerKind; 7] = [
        ServerKind::Headway,
        ServerKind::HeadwayPuma,
        ServerKind::Puma,
        ServerKind::Gunicorn,
        ServerKind::Granian,
        ServerKind::Uvicorn,
        ServerKind::Node,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ServerKind::Headway => "headway",
            ServerKind::HeadwayPuma => "headway+puma",
            ServerKind::Puma => "puma",
            ServerKind::Gunicorn => "gunicorn",
            ServerKind::Granian => "granian",
            ServerKind::Uvicorn => "uvicorn",
            ServerKind::Node => "node",
        }
    }

    pub fn parse(name: &str) -> Option<ServerKind> {
        ServerKind::ALL.into_iter().find(|kind| kind.name() == name.trim())
    }

    fn install_hint(self) -> &'static str {
        match self {
            ServerKind::Headway => "build headway with cargo build --release",
            ServerKind::HeadwayPuma | ServerKind::Puma => "apt-get install puma ruby-rack",
            ServerKind::Gunicorn => "pip install gunicorn",
            ServerKind::Granian => "pip install granian",
            ServerKind::Uvicorn => "pip install 'uvicorn[standard]'",
            ServerKind::Node => "apt-get install nodejs",
        }
    }

    /// Python peers: the module run with `python -m`, and the one whose `__version__` names it.
    fn python_module(self) -> Option<&'static str> {
        match self {
            ServerKind::Gunicorn => Some("gunicorn"),
            ServerKind::Granian => Some("granian"),
            ServerKind::Uvicorn => Some("uvicorn"),
            _ => None,
        }
    }

    /// How this server is configured for W x T, for the tables' footnotes.
    pub fn configuration(self) -> &'static str {
        match self {
            ServerKind::Headway => "headway serve -w W -t T (the demo app, Python WSGI worker)",
            ServerKind::HeadwayPuma => "headway serve -w W -t T --cmd 'puma -t T:T -b unix://{socket} demo.ru'",
            ServerKind::Puma => "puma -t T:T [-w W] demo.ru (single mode when W = 1)",
            ServerKind::Gunicorn => "gunicorn -k gthread -w W --threads T headway.demo:app",
            ServerKind::Granian => "granian --interface wsgi --workers W --blocking-threads T headway.demo:app",
            ServerKind::Uvicorn => "uvicorn --workers W headway.twins.demo_asgi:app (async: no slots)",
            ServerKind::Node => "WEB_CONCURRENCY=W node demo.js (cluster when W > 1; async: no slots)",
        }
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
}

impl Environment {
    pub fn new(headway: PathBuf) -> anyhow::Result<Environment> {
        let path = std::env::var_os("PATH").unwrap_or_default();
        let python = find_python(python_from_env(), Some(&headway), &path);
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        Ok(Environment { headway, path, python, twins: Twins::write()?, cores })
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
    let missing = || Skipped { server: kind, reason: format!("not installed ({})", kind.install_hint()) };
    let program = |name: &str, version_arg: &str| -> Result<Peer, Skipped> {
        let path = which(name, &env.path).ok_or_else(missing)?;
        let version = first_line_of(Command::new(&path).arg(version_arg)).ok_or_else(missing)?;
        Ok(Peer { kind, version, found: path.display().to_string(), launcher: Launcher::Program(path) })
    };
    match kind {
        ServerKind::Headway => {
            if !is_executable(&env.headway) {
                return Err(missing());
            }
            let version = format!("headway {}", env!("CARGO_PKG_VERSION"));
            let found = env.headway.display().to_string();
            Ok(Peer { kind, version, found, launcher: Launcher::Program(env.headway.clone()) })
        }
        ServerKind::Puma => program("puma", "--version"),
        ServerKind::HeadwayPuma => {
            let headway = detect(ServerKind::Headway, env).map_err(|_| missing())?;
            let puma = program("puma", "--version")?;
            Ok(Peer {
                kind,
                version: format!("{} + {}", headway.version, puma.version),
                found: format!("{} with {}", headway.found, puma.found),
                launcher: headway.launcher,
            })
        }
        ServerKind::Node => {
            program("node", "--version").map(|peer| Peer { version: format!("node {}", peer.version), ..peer })
        }
        ServerKind::Gunicorn | ServerKind::Granian | ServerKind::Uvicorn => {
            let module = kind.python_module().expect("a Python peer has a module");
            if let Some(python) = &env.python {
                let probe = format!("import {module}; print({module}.__version__)");
                if let Some(version) = first_line_of(Command::new(python).args(["-c", &probe])) {
                    return Ok(Peer {
                        kind,
                        version: format!("{module} {version}"),
                        found: format!("{} -m {module} (the Python worker's interpreter)", python.display()),
                        launcher: Launcher::PythonModule { python: python.clone(), module },
                    });
                }
            }
            let peer = program(module, "--version")?;
            Ok(Peer { found: format!("{} (on PATH, not importable by the worker's Python)", peer.found), ..peer })
        }
    }
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
    /// headway's WSGI app (module:callable) instead of the demo app (for `recommend`).
    pub app: Option<String>,
}

impl ServerConfig {
    pub fn new(workers: usize, threads: usize) -> ServerConfig {
        ServerConfig { workers, threads, queue_timeout: None, app: None }
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

/// A server the lab started. Dropping it stops it.
pub struct RunningServer {
    pub kind: ServerKind,
    pub port: u16,
    pub control_port: Option<u16>,
    pub config: ServerConfig,
    child: Child,
    log: PathBuf,
    pub memory: MemorySampler,
}

impl Peer {
    /// Starts the server and waits until it is ready (see [`RunningServer::readiness`]).
    pub async fn start(&self, env: &Environment, config: &ServerConfig) -> anyhow::Result<RunningServer> {
        let port = free_port()?;
        let control_port =
            matches!(self.kind, ServerKind::Headway | ServerKind::HeadwayPuma).then(free_port).transpose()?;
        let log = env.twins.log_path(&format!("{}-{}x{}-{port}", self.kind.name(), config.workers, config.threads));
        let mut command = self.command(env, config, port, control_port);
        let config = config.clone();
        let output = File::create(&log).with_context(|| format!("cannot create {}", log.display()))?;
        command.stdin(Stdio::null()).stdout(output.try_clone()?).stderr(output).process_group(0);
        let child = command.spawn().with_context(|| format!("cannot start {}", self.kind.name()))?;
        if let Ok(mut live) = LIVE.lock() {
            live.insert(child.id());
        }
        let memory = MemorySampler::start(child.id());
        let mut server = RunningServer { kind: self.kind, port, control_port, config, child, log, memory };
        server.wait_ready().await?;
        Ok(server)
    }

    fn command(&self, env: &Environment, config: &ServerConfig, port: u16, control: Option<u16>) -> Command {
        let (w, t) = (config.workers.to_string(), config.threads.to_string());
        let bind = format!("127.0.0.1:{port}");
        let mut command = match &self.launcher {
            Launcher::Program(path) => Command::new(path),
            Launcher::PythonModule { python, module } => {
                let mut command = Command::new(python);
                command.args(["-m", module]);
                command
            }
        };
        match self.kind {
            ServerKind::Headway | ServerKind::HeadwayPuma => {
                command.arg("serve").args(&config.app);
                command.args(["-w", &w, "-t", &t, "-b", &bind, "--log-level", "warn", "--graceful-timeout", "1"]);
                if let Some(control) = control {
                    command.args(["--control", &format!("127.0.0.1:{control}")]);
                }
                if let Some(secs) = config.queue_timeout {
                    command.args(["--queue-timeout", &secs.to_string()]);
                }
                if self.kind == ServerKind::HeadwayPuma {
                    let puma = which("puma", &env.path).unwrap_or_else(|| "puma".into());
                    let cmd = format!(
                        "exec {} -e production -t {t}:{t} -b unix://{{socket}} {}",
                        shell_quote(&puma),
                        shell_quote(&env.twins.rack_app())
                    );
                    command.args(["--cmd", &cmd]);
                }
            }
            ServerKind::Puma => {
                command.args(["-e", "production", "-t", &format!("{t}:{t}"), "-b", &format!("tcp://{bind}")]);
                if config.workers > 1 {
                    command.args(["-w", &w]);
                }
                command.arg(env.twins.rack_app());
            }
            ServerKind::Gunicorn => {
                command.args(["-k", "gthread", "-w", &w, "--threads", &t, "-b", &bind]);
                command.args(["--log-level", "warning", "--graceful-timeout", "1", WSGI_APP]);
            }
            ServerKind::Granian => {
                command.args(["--interface", "wsgi", "--workers", &w, "--blocking-threads", &t]);
                command.args(["--host", "127.0.0.1", "--port", &port.to_string(), "--log-level", "warning", WSGI_APP]);
            }
            ServerKind::Uvicorn => {
                command.args(["--workers", &w, "--host", "127.0.0.1", "--port", &port.to_string()]);
                command.args(["--log-level", "warning", ASGI_APP]);
            }
            ServerKind::Node => {
                command.arg(env.twins.node_app()).env("WEB_CONCURRENCY", &w).env("PORT", port.to_string());
                command.env_remove("HEADWAY_SOCKET");
            }
        }
        if self.kind.python_module().is_some() {
            let mut path = OsString::from(env.twins.python_path());
            if let Some(old) = std::env::var_os("PYTHONPATH").filter(|old| !old.is_empty()) {
                path.push(":");
                path.push(old);
            }
            command.env("PYTHONPATH", path);
        }
        command
    }
}

fn shell_quote(path: &Path) -> String {
    format!("'{}'", path.display().to_string().replace('\'', r"'\''"))
}

/// A port nobody listens on now (the kernel's pick; the server binds it a moment later).
fn free_port() -> anyhow::Result<u16> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).context("cannot find a free port")?;
    Ok(listener.local_addr()?.port())
}

impl RunningServer {
    pub fn name(&self) -> &'static str {
        self.kind.name()
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
        for kind in ServerKind::ALL {
            assert_eq!(ServerKind::parse(kind.name()), Some(kind));
        }
        assert_eq!(ServerKind::parse("apache"), None);
    }
}
