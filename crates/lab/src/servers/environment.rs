//! What the lab runs servers with, found once per run: the headway binary, the PATH it looks for
//! peers on, the Python interpreter, the demo's twins.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use headway_common::python::{find_python, python_from_env};

use crate::twins::Twins;

/// `--headway-bin`, which the lab's commands share.
#[derive(clap::Args, Debug)]
pub struct HeadwayBinary {
    /// The headway command to run as the headway server [default: this program]
    #[arg(long, value_name = "PATH")]
    headway_bin: Option<PathBuf>,
}

impl HeadwayBinary {
    /// `this_program` runs headway again: the binary, or the `headway` script of a pip install.
    pub fn environment(&self, this_program: &Path) -> anyhow::Result<Environment> {
        let headway = self.headway_bin.clone().unwrap_or_else(|| this_program.to_owned());
        Environment::new(headway)
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
    pub(super) flask: OnceLock<Option<String>>,
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

    /// An environment for unit tests: no headway binary, no Python, peers looked for on `path`.
    #[cfg(test)]
    pub(super) fn with_path(path: &str) -> Environment {
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

    /// Flask's version, if the interpreter the lab runs the Python servers with has it.
    pub(super) fn flask(&self) -> Option<&str> {
        let probe = "import importlib.metadata, flask; print(importlib.metadata.version('flask'))";
        self.flask.get_or_init(|| first_line_of(Command::new(self.python.as_ref()?).args(["-c", probe]))).as_deref()
    }
}

/// The first non-empty line a command prints (stdout, else stderr), if it runs and succeeds.
pub(super) fn first_line_of(command: &mut Command) -> Option<String> {
    let output = command.stdin(Stdio::null()).output().ok()?;
    if !output.status.success() {
        return None;
    }
    let text = [output.stdout, output.stderr].concat();
    String::from_utf8_lossy(&text).lines().map(str::trim).find(|line| !line.is_empty()).map(str::to_owned)
}
