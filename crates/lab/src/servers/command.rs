//! Each server's command line for W x T on a port, after its program (or `python -m MODULE`).

use std::path::Path;
use std::process::Command;

use headway_common::executable::which;

use super::config::ServerConfig;
use super::environment::Environment;
use crate::twins::{ASGI_APP, WSGI_APP};

/// What a server's command line is made of.
pub(super) struct Setup<'a> {
    pub(super) env: &'a Environment,
    pub(super) config: &'a ServerConfig,
    pub(super) port: u16,
    /// headway's control port.
    pub(super) control_port: Option<u16>,
    /// The WSGI app to serve instead of the demo app.
    pub(super) wsgi_app: Option<&'a str>,
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

pub(super) fn headway_args(command: &mut Command, setup: &Setup) {
    let (mut w, t, bind) = (setup.workers(), setup.threads(), setup.host_port());
    if let Some(max) = setup.config.workers_max {
        w = format!("{w}:{max}");
    }
    command.arg("serve").args(setup.wsgi_app);
    command.args(["-w", &w, "-t", &t, "-b", &bind, "--log-level", "warn", "--graceful-timeout", "1"]);
    if let Some(control) = setup.control_port {
        command.args(["--control", &format!("127.0.0.1:{control}")]);
    }
    if let Some(secs) = setup.config.queue_timeout {
        command.args(["--queue-timeout", &secs.to_string()]);
    }
    if !setup.config.lanes {
        command.arg("--no-lanes");
    }
    command.args(&setup.config.headway_flags);
}

pub(super) fn headway_puma_args(command: &mut Command, setup: &Setup) {
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

pub(super) fn puma_args(command: &mut Command, setup: &Setup) {
    let t = setup.threads();
    command.args(["-e", "production", "-t", &format!("{t}:{t}"), "-b", &format!("tcp://{}", setup.host_port())]);
    if setup.config.workers > 1 {
        command.args(["-w", &setup.workers()]);
    }
    command.arg(setup.env.twins.rack_app());
}

pub(super) fn gunicorn_args(command: &mut Command, setup: &Setup) {
    command.args(["-k", "gthread", "-w", &setup.workers(), "--threads", &setup.threads(), "-b", &setup.host_port()]);
    command.args(["--log-level", "warning", "--graceful-timeout", "1", setup.wsgi_app.unwrap_or(WSGI_APP)]);
}

pub(super) fn granian_args(command: &mut Command, setup: &Setup) {
    command.args(["--interface", "wsgi", "--workers", &setup.workers(), "--blocking-threads", &setup.threads()]);
    command.args(["--host", "127.0.0.1", "--port", &setup.port.to_string(), "--log-level", "warning"]);
    command.arg(setup.wsgi_app.unwrap_or(WSGI_APP));
}

pub(super) fn uvicorn_args(command: &mut Command, setup: &Setup) {
    command.args(["--workers", &setup.workers(), "--host", "127.0.0.1", "--port", &setup.port.to_string()]);
    command.args(["--log-level", "warning", ASGI_APP]);
}

pub(super) fn hypercorn_args(command: &mut Command, setup: &Setup) {
    command.args(["--workers", &setup.workers(), "--bind", &setup.host_port(), "--log-level", "warning", ASGI_APP]);
}

pub(super) fn node_args(command: &mut Command, setup: &Setup) {
    command.arg(setup.env.twins.node_app()).env("WEB_CONCURRENCY", setup.workers());
    command.env("PORT", setup.port.to_string()).env_remove("HEADWAY_SOCKET");
}

fn shell_quote(path: &Path) -> String {
    format!("'{}'", path.display().to_string().replace('\'', r"'\''"))
}
