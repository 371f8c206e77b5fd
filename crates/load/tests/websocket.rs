//! The WebSocket mode against a small echo server the test starts (tokio-tungstenite's server
//! side, on 127.0.0.1 or a unix socket), held against what the server saw.

mod common;

use std::path::Path;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{args, config};
use futures_util::{SinkExt, StreamExt};
use headway_load::{run, run_load, ErrorKind, LoadConfig};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, UnixListener};
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::Message;

/// How the echo server treats each socket.
#[derive(Clone, Copy)]
enum Behaviour {
    Echo,
    /// Answers every handshake 503, as a server over its socket limit does.
    Refuse,
    /// Echoes one message, then closes the socket with 1009.
    CloseAfterOne,
    /// Accepts, then never answers.
    Silent,
}

/// What the server saw.
#[derive(Default)]
struct Seen {
    sockets: AtomicU64,
    messages: AtomicU64,
    /// Sockets open when the first message arrived.
    sockets_at_first_message: AtomicU64,
}

struct EchoServer {
    url: String,
    seen: Arc<Seen>,
}

async fn echo_server(behaviour: Behaviour) -> EchoServer {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("ws://{}/echo", listener.local_addr().unwrap());
    let seen = Arc::new(Seen::default());
    let counted = seen.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(serve(stream, behaviour, counted.clone()));
        }
    });
    EchoServer { url, seen }
}

