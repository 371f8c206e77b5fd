//! systemd: readiness notifications for `Type=notify` units (socket activation, the sockets
//! systemd passes, is in `crate::listener`).
//!
//! Notifications (sd_notify(3)): when `NOTIFY_SOCKET` is set, the server sends `READY=1` once
//! its workers are up, `RELOADING=1` with `MONOTONIC_USEC` (as systemd 253+ wants for
//! `Type=notify-reload`) on SIGHUP and `READY=1` again when the reload is done, `STOPPING=1` on
//! SIGTERM, and a `STATUS=` line with the queue depth and busy slots every few seconds. The
//! protocol is one datagram per message on a unix socket; it is written here rather than taken
//! from a crate because the variable must be taken out of the environment at start, so that
//! workers (Puma, for one, speaks sd_notify) cannot answer for the main process, and the crates
//! read it anew on every message.

use std::io;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::time::Duration;

use tokio::sync::watch;
use tracing::{debug, warn};

use super::readiness::State;

/// How often `STATUS=` is refreshed.
const STATUS_EVERY: Duration = Duration::from_secs(2);

/// Where to send notifications, if systemd asked for them.
pub struct Notifier {
    target: Option<(UnixDatagram, SocketAddr)>,
}

impl Notifier {
    /// Takes `NOTIFY_SOCKET` out of the environment. Call before any thread starts: changing
    /// the environment is only sound while the process has one thread.
    pub fn from_env() -> Notifier {
        let Some(path) = std::env::var_os("NOTIFY_SOCKET") else { return Notifier { target: None } };
        std::env::remove_var("NOTIFY_SOCKET");
        let target = notify_address(std::os::unix::ffi::OsStrExt::as_bytes(path.as_os_str()))
            .and_then(|address| Ok((UnixDatagram::unbound()?, address)));
        match target {
            Ok(target) => Notifier { target: Some(target) },
            Err(err) => {
                warn!("NOTIFY_SOCKET {}: {err}; systemd will not hear from headway", path.to_string_lossy());
                Notifier { target: None }
            }
        }
    }

    pub fn enabled(&self) -> bool {
        self.target.is_some()
    }

    /// Sends one message of `KEY=value` lines.
    pub fn send(&self, message: &str) {
        if let Some((socket, address)) = &self.target {
            if let Err(err) = socket.send_to_addr(message.as_bytes(), address) {
                debug!("cannot notify systemd: {err}");
            }
        }
    }
}

/// A path, or `@name` for an abstract socket.
fn notify_address(path: &[u8]) -> io::Result<SocketAddr> {
    use std::os::linux::net::SocketAddrExt as _;
    use std::os::unix::ffi::OsStrExt as _;
    match path.strip_prefix(b"@") {
        Some(name) => SocketAddr::from_abstract_name(name),
        None => SocketAddr::from_pathname(std::ffi::OsStr::from_bytes(path)),
    }
}

/// The message for a change of state: what systemd must hear, if anything.
fn message_for(state: State) -> Option<String> {
    match state {
        State::Booting => None,
        State::Serving => Some("READY=1\nSTATUS=serving".to_owned()),
        State::Reloading => Some(format!("RELOADING=1\nMONOTONIC_USEC={}\nSTATUS=reloading", monotonic_usec())),
        State::ShuttingDown => Some("STOPPING=1\nSTATUS=shutting down".to_owned()),
    }
}

/// Tells systemd of every change of `state`, and refreshes `STATUS=` from `status` meanwhile,
/// until the state says the server is stopping.
pub async fn report(notifier: Notifier, mut state: watch::Receiver<State>, status: impl Fn() -> String) {
    if !notifier.enabled() {
        return;
    }
    let mut refresh = tokio::time::interval(STATUS_EVERY);
    loop {
        let current = *state.borrow_and_update();
        if let Some(message) = message_for(current) {
            notifier.send(&message);
        }
        if current == State::ShuttingDown {
            return;
        }
        loop {
            tokio::select! {
                changed = state.changed() => {
                    if changed.is_err() {
                        return;
                    }
                    break;
                }
                _ = refresh.tick() => {
                    if current == State::Serving {
                        notifier.send(&format!("STATUS={}", status()));
                    }
                }
            }
        }
    }
}

/// CLOCK_MONOTONIC in microseconds, the clock systemd compares reload times on.
fn monotonic_usec() -> u64 {
    let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime only writes the timespec it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
    now.tv_sec as u64 * 1_000_000 + now.tv_nsec as u64 / 1000
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notifies_what_systemd_expects() {
        assert_eq!(message_for(State::Booting), None);
        assert_eq!(message_for(State::Serving).unwrap(), "READY=1\nSTATUS=serving");
        assert_eq!(message_for(State::ShuttingDown).unwrap(), "STOPPING=1\nSTATUS=shutting down");
        let reloading = message_for(State::Reloading).unwrap();
        let usec: u64 =
            reloading.lines().find_map(|line| line.strip_prefix("MONOTONIC_USEC=")).unwrap().parse().unwrap();
        assert!(reloading.starts_with("RELOADING=1\n") && usec > 0, "{reloading}");
    }

    #[test]
    fn sends_datagrams_to_a_path_or_an_abstract_name() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify");
        let receiver = UnixDatagram::bind(&path).unwrap();
        let notifier = Notifier {
            target: Some((
                UnixDatagram::unbound().unwrap(),
                notify_address(path.as_os_str().as_encoded_bytes()).unwrap(),
            )),
        };
        notifier.send("READY=1");
        let mut buf = [0u8; 64];
        let n = receiver.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"READY=1");
        assert!(notify_address(b"@headway-test").is_ok());
    }
}
