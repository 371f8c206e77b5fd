//! Starting an installed server: its command line, its log file, and the wait until it is ready.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::fs::File;
use std::net::{Ipv4Addr, TcpListener};
use std::process::{Command, Stdio};
use std::sync::{Mutex, PoisonError};

use anyhow::{bail, Context as _};

use super::command::Setup;
use super::config::ServerConfig;
use super::environment::Environment;
use super::peers::{Find, Launcher, Peer};
use super::running::{watch_live, RunningServer};
use crate::process_tree::{start_apart, MemorySampler};
use crate::twins::FLASK_APP;

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
        watch_live(child.id());
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

/// A port nobody listens on now and this process has not handed out before (the kernel's pick;
/// the server binds it a moment later). The kernel offers a port again as soon as its probe closes,
/// so without the record two picks made before either server binds (a server's public and control
/// ports, an agent-check port) can be the same port.
pub fn free_port() -> anyhow::Result<u16> {
    static HANDED_OUT: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());
    let mut handed_out = HANDED_OUT.lock().unwrap_or_else(PoisonError::into_inner);
    for _ in 0..64 {
        let probe = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).context("cannot find a free port")?;
        let port = probe.local_addr()?.port();
        if handed_out.insert(port) {
            return Ok(port);
        }
    }
    bail!("the kernel offered only ports this lab run has already handed out")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_port_never_hands_out_a_port_twice() {
        // Some 500 picks over the kernel's ephemeral range repeat a port without the record.
        let picks: Vec<u16> = (0..500).map(|_| free_port().unwrap()).collect();
        let distinct: BTreeSet<u16> = picks.iter().copied().collect();
        assert_eq!(distinct.len(), picks.len());
    }
}