async fn serve<S: AsyncRead + AsyncWrite + Unpin>(mut stream: S, behaviour: Behaviour, seen: Arc<Seen>) {
    if let Behaviour::Refuse = behaviour {
        let mut head = [0u8; 1024];
        let _ = stream.read(&mut head).await;
        let _ = stream.write_all(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n").await;
        return;
    }
    let Ok(mut socket) = tokio_tungstenite::accept_async(stream).await else { return };
    seen.sockets.fetch_add(1, Ordering::SeqCst);
    while let Some(Ok(message)) = socket.next().await {
        if !message.is_binary() {
            continue;
        }
        if seen.messages.fetch_add(1, Ordering::SeqCst) == 0 {
            seen.sockets_at_first_message.store(seen.sockets.load(Ordering::SeqCst), Ordering::SeqCst);
        }
        match behaviour {
            Behaviour::Silent => std::future::pending::<()>().await,
            Behaviour::Echo | Behaviour::Refuse => {
                if socket.send(message).await.is_err() {
                    return;
                }
            }
            Behaviour::CloseAfterOne => {
                let _ = socket.send(message).await;
                let frame = CloseFrame { code: CloseCode::Size, reason: "message too big".into() };
                let _ = socket.send(Message::Close(Some(frame))).await;
                return;
            }
        }
    }
}

fn websocket_config(url: String) -> LoadConfig {
    let mut c = config(url);
    c.websocket = true;
    c
}

#[tokio::test]
async fn closed_loop_sends_exactly_n_messages_on_sockets_opened_before_the_clock() {
    let server = echo_server(Behaviour::Echo).await;
    let mut c = websocket_config(server.url.clone());
    c.requests = Some(500);
    c.connections = 5;
    c.message_size = 64;
    let report = run_load(c).await.unwrap();
    assert_eq!((report.requests, report.errors), (500, 0));
    assert_eq!(server.seen.messages.load(Ordering::SeqCst), 500);
    assert_eq!(server.seen.sockets.load(Ordering::SeqCst), 5);
    assert_eq!(server.seen.sockets_at_first_message.load(Ordering::SeqCst), 5, "every socket opened first");
    assert_eq!(report.status_codes.get(&101), Some(&5), "handshakes are counted by status");
    assert_eq!(report.connections_opened, 5);
    assert_eq!(report.bytes, 500 * 64, "echoed bytes");
    assert_eq!(report.settings.websocket_message_size, Some(64));
    assert_eq!(report.latency.spectrum.last().map(|p| p.count), Some(500));
    assert_eq!(report.targets[0].requests, 500);
    assert!(report.latency_by_class.is_empty(), "an echo has no status class");
    let text = report.to_hey_text();
    assert!(text.contains("Messages/sec:"), "{text}");
    assert!(text.contains("Handshake status distribution:\n  [101]\t5 handshakes"), "{text}");
}

#[tokio::test]
async fn open_loop_sends_at_the_rate_and_threads_share_the_count() {
    let server = echo_server(Behaviour::Echo).await;
    let mut c = websocket_config(server.url.clone());
    c.requests = Some(101);
    c.connections = 4;
    c.threads = 2;
    c.rate = Some(200.0);
    let report = run_load(c).await.unwrap();
    assert_eq!((report.requests, report.errors), (101, 0));
    assert_eq!(server.seen.messages.load(Ordering::SeqCst), 101);
    // 101 sends at 200/s span half a second: the open loop cannot finish sooner.
    assert!(report.total_secs >= 0.49, "total {}", report.total_secs);
    assert_eq!(report.settings.model, "open");
}

#[tokio::test]
async fn refused_handshakes_are_counted_by_status_and_as_errors() {
    let server = echo_server(Behaviour::Refuse).await;
    let mut c = websocket_config(server.url.clone());
    c.requests = Some(6);
    c.connections = 2;
    let report = run_load(c).await.unwrap();
    assert_eq!((report.requests, report.errors), (0, 6));
    let refused = &report.errors_by_kind[&ErrorKind::HandshakeRefused];
    assert_eq!(refused.count, 6);
    assert!(refused.example.contains("503"), "{}", refused.example);
    // Two tried before the clock, then one for each message.
    assert_eq!(report.status_codes.get(&503), Some(&8));
}

#[tokio::test]
async fn a_socket_the_server_closes_costs_its_message_and_the_next_one_reopens() {
    let server = echo_server(Behaviour::CloseAfterOne).await;
    let mut c = websocket_config(server.url.clone());
    c.requests = Some(6);
    c.connections = 1;
    let report = run_load(c).await.unwrap();
    // Echo, closed, (reopened) echo, closed, ...
    assert_eq!((report.requests, report.errors), (3, 3));
    let closed = &report.errors_by_kind[&ErrorKind::ClosedEarly];
    assert!(closed.example.contains("1009"), "{}", closed.example);
    assert_eq!(server.seen.sockets.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn a_silent_socket_times_out_and_the_run_ends() {
    let server = echo_server(Behaviour::Silent).await;
    let mut c = websocket_config(server.url.clone());
    c.requests = Some(4);
    c.connections = 2;
    c.timeout = Duration::from_millis(300);
    let report = run_load(c).await.unwrap();
    assert_eq!(report.errors_by_kind[&ErrorKind::Timeout].count, 4);
    assert!(report.total_secs < 5.0, "bounded by the timeout: {}", report.total_secs);
}

#[tokio::test]
async fn over_a_unix_socket() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("echo.sock");
    let seen = serve_unix(&path).await;
    let mut c = websocket_config("ws://app.test/echo".into());
    c.unix_socket = Some(path);
    c.requests = Some(20);
    c.connections = 2;
    let report = run_load(c).await.unwrap();
    assert_eq!((report.requests, report.errors), (20, 0));
    assert_eq!(seen.messages.load(Ordering::SeqCst), 20);
}

async fn serve_unix(path: &Path) -> Arc<Seen> {
    let listener = UnixListener::bind(path).unwrap();
    let seen = Arc::new(Seen::default());
    let counted = seen.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(serve(stream, Behaviour::Echo, counted.clone()));
        }
    });
    seen
}

#[test]
fn the_flags_make_a_websocket_config() {
    let parsed =
        args(&["--websocket", "-c", "1000", "-z", "10s", "--rate", "5000", "--message-size", "128", "ws://h/p"]);
    let c = parsed.unwrap().to_config().unwrap();
    assert!(c.websocket);
    assert_eq!((c.connections, c.message_size, c.rate), (1000, 128, Some(5000.0)));
    assert!(args(&["--message-size", "10", "ws://h/p"]).is_err(), "--message-size needs --websocket");
}

#[test]
fn what_the_websocket_mode_cannot_do_exits_with_status_2() {
    for line in [
        &["ws://127.0.0.1:1/"][..],
        &["--websocket", "http://127.0.0.1:1/"],
        &["wss://127.0.0.1:1/"],
        &["--websocket", "--pipeline", "2", "ws://127.0.0.1:1/"],
        &["--websocket", "-d", "body", "ws://127.0.0.1:1/"],
        &["--websocket", "--message-size", "0", "ws://127.0.0.1:1/"],
    ] {
        assert_eq!(run(args(line).unwrap()).unwrap(), ExitCode::from(2), "{line:?}");
    }
}
