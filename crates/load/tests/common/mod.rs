//! A small HTTP/1.1 server for the load tests, on 127.0.0.1 or a unix socket. It counts what
//! arrives (connections, requests, pipelining depth, Host headers) so the tests can hold the
//! load generator's report against what the server saw, and its answers are chosen per request
//! by a closure (status, body framing, delay, or misbehaviour).

#![allow(dead_code)] // each test file uses a different part of this module

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, UnixListener};
use tokio::task::JoinHandle;

/// One request as the server saw it.
#[derive(Debug, Clone)]
pub struct Seen {
    /// 0-based arrival number over the whole server.
    pub index: u64,
    pub method: String,
    pub path: String,
    pub host: Option<String>,
    pub connection_close: bool,
    pub body_len: usize,
}

/// How to answer one request.
#[derive(Debug, Clone)]
pub enum Reply {
    Answer {
        status: u16,
        body: Vec<u8>,
        chunked: bool,
        delay: Duration,
        headers: Vec<(String, String)>,
    },
    /// Write these bytes as they are (a malformed or cut-short answer), then close.
    Raw(Vec<u8>),
    /// Never answer (for timeouts).
    Hang,
    /// Close the connection without answering.
    Close,
}

impl Reply {
    pub fn ok(body: &str) -> Reply {
        Reply::Answer {
            status: 200,
            body: body.as_bytes().to_vec(),
            chunked: false,
            delay: Duration::ZERO,
            headers: vec![],
        }
    }

    pub fn with_status(self, status: u16) -> Reply {
        match self {
            Reply::Answer { body, chunked, delay, headers, .. } => {
                Reply::Answer { status, body, chunked, delay, headers }
            }
            other => other,
        }
    }

    pub fn delayed(self, by: Duration) -> Reply {
        match self {
            Reply::Answer { status, body, chunked, headers, .. } => {
                Reply::Answer { status, body, chunked, delay: by, headers }
            }
            other => other,
        }
    }
}

pub type Handler = Arc<dyn Fn(&Seen) -> Reply + Send + Sync>;

/// A load of `url` with a 10 s request timeout (a test that hangs fails instead of waiting
/// hey's 20 s).
#[derive(clap::Parser)]
struct Cli {
    #[command(flatten)]
    load: headway_load::LoadArgs,
}

/// `headway load` flags (after `load`), parsed as the binary parses them.
pub fn args(line: &[&str]) -> Result<headway_load::LoadArgs, clap::Error> {
    use clap::Parser;
    Cli::try_parse_from(std::iter::once("load").chain(line.iter().copied())).map(|cli| cli.load)
}

pub fn config(url: String) -> headway_load::LoadConfig {
    let mut config = headway_load::LoadConfig::new(url);
    config.timeout = Duration::from_secs(10);
    config
}

#[derive(Default)]
pub struct Options {
    /// Answer only once this many requests are buffered on the connection (pipelining check).
    pub min_batch: usize,
    /// Close a connection that stays idle this long after an answer, without telling the client.
    pub idle_close: Option<Duration>,
}

#[derive(Default)]
pub struct Counters {
    pub connections: AtomicU64,
    pub requests: AtomicU64,
    pub max_batch: AtomicUsize,
    pub seen: Mutex<Vec<Seen>>,
}

pub struct TestServer {
    pub addr: Option<SocketAddr>,
    pub path: Option<PathBuf>,
    pub counters: Arc<Counters>,
    accept: JoinHandle<()>,
}

impl TestServer {
    pub fn url(&self, path: &str) -> String {
        match self.addr {
            Some(addr) => format!("http://{addr}{path}"),
            None => format!("http://unix.test{path}"),
        }
    }

    pub fn connections(&self) -> u64 {
        self.counters.connections.load(Ordering::SeqCst)
    }

    pub fn requests(&self) -> u64 {
        self.counters.requests.load(Ordering::SeqCst)
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.counters.seen.lock().unwrap().clone()
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

pub async fn serve(handler: Handler) -> TestServer {
    serve_with(handler, Options::default()).await
}

pub async fn serve_with(handler: Handler, options: Options) -> TestServer {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let counters = Arc::new(Counters::default());
    let shared = Arc::new((handler, options, counters.clone()));
    let accept = tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            stream.set_nodelay(true).unwrap();
            tokio::spawn(connection(stream, shared.clone()));
        }
    });
    TestServer { addr: Some(addr), path: None, counters, accept }
}

pub async fn serve_unix(path: &Path, handler: Handler) -> TestServer {
    let listener = UnixListener::bind(path).unwrap();
    let counters = Arc::new(Counters::default());
    let shared = Arc::new((handler, Options::default(), counters.clone()));
    let accept = tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(connection(stream, shared.clone()));
        }
    });
    TestServer { addr: None, path: Some(path.to_path_buf()), counters, accept }
}

