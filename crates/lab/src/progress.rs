//! A one-line progress indicator on stderr, redrawn in place, shown only when stderr is a
//! terminal (so logs and pipes get the tables alone).

use std::io::{IsTerminal as _, Write as _};

pub struct Progress {
    enabled: bool,
}

impl Progress {
    pub fn new() -> Progress {
        Progress { enabled: std::io::stderr().is_terminal() }
    }

    pub fn show(&self, text: &str) {
        if self.enabled {
            let text: String = text.chars().take(150).collect();
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r\x1b[2K{text}");
            let _ = err.flush();
        }
    }

    pub fn clear(&self) {
        if self.enabled {
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r\x1b[2K");
            let _ = err.flush();
        }
    }
}
