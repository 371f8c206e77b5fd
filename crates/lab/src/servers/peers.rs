//! The servers the lab compares, one entry each in [`PEERS`]: how to tell it is installed (and
//! how to install it when it is not), and which command line starts it.

use std::path::PathBuf;
use std::process::Command;

use headway_common::executable::{is_executable, which};
use serde::Serialize;

use super::command::{
    granian_args, gunicorn_args, headway_args, headway_puma_args, headway_rack_args, hypercorn_args, node_args,
    puma_args, uvicorn_args, Setup,
};
use super::environment::{first_line_of, Environment};

/// The servers the lab knows. Each has its entry in [`PEERS`], in this order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum ServerKind {
    Headway,
    /// headway's front and queue with Puma (single mode) as each worker: the fix for Puma's tail
    /// that needs no change to Puma.
    HeadwayPuma,
    /// headway's front and queue with its own Rack worker: the Rack app in Ruby threads of
    /// headway's worker processes, no Puma anywhere.
    HeadwayRack,
    Puma,
    Gunicorn,
    Granian,
    Uvicorn,
    Hypercorn,
    Node,
}

/// Everything the lab knows about one server. Adding a peer is adding its [`ServerKind`] and
/// its entry here.
static PEERS: [PeerSpec; 9] = [
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
        kind: ServerKind::HeadwayRack,
        name: "headway-rack",
        find: Find::Headway { worker: Some("ruby") },
        install_hint: "apt-get install ruby ruby-rack, and build the Rack worker's extension: scripts/setup --test",
        configuration: "headway serve -w W -t T demo.ru (headway's own Rack worker, no Puma; RACK_ENV=production)",
        twin: Some("demo.ru (Rack)"),
        args: headway_rack_args,
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

pub(super) struct PeerSpec {
    kind: ServerKind,
    /// Its name in `--servers` and in the tables.
    name: &'static str,
    pub(super) find: Find,
    /// The command that installs it, for the line that says it is skipped.
    install_hint: &'static str,
    /// How it is configured for W x T, for the tables' footnotes.
    configuration: &'static str,
    /// The demo's twin it runs, as the tables name it; `None` for a WSGI server, which runs the
    /// demo app or the WSGI app its configuration names.
    pub(super) twin: Option<&'static str>,
    /// Its command line for W x T on a port, after the program (or `python -m MODULE`).
    pub(super) args: fn(&mut Command, &Setup),
}

/// How the lab finds a server.
pub(super) enum Find {
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

    pub(super) fn spec(self) -> &'static PeerSpec {
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
    /// headway (with either of its own workers), granian and hypercorn do by default.
    pub fn speaks_h2c(self) -> bool {
        matches!(self, ServerKind::Headway | ServerKind::HeadwayRack | ServerKind::Granian | ServerKind::Hypercorn)
    }

    /// headway has a control address: the lab reads its stats there.
    pub(super) fn has_control(self) -> bool {
        matches!(self.spec().find, Find::Headway { .. })
    }
}

/// How a server is launched.
#[derive(Debug, Clone)]
pub(super) enum Launcher {
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
    pub(super) launcher: Launcher,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_peer_is_skipped_with_how_to_install_it() {
        let env = Environment::with_path("/nonexistent");
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
        let env = Environment::with_path(&dir.path().display().to_string());
        let skipped = detect(ServerKind::Node, &env).expect_err("a broken node is not installed");
        assert_eq!(skipped.to_string(), "skipping node: not installed (apt-get install nodejs)");
    }

    #[test]
    fn the_rack_worker_is_headway_with_ruby_and_serves_h2c_as_headway_does() {
        let rack = ServerKind::parse("headway-rack").expect("a server of its own");
        assert!(rack.speaks_h2c() && rack.has_control());
        assert!(!ServerKind::Puma.speaks_h2c());
        assert!(matches!(rack.spec().find, Find::Headway { worker: Some("ruby") }));
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
