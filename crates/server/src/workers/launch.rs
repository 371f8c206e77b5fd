//! How a worker's process is started: the bundled Python worker with its app, the bundled Rack
//! worker with its config.ru, or any command (`--cmd`) that serves HTTP/1.1 on a unix socket; and
//! why a start can fail.

use std::io;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use clap::ValueEnum;
use tokio::process::Command;

use super::slots_per_worker::SlotsPerWorker;
use super::worker::Transport;

/// How worker processes are started.
#[derive(Debug, Clone)]
pub enum Launch {
    /// The bundled Python worker, run by `python`.
    Python { python: PathBuf, app: PythonApp },
    /// The bundled Rack worker, run by `ruby`.
    Ruby { ruby: PathBuf, app: RackApp },
    /// Any command; `{socket}` in it is replaced by the socket path.
    Command(String),
}

/// What the bundled worker serves and how, the same whether it is started on its own or forked
/// from a preloaded parent (`zygote`).
#[derive(Debug, Clone)]
pub struct PythonApp {
    /// `module:callable`; `None`: the demo app.
    pub spec: Option<String>,
    pub interface: Interface,
    /// `--hooks`: a module whose `post_fork(worker)` and `on_exit(worker)` the workers call.
    pub hooks: Option<String>,
    /// `--root-path`: the path prefix the app is mounted under.
    pub root_path: Option<String>,
}

impl PythonApp {
    /// The end of the worker's command line: these options, then the app.
    pub fn args(&self) -> Vec<String> {
        let mut args = vec!["--interface".to_owned(), self.interface.name()];
        if let Some(hooks) = &self.hooks {
            args.extend(["--hooks".to_owned(), hooks.clone()]);
        }
        if let Some(root_path) = &self.root_path {
            args.extend(["--root-path".to_owned(), root_path.clone()]);
        }
        args.extend(self.spec.clone());
        args
    }
}

/// What the bundled Rack worker serves, and where its Ruby side is.
#[derive(Debug, Clone)]
pub struct RackApp {
    /// The rackup file (`config.ru`).
    pub config: String,
    /// `--hooks`: a Ruby file of `on_worker_boot` and `on_worker_shutdown` blocks.
    pub hooks: Option<String>,
    /// The folder with `headway/worker.rb` and the extension `headway/headway_rack.so`, given to
    /// Ruby as `-I` (`$HEADWAY_RUBY_LIB`, else the checkout's `ruby/lib`).
    pub lib: PathBuf,
    /// `--root-path`: the path prefix the app is mounted under.
    pub root_path: Option<String>,
}

impl RackApp {
    /// The Ruby worker's command line, but for where its slots come from: `--socket PATH` for a
    /// worker, `--preload` for the preloaded parent (the option parser takes them after the app).
    fn command(&self, ruby: &Path, slots: SlotsPerWorker, workers: usize) -> Command {
        let mut command = Command::new(ruby);
        command.arg("-I").arg(&self.lib);
        command.args(["-r", "headway/worker", "-e", "exit Headway::Worker.main(ARGV)", "--"]);
        command.args(["--threads", &slots.threads.to_string(), "--workers", &workers.to_string()]);
        command.args(self.hooks.iter().flat_map(|hooks| ["--hooks", hooks]));
        command.args(self.root_path.iter().flat_map(|root| ["--root-path", root])).arg(&self.config);
        command
    }
}

/// How the bundled worker calls the app (`--interface`).
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Interface {
    /// ASGI 3 if the app is a coroutine function or has an async `__call__`, else WSGI: decided by
    /// the worker once it has imported the app.
    Auto,
    /// PEP 3333.
    Wsgi,
    /// ASGI 3: HTTP, WebSocket (the front hands the workers their handshakes) and lifespan.
    Asgi,
    /// Rack 2 and 3, in the bundled Ruby worker: what an APP ending in `.ru` picks.
    Rack,
}

impl Interface {
    /// As the flag spells it, for the worker's command line.
    pub fn name(self) -> String {
        self.to_possible_value().expect("no variant is skipped").get_name().to_owned()
    }
}

