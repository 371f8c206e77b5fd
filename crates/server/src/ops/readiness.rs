//! Whether this server should get new traffic: the one answer that the health endpoints, the
//! public `--health-path`, HAProxy's agent check and systemd's notifications all give.
//!
//! A balancer needs to hear "not ready" *before* the server stops accepting, so that it stops
//! sending first: on SIGTERM readiness turns off at once and the server keeps serving for
//! `--shutdown-delay`. A reload (SIGHUP) is not-ready for the agent check only: the server
//! keeps serving every request through it, but a fleet should prefer the other instances.

use tokio::sync::watch;

/// Where the server is in its life, as the outside world needs to know it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// Workers are starting; nothing can be served yet.
    Booting,
    Serving,
    /// Serving, while the workers are replaced one at a time (SIGHUP).
    Reloading,
    /// SIGTERM or SIGINT came: finishing what is under way, then stopping.
    ShuttingDown,
}

pub struct Readiness {
    state: watch::Sender<State>,
}

impl Default for Readiness {
    fn default() -> Self {
        Readiness { state: watch::Sender::new(State::Booting) }
    }
}

impl Readiness {
    pub fn set(&self, state: State) {
        self.state.send_replace(state);
    }

    /// Leaves `Reloading` for `Serving`, unless a shutdown began meanwhile.
    pub fn reload_done(&self) {
        self.state.send_if_modified(|state| {
            let was_reloading = *state == State::Reloading;
            if was_reloading {
                *state = State::Serving;
            }
            was_reloading
        });
    }

    pub fn state(&self) -> State {
        *self.state.borrow()
    }

    /// `Ok` when a balancer should send requests here, else why not (a health check's body).
    /// A reload still takes traffic: requests wait in the queue for the new workers.
    pub fn check(&self) -> Result<(), &'static str> {
        match self.state() {
            State::Serving | State::Reloading => Ok(()),
            State::Booting => Err("workers are starting"),
            State::ShuttingDown => Err("shutting down"),
        }
    }

    /// A receiver that sees every change (for systemd's notifications).
    pub fn subscribe(&self) -> watch::Receiver<State> {
        self.state.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_only_between_boot_and_shutdown() {
        let readiness = Readiness::default();
        assert_eq!(readiness.check(), Err("workers are starting"));
        readiness.set(State::Serving);
        assert_eq!(readiness.check(), Ok(()));
        readiness.set(State::Reloading);
        assert_eq!(readiness.check(), Ok(()));
        readiness.reload_done();
        assert_eq!(readiness.state(), State::Serving);
        readiness.set(State::ShuttingDown);
        readiness.reload_done();
        assert_eq!(readiness.check(), Err("shutting down"));
    }
}
