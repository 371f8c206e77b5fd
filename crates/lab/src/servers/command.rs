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

/// headway's own Rack worker on the demo's Rack twin, run by the Ruby the lab found, with the
/// RACK_ENV Puma's `-e production` sets, so both run the app alike.
pub(super) fn headway_rack_args(command: &mut Command, setup: &Setup) {
    headway_args(command, setup);
    if let Some(ruby) = which("ruby", &setup.env.path) {
        command.arg("--ruby").arg(ruby);
    }
    command.arg(setup.env.twins.rack_app()).env("RACK_ENV", "production");
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

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;
    use std::path::PathBuf;

    use super::*;

    /// The arguments and environment `args` gives a command for `config` on port 8000, with an
    /// executable `ruby` alone on PATH.
    fn command_line(args: fn(&mut Command, &Setup), config: &ServerConfig) -> (Vec<String>, PathBuf, Command) {
        let dir = tempfile::tempdir().expect("temp dir");
        let ruby = dir.path().join("ruby");
        std::fs::write(&ruby, "#!/bin/sh\n").expect("write");
        std::fs::set_permissions(&ruby, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        let env = Environment::with_path(&dir.path().display().to_string());
        let mut command = Command::new("headway");
        args(&mut command, &Setup { env: &env, config, port: 8000, control_port: None, wsgi_app: None });
        let argv = command.get_args().map(|arg| arg.to_string_lossy().into_owned()).collect();
        (argv, env.twins.rack_app(), command)
    }

    #[test]
    fn the_rack_worker_serves_the_rack_twin_with_the_ruby_found_and_pumas_environment() {
        let (argv, rack_app, command) = command_line(headway_rack_args, &ServerConfig::new(2, 5));
        assert_eq!(argv[..5], ["serve", "-w", "2", "-t", "5"]);
        assert!(!argv.iter().any(|arg| arg == "--cmd"), "no Puma inside: {argv:?}");
        let tail = &argv[argv.len() - 3..];
        assert_eq!(tail[0], "--ruby");
        assert!(tail[1].ends_with("/ruby"), "{tail:?}");
        assert_eq!(tail[2], rack_app.display().to_string());
        let rack_env = command.get_envs().find(|(key, _)| *key == "RACK_ENV").and_then(|(_, value)| value);
        assert_eq!(rack_env, Some(std::ffi::OsStr::new("production")));
    }
}
