//! The access log: one line per response, in Apache's combined format followed by where the
//! time went (`queue=` wait before a slot started the request, `service=` time in the worker),
//! or as one JSON object per line (`--access-log-format json`) for log pipelines.
//!
//! Lines go through a bounded channel to a thread of their own that writes them with a
//! buffer, so a slow disk or a full pipe never stalls the front. If the writer falls that far
//! behind, lines are dropped and counted, rather than held in memory. SIGUSR1 makes the writer
//! reopen the file, so logrotate can move it away.

use std::fmt::Write as _;
use std::fs::OpenOptions;
use std::io::{self, BufWriter, Write};
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use http::header::{self, HeaderMap, HeaderValue};
use tracing::warn;

use crate::job::Timing;
use headway_http1::request::RequestHead;

/// `--access-log-format`: a line per response in Apache's combined format (then `queue=` and
/// `service=` times), or a JSON object per line.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum AccessLogFormat {
    Combined,
    Json,
}

/// Lines waiting for the writer before new ones are dropped.
const BACKLOG: usize = 16 * 1024;

pub struct AccessLog {
    messages: SyncSender<Message>,
    format: AccessLogFormat,
    dropped: AtomicU64,
}

/// What the writer thread is told.
enum Message {
    Line(String),
    /// Open the file again at its path (after logrotate moved it).
    Reopen,
}

/// What is logged about one response.
pub struct Entry<'a> {
    pub client_ip: Option<IpAddr>,
    pub method: &'a str,
    pub target: &'a str,
    pub version: http::Version,
    pub status: u16,
    pub body_bytes: u64,
    pub referer: Option<&'a str>,
    pub user_agent: Option<&'a str>,
    /// Time in the queue and in the worker; `None` when no worker was involved.
    pub queued: Option<Duration>,
    pub service: Option<Duration>,
    /// The worker that answered, if one did.
    pub worker: Option<usize>,
}

impl AccessLog {
    /// Opens `path` for appending (`-` is standard output) and starts the writer thread.
    pub fn open(path: &Path, format: AccessLogFormat) -> io::Result<AccessLog> {
        let out = open_output(path)?;
        let (messages, receive) = sync_channel(BACKLOG);
        let path = path.to_owned();
        std::thread::Builder::new().name("access-log".into()).spawn(move || write_lines(receive, out, path))?;
        Ok(AccessLog { messages, format, dropped: AtomicU64::new(0) })
    }

    pub fn log(&self, entry: &Entry) {
        let now = SystemTime::now();
        let line = match self.format {
            AccessLogFormat::Combined => entry.combined(now),
            AccessLogFormat::Json => entry.json(now),
        };
        if let Err(TrySendError::Full(_)) = self.messages.try_send(Message::Line(line)) {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Has the writer open the file again, after the lines already sent. Blocks while the
    /// writer's backlog is full, so call it off the request path.
    pub fn reopen(&self) {
        let _ = self.messages.send(Message::Reopen);
    }

    /// Lines dropped because the writer could not keep up.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

/// What the access log needs of a request head, kept once the head has gone to the worker.
pub struct RequestFields {
    method: http::Method,
    target: String,
    version: http::Version,
    referer: Option<String>,
    user_agent: Option<String>,
}

impl RequestFields {
    pub fn of(head: &RequestHead) -> Self {
        RequestFields::new(&head.method, &head.target, head.version, &head.headers)
    }

    /// From a request's plain fields, whichever protocol carried it.
    pub fn new(method: &http::Method, target: &str, version: http::Version, headers: &HeaderMap) -> Self {
        let field =
            |name| headers.get(name).map(|value: &HeaderValue| String::from_utf8_lossy(value.as_bytes()).into_owned());
        RequestFields {
            method: method.clone(),
            target: target.to_owned(),
            version,
            referer: field(header::REFERER),
            user_agent: field(header::USER_AGENT),
        }
    }

    /// The log entry for this request's response. `timing` is `None` when no worker answered.
    pub fn entry(
        &self,
        client_ip: Option<IpAddr>,
        status: http::StatusCode,
        body_bytes: u64,
        timing: Option<Timing>,
    ) -> Entry<'_> {
        Entry {
            client_ip,
            method: self.method.as_str(),
            target: &self.target,
            version: self.version,
            status: status.as_u16(),
            body_bytes,
            referer: self.referer.as_deref(),
            user_agent: self.user_agent.as_deref(),
            queued: timing.map(|timing| timing.queued),
            service: timing.map(|timing| timing.service),
            worker: timing.map(|timing| timing.worker),
        }
    }
}

fn open_output(path: &Path) -> io::Result<Box<dyn Write + Send>> {
    Ok(if path.as_os_str() == "-" {
        Box::new(io::stdout())
    } else {
        Box::new(OpenOptions::new().create(true).append(true).open(path)?)
    })
}

fn write_lines(messages: Receiver<Message>, out: Box<dyn Write + Send>, path: PathBuf) {
    let mut out = BufWriter::new(out);
    while let Ok(message) = messages.recv() {
        let mut next = Some(message);
        let mut result = Ok(());
        // Write what is waiting in one go; flush when caught up, so the log is never behind
        // for long.
        while let (Ok(()), Some(message)) = (&result, next.take()) {
            result = match message {
                Message::Line(line) => out.write_all(line.as_bytes()),
                Message::Reopen => out.flush().map(|()| match open_output(&path) {
                    Ok(reopened) => out = BufWriter::new(reopened),
                    Err(err) => warn!("cannot reopen --access-log {}: {err}; writing on", path.display()),
                }),
            };
            next = messages.try_recv().ok();
        }
        if result.and_then(|()| out.flush()).is_err() {
            return; // the log is gone (disk full, pipe closed); the server goes on
        }
    }
}

impl Entry<'_> {
    fn combined(&self, now: SystemTime) -> String {
        let mut line = String::with_capacity(200);
        let version = protocol(self.version);
        let _ = write!(
            line,
            "{} - - [{}] \"{} {} {version}\" {} {} \"{}\" \"{}\"",
            self.client_ip.map_or_else(|| "-".to_owned(), |ip| ip.to_string()),
            clf_time(now),
            self.method,
            self.target.escape_default(),
            self.status,
            self.body_bytes,
            self.referer.unwrap_or("-").escape_default(),
            self.user_agent.unwrap_or("-").escape_default(),
        );
        for (name, time) in [("queue", self.queued), ("service", self.service)] {
            match time {
                Some(time) => {
                    let _ = write!(line, " {name}={:.3}ms", time.as_secs_f64() * 1000.0);
                }
                None => {
                    let _ = write!(line, " {name}=-");
                }
            }
        }
        line.push('\n');
        line
    }

    /// One JSON object; times in milliseconds, `null` where no worker was involved.
    fn json(&self, now: SystemTime) -> String {
        let millis = |time: Option<Duration>| time.map(|time| (time.as_secs_f64() * 1e6).round() / 1e3);
        let object = serde_json::json!({
            "time": rfc3339(now),
            "client": self.client_ip.map(|ip| ip.to_string()),
            "method": self.method,
            "path": self.target,
            "protocol": protocol(self.version),
            "status": self.status,
            "bytes": self.body_bytes,
            "referer": self.referer,
            "user_agent": self.user_agent,
            "queue_ms": millis(self.queued),
            "service_ms": millis(self.service),
            "worker": self.worker,
        });
        let mut line = object.to_string();
        line.push('\n');
        line
    }
}

/// The protocol as the request line would name it (HTTP/2 as Apache and nginx log it).
fn protocol(version: http::Version) -> &'static str {
    match version {
        http::Version::HTTP_10 => "HTTP/1.0",
        http::Version::HTTP_2 => "HTTP/2.0",
        _ => "HTTP/1.1",
    }
}