/// A server answering every request with 200 "hello" after `delay`.
pub async fn hello(delay: Duration) -> TestServer {
    serve(Arc::new(move |_| Reply::ok("hello").delayed(delay))).await
}

/// A handler that refuses every `nth` request (by arrival) with an immediate 503, as a server
/// shedding load does, and answers the others 200 after `delay`.
pub fn refuse_every(nth: u64, delay: Duration) -> Handler {
    Arc::new(move |seen| match seen.index % nth {
        0 => Reply::ok("busy").with_status(503),
        _ => Reply::ok("hello").delayed(delay),
    })
}

/// A handler that answers in `base` but, at request number `at`, stalls the whole server for
/// `stall`: that request and every request arriving during the stall wait until it ends (a
/// server paused by GC or a lock, wrk2's classic demonstration).
pub fn stall_once(base: Duration, at: u64, stall: Duration) -> Handler {
    let until: Mutex<Option<Instant>> = Mutex::new(None);
    Arc::new(move |seen| {
        let now = Instant::now();
        let mut until = until.lock().unwrap();
        if seen.index == at {
            *until = Some(now + stall);
        }
        let delay = match *until {
            Some(end) if end > now => end - now,
            _ => base,
        };
        Reply::ok("hello").delayed(delay)
    })
}

async fn connection<S>(mut stream: S, shared: Arc<(Handler, Options, Arc<Counters>)>)
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let (handler, options, counters) = &*shared;
    counters.connections.fetch_add(1, Ordering::SeqCst);
    let mut buf: Vec<u8> = Vec::new();
    let mut pending: VecDeque<Seen> = VecDeque::new();
    let mut chunk = [0u8; 16 * 1024];
    let mut answered_any = false;
    loop {
        while let Some((seen, used)) = parse_request(&buf, counters) {
            buf.drain(..used);
            pending.push_back(seen);
        }
        if !pending.is_empty() && pending.len() >= options.min_batch.max(1) {
            counters.max_batch.fetch_max(pending.len(), Ordering::SeqCst);
            while let Some(seen) = pending.pop_front() {
                if !answer(&mut stream, handler(&seen), seen.connection_close, seen.method == "HEAD").await {
                    return;
                }
                answered_any = true;
            }
            continue;
        }
        let read = match options.idle_close {
            Some(idle) if answered_any && pending.is_empty() && buf.is_empty() => {
                match tokio::time::timeout(idle, stream.read(&mut chunk)).await {
                    Ok(read) => read,
                    Err(_) => return, // idle too long: drop the connection silently
                }
            }
            _ => stream.read(&mut chunk).await,
        };
        match read {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

/// Writes one reply (without its body for a HEAD request); false when the connection must end.
async fn answer<S: AsyncWrite + Unpin>(stream: &mut S, reply: Reply, close: bool, head_request: bool) -> bool {
    let bytes = match reply {
        Reply::Hang => {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            return false;
        }
        Reply::Close => return false,
        Reply::Raw(bytes) => {
            // Whatever happens to the write, the connection ends here.
            let _ = stream.write_all(&bytes).await;
            return false;
        }
        Reply::Answer { status, body, chunked, delay, headers } => {
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            let mut head = format!("HTTP/1.1 {status} X\r\n");
            for (name, value) in headers {
                head.push_str(&format!("{name}: {value}\r\n"));
            }
            if close {
                head.push_str("Connection: close\r\n");
            }
            let mut out;
            if chunked && !head_request {
                head.push_str("Transfer-Encoding: chunked\r\n\r\n");
                out = head.into_bytes();
                for piece in body.chunks(7) {
                    out.extend_from_slice(format!("{:x}\r\n", piece.len()).as_bytes());
                    out.extend_from_slice(piece);
                    out.extend_from_slice(b"\r\n");
                }
                out.extend_from_slice(b"0\r\n\r\n");
            } else {
                head.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
                out = head.into_bytes();
                if !head_request {
                    out.extend_from_slice(&body);
                }
            }
            out
        }
    };
    stream.write_all(&bytes).await.is_ok() && !close
}

fn parse_request(buf: &[u8], counters: &Counters) -> Option<(Seen, usize)> {
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut request = httparse::Request::new(&mut headers);
    let head = match request.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return None,
        Err(err) => panic!("test server got a malformed request: {err}"),
    };
    let header = |name: &str| {
        request
            .headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case(name))
            .map(|h| String::from_utf8_lossy(h.value).into_owned())
    };
    let body_len: usize = header("content-length").map_or(0, |v| v.parse().unwrap());
    if buf.len() < head + body_len {
        return None;
    }
    let seen = Seen {
        index: counters.requests.fetch_add(1, Ordering::SeqCst),
        method: request.method.unwrap().to_string(),
        path: request.path.unwrap().to_string(),
        host: header("host"),
        connection_close: header("connection").is_some_and(|v| v.eq_ignore_ascii_case("close")),
        body_len,
    };
    counters.seen.lock().unwrap().push(seen.clone());
    Some((seen, head + body_len))
}
