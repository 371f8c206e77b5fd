//! What a worker process prints (its own log lines, the app's prints and tracebacks, a `--cmd`
//! server's log), carried line by line into the server's log. Every line the server writes then
//! has one format, text or JSON, with a timestamp, and says which process it came from; a
//! worker that printed to the server's stderr directly would mix a format of its own, and
//! multi-line tracebacks, into a JSON log.

use std::io;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt as _, AsyncRead, AsyncReadExt as _, BufReader};
use tokio::process::{Child, Command};
use tokio::task::JoinSet;
use tracing::{info, Instrument as _, Span};

/// How long a process's last lines may take to reach the log once it has exited: its pipes
/// close then, unless something it started lives on and holds them.
const LAST_LINES: Duration = Duration::from_millis(200);

/// The longest line carried as one; a longer one is carried in pieces of this size.
const LONGEST_LINE: usize = 64 * 1024;

/// The tasks that carry a started process's output into the log.
pub struct Output {
    relays: JoinSet<()>,
}

impl Output {
    /// Starts the process `command` describes with its stdout and stderr piped, and carries each
    /// line they give into the log within the span `span_of` makes from the process's pid.
    pub fn spawn(command: &mut Command, span_of: impl FnOnce(u32) -> Span) -> io::Result<(Child, Output)> {
        let mut child = command.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn()?;
        let span = span_of(child.id().unwrap_or(0));
        let mut relays = JoinSet::new();
        if let Some(stdout) = child.stdout.take() {
            relays.spawn(lines(stdout).instrument(span.clone()));
        }
        if let Some(stderr) = child.stderr.take() {
            relays.spawn(lines(stderr).instrument(span));
        }
        Ok((child, Output { relays }))
    }

    /// Waits, briefly, until the exited process's last lines are in the log, so that they come
    /// before what the server logs about its exit.
    pub async fn finished(&mut self) {
        let _ = tokio::time::timeout(LAST_LINES, async { while self.relays.join_next().await.is_some() {} }).await;
    }
}

/// Logs each line `pipe` gives until it closes; bytes that are not UTF-8 are shown replaced.
async fn lines(pipe: impl AsyncRead + Unpin) {
    let mut pipe = BufReader::new(pipe);
    let mut line = Vec::new();
    loop {
        line.clear();
        match (&mut pipe).take(LONGEST_LINE as u64).read_until(b'\n', &mut line).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {
                let text = String::from_utf8_lossy(&line);
                info!("{}", text.trim_end_matches(['\n', '\r']));
            }
        }
    }
}