/// `2026-11-22T01:27:55.250Z`.
fn rfc3339(now: SystemTime) -> String {
    let since = now.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = since.as_secs();
    let (year, month, day) = civil_from_days((secs / 86_400) as i64);
    let of_day = secs % 86_400;
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        of_day / 3600,
        of_day / 60 % 60,
        of_day % 60,
        since.subsec_millis()
    )
}

/// `22/Nov/2026:01:27:55 +0000`, the Common Log Format time, in UTC.
fn clf_time(now: SystemTime) -> String {
    const MONTHS: [&str; 12] = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
    let secs = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let (year, month, day) = civil_from_days((secs / 86_400) as i64);
    let of_day = secs % 86_400;
    format!(
        "{day:02}/{}/{year}:{:02}:{:02}:{:02} +0000",
        MONTHS[month as usize - 1],
        of_day / 3600,
        of_day / 60 % 60,
        of_day % 60
    )
}

/// The proleptic Gregorian date of a day count since 1970-01-01 (Howard Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(month <= 2), month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(civil_from_days(20_779), (2026, 11, 22));
        assert_eq!(clf_time(UNIX_EPOCH + Duration::from_secs(1_795_310_875)), "22/Nov/2026:01:27:55 +0000");
    }

    #[test]
    fn combined_format_with_times() {
        let entry = Entry {
            client_ip: Some("192.0.2.1".parse().unwrap()),
            method: "GET",
            target: "/a?b=\"c\"",
            version: http::Version::HTTP_11,
            status: 200,
            body_bytes: 14,
            referer: None,
            user_agent: Some("curl/8"),
            queued: Some(Duration::from_micros(1500)),
            service: None,
            worker: None,
        };
        let line = entry.combined(UNIX_EPOCH + Duration::from_secs(1_795_310_875));
        assert_eq!(
            line,
            "192.0.2.1 - - [22/Nov/2026:01:27:55 +0000] \"GET /a?b=\\\"c\\\" HTTP/1.1\" 200 14 \"-\" \"curl/8\" \
             queue=1.500ms service=-\n"
        );
    }

    #[test]
    fn json_lines_parse_and_carry_every_field() {
        let entry = Entry {
            client_ip: Some("2001:db8::1".parse().unwrap()),
            method: "POST",
            target: "/a?b=\"c\"\n",
            version: http::Version::HTTP_11,
            status: 201,
            body_bytes: 3,
            referer: None,
            user_agent: Some("curl/8 \u{1F600}"),
            queued: Some(Duration::from_micros(1500)),
            service: Some(Duration::from_millis(20)),
            worker: Some(2),
        };
        let line = entry.json(UNIX_EPOCH + Duration::from_millis(1_795_310_875_250));
        assert!(line.ends_with('\n') && !line[..line.len() - 1].contains('\n'), "{line}");
        let value: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(value["time"], "2026-11-22T01:27:55.250Z");
        assert_eq!(value["client"], "2001:db8::1");
        assert_eq!(value["path"], "/a?b=\"c\"\n");
        assert_eq!((value["status"].as_u64(), value["bytes"].as_u64()), (Some(201), Some(3)));
        assert_eq!((value["queue_ms"].as_f64(), value["service_ms"].as_f64()), (Some(1.5), Some(20.0)));
        assert_eq!(value["worker"], 2);
        assert!(value["referer"].is_null());
    }
}
