//! What a worker process prints (its own log lines, the app's prints and tracebacks, a `--cmd`
//! server's log), carried line by line into the server's log. Every line the server writes then
//! has one format, text or JSON, with a timestamp, and says which process it came from; a
//! worker that printed to the server's stderr directly would mix a format of its own, and
//! multi-line tracebacks, into a JSON log.
//!
//! The lines are logged at `info`. Where the log shows less (`--log-level warn`), a process that
//! fails still has its say: its last lines are kept, and the error that reports the failure
//! carries them ([`Output::said`]).

use std::collections::VecDeque;
use std::io;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt as _, AsyncRead, AsyncReadExt as _, BufReader};
use tokio::process::{Child, Command};
use tokio::task::JoinSet;
use tracing::{info, Instrument as _, Level, Span};

/// How long a process's last lines may take to reach the log once it has exited: its pipes
/// close then, unless something it started lives on and holds them.
const LAST_LINES: Duration = Duration::from_millis(200);

/// The longest line carried as one; a longer one is carried in pieces of this size.
const LONGEST_LINE: usize = 64 * 1024;

/// How many of a process's last lines are kept for an error that reports its failure: a
/// traceback's end, where the exception is.
const LAST_LINES_KEPT: usize = 20;

/// A process's last lines, for an error that reports its failure.
type Tail = Arc<Mutex<VecDeque<String>>>;

/// The tasks that carry a started process's output into the log.
pub struct Output {
    relays: JoinSet<()>,
    tail: Tail,
}

impl Output {
    /// Starts the process `command` describes with its stdout and stderr piped, and carries each
    /// line they give into the log within the span `span_of` makes from the process's pid.
    pub fn spawn(command: &mut Command, span_of: impl FnOnce(u32) -> Span) -> io::Result<(Child, Output)> {
        let mut child = command.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn()?;
        let span = span_of(child.id().unwrap_or(0));
        let tail = Tail::default();
        let mut relays = JoinSet::new();
        if let Some(stdout) = child.stdout.take() {
            relays.spawn(lines(stdout, tail.clone()).instrument(span.clone()));
        }
        if let Some(stderr) = child.stderr.take() {
            relays.spawn(lines(stderr, tail.clone()).instrument(span));
        }
        Ok((child, Output { relays, tail }))
    }

    /// Where a reader of the log finds what the process said, to end an error about it: above,
    /// where the log shows its lines; else its last lines themselves.
    pub fn said(&self) -> String {
        if tracing::enabled!(Level::INFO) {
            return "its output is above".to_owned();
        }
        let tail = self.tail.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if tail.is_empty() {
            return "it printed nothing".to_owned();
        }
        let lines: Vec<&str> = tail.iter().map(String::as_str).collect();
        format!("its last output, which --log-level info would show as it comes:\n{}", lines.join("\n"))
    }

    /// Waits, briefly, until the exited process's last lines are in the log, so that they come
    /// before what the server logs about its exit.
    pub async fn finished(&mut self) {
        let _ = tokio::time::timeout(LAST_LINES, async { while self.relays.join_next().await.is_some() {} }).await;
    }
}

/// Logs each line `pipe` gives until it closes, keeping the last ones in `tail`; bytes that are
/// not UTF-8 are shown replaced.
async fn lines(pipe: impl AsyncRead + Unpin, tail: Tail) {
    let mut pipe = BufReader::new(pipe);
    let mut line = Vec::new();
    loop {
        line.clear();
        match (&mut pipe).take(LONGEST_LINE as u64).read_until(b'\n', &mut line).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {
                let text = String::from_utf8_lossy(&line);
                let text = text.trim_end_matches(['\n', '\r']);
                info!("{text}");
                let mut tail = tail.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
                if tail.len() == LAST_LINES_KEPT {
                    tail.pop_front();
                }
                tail.push_back(text.to_owned());
            }
        }
    }
}