/// Whether the workers take WebSocket handshakes (else a handshake is a plain request): from the
/// launch at first, then as each bundled worker says when it is ready, since with `--interface
/// auto` only the worker knows whether it imported an ASGI app. The supervisor hears it; the
/// front routes handshakes by it.
#[derive(Debug, Clone)]
pub struct TakesWebSockets(Arc<AtomicBool>);

impl TakesWebSockets {
    pub fn new(takes: bool) -> TakesWebSockets {
        TakesWebSockets(Arc::new(AtomicBool::new(takes)))
    }

    pub fn get(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }

    pub fn set(&self, takes: bool) {
        self.0.store(takes, Ordering::Relaxed);
    }
}

impl Launch {
    /// How the front reaches workers started this way.
    pub fn transport(&self) -> Transport {
        match self {
            Launch::Python { .. } | Launch::Ruby { .. } => Transport::Hop(Mutex::new(None)),
            Launch::Command(_) => Transport::Http,
        }
    }

    /// Whether workers started this way take WebSocket handshakes, each on a connection of its
    /// own to their socket (see `slot::upgrade`), as far as the launch tells: any `--cmd` server
    /// may; the bundled worker does when told to run ASGI. With `auto`, the worker says so
    /// itself once it has imported the app ([`TakesWebSockets`]).
    pub fn takes_websockets(&self) -> bool {
        match self {
            Launch::Python { app, .. } => app.interface == Interface::Asgi,
            Launch::Ruby { .. } => false,
            Launch::Command(_) => true,
        }
    }

    /// The command of the preloaded parent (`--preload`, see `super::zygote`): the bundled
    /// worker's, loading the app once to fork workers from it; `None` for `--cmd`.
    pub fn preload_command(&self, slots: SlotsPerWorker, workers: usize) -> Option<Command> {
        match self {
            Launch::Python { python, app } => {
                let mut command = Command::new(python);
                command.args(["-m", "headway.worker.preload"]).args(slots.worker_args());
                command.args(["--workers", &workers.to_string()]).args(app.args());
                Some(command)
            }
            Launch::Ruby { ruby, app } => {
                let mut command = app.command(ruby, slots, workers);
                command.arg("--preload");
                Some(command)
            }
            Launch::Command(_) => None,
        }
    }

    /// The command that starts worker `index` on `socket`, in a process group of its own so
    /// that stopping it also stops whatever it forked.
    pub fn command(&self, socket: &Path, index: usize, slots: SlotsPerWorker, workers: usize) -> Command {
        let mut command = match self {
            Launch::Python { python, app } => {
                let mut command = Command::new(python);
                command.args(["-m", "headway.worker", "--socket"]).arg(socket);
                command.args(slots.worker_args()).args(["--workers", &workers.to_string()]);
                command.args(app.args());
                command
            }
            Launch::Ruby { ruby, app } => {
                let mut command = app.command(ruby, slots, workers);
                command.arg("--socket").arg(socket);
                command
            }
            Launch::Command(line) => {
                let mut command = Command::new("/bin/sh");
                command.arg("-c").arg(line.replace("{socket}", &socket.to_string_lossy()));
                command
            }
        };
        command
            .env("HEADWAY_SOCKET", socket)
            .env("HEADWAY_WORKER", index.to_string())
            .env("HEADWAY_THREADS", slots.threads.to_string())
            .stdin(Stdio::null())
            .process_group(0)
            .kill_on_drop(true);
        // SAFETY: prctl is async-signal-safe and touches only the child's own state.
        unsafe {
            command.pre_exec(|| {
                // If the front dies without stopping its workers, the kernel stops them: no
                // orphaned app processes holding ports, memory or database connections.
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(io::Error::last_os_error());
                }
                Ok(())
            });
        }
        command
    }
}

/// Why a worker process could not be brought up.
#[derive(Debug, thiserror::Error)]
pub enum BootError {
    #[error("could not start: {0}")]
    Spawn(io::Error),
    /// How it exited, and where its output is ([`super::output::Output::said`]).
    #[error("exited with {0} before listening on its socket; {1}")]
    Exited(String, String),
    #[error("did not import the app ({0}); {1}")]
    NotImported(String, String),
    #[error("did not listen on its socket within {0:?}")]
    Timeout(Duration),
}
