//! The front in-process: client connections over in-memory streams, the queue served by the test
//! itself standing in for the slots, and tokio's paused clock for the deadlines.

use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};
use tokio::sync::watch;

use super::conn::{Arrival, Connection};
use super::forwarding_fields::{Peer, TrustedProxies};
use super::h2::Http2Settings;
use super::stream::ReadAhead;
use super::websocket::WebSocketSettings;
use super::{Front, FrontSettings};
use crate::byte_budget::ByteBudget;
use crate::ops::readiness::Readiness;
use crate::ops::stats::Stats;
use crate::queue::job::{Outcome, RequestBody, ResponseBody, Timing, WorkerResponse};
use crate::queue::{Queue, Reader, Routing};
use crate::spool::SpoolLimits;
use crate::tally::Tally;
use crate::workers::launch::TakesWebSockets;
use headway_http1::request::Limits;

mod h2;
mod websocket;

struct Harness {
    front: Arc<Front>,
    queue: Arc<Queue>,
    /// Stands in for the slots of one worker.
    busy: Arc<Tally>,
    _shutdown: watch::Sender<bool>,
}

impl Harness {
    fn new() -> Harness {
        Harness::with(|_| {})
    }

    /// A harness whose front settings `change` adjusts first.
    fn with(change: impl FnOnce(&mut FrontSettings)) -> Harness {
        let mut settings = FrontSettings {
            limits: Limits { max_head: 8 * 1024, max_body: 1 << 20 },
            header_timeout: Duration::from_secs(10),
            keep_alive_timeout: Duration::from_secs(75),
            keep_alive: true,
            max_requests_per_connection: 0,
            io_timeout: Duration::from_secs(60),
            request_spool: SpoolLimits::unbounded(64 * 1024),
            trusted_proxies: TrustedProxies::parse("127.0.0.1").unwrap(),
            proxy_protocol: false,
            health_path: None,
            statics: Default::default(),
            websocket: WebSocketSettings {
                workers_take_them: TakesWebSockets::new(true),
                max_open: 100,
                idle_timeout: Duration::from_secs(300),
                ping_interval: None,
                max_message: 1 << 20,
                held: Arc::new(ByteBudget::new(64 << 20)),
            },
            http2: Some(Http2Settings::new(8 * 1024)),
        };
        change(&mut settings);
        let queue = Queue::new(100, Duration::from_secs(30), 1);
        let (shutdown, shutdown_rx) = watch::channel(false);
        let front = Arc::new(Front {
            settings,
            queue: queue.clone(),
            stats: Arc::new(Stats::default()),
            access_log: None,
            readiness: Arc::new(Readiness::default()),
            shutdown: shutdown_rx,
            tls: None,
        });
        Harness { front, queue, busy: Arc::new(Tally::default()), _shutdown: shutdown }
    }

    /// A client connected to the front; the connection is served by a task of its own.
    fn connect(&self) -> DuplexStream {
        let (client, server) = tokio::io::duplex(64 * 1024);
        let (stream, arrival) = (ReadAhead::new(server, Bytes::new()), Arrival::now(&self.front.stats));
        tokio::spawn(Connection::new(stream, Peer::local(), self.front.clone(), arrival, BytesMut::new()).serve());
        client
    }

    /// Takes the next request from the queue as a slot would, and answers it with its path.
    async fn answer_next(&self) -> String {
        let job = self.queue.next_job(&self.busy).recv().await;
        let path = job.request.uri().path().to_owned();
        let mut head = http::Response::new(()).into_parts().0;
        head.headers.insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("text/plain"));
        let body = ResponseBody::Complete(Bytes::from(path.clone()));
        let timing = Timing { queued: Duration::ZERO, service: Duration::ZERO, worker: 1 };
        job.answer(Outcome::Response(WorkerResponse { head, body, timing }));
        self.busy.down();
        path
    }

    fn depth(&self) -> usize {
        self.queue.snapshot(Reader::Json).depth
    }
}

/// Reads from `client` until `count` responses (each with a Content-Length) have arrived, or
/// the connection ends; returns their heads and bodies.
async fn read_responses(client: &mut DuplexStream, count: usize) -> Vec<(String, String)> {
    let mut data = Vec::new();
    let mut responses = Vec::new();
    loop {
        while let Some(end) = find(&data, b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&data[..end]).into_owned();
            let length: usize = head
                .lines()
                .find_map(|line| line.to_ascii_lowercase().strip_prefix("content-length: ").map(str::to_owned))
                .and_then(|value| value.trim().parse().ok())
                .unwrap_or(0);
            if data.len() < end + 4 + length {
                break;
            }
            let body = String::from_utf8_lossy(&data[end + 4..end + 4 + length]).into_owned();
            responses.push((head, body));
            data.drain(..end + 4 + length);
        }
        if responses.len() >= count {
            return responses;
        }
        let mut chunk = [0u8; 4096];
        match client.read(&mut chunk).await {
            Ok(0) | Err(_) => return responses,
            Ok(n) => data.extend_from_slice(&chunk[..n]),
        }
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|window| window == needle)
}

/// Yields to the connection tasks until `condition` holds (a bounded number of times).
async fn settle(condition: impl Fn() -> bool) {
    for _ in 0..1000 {
        if condition() {
            return;
        }
        tokio::task::yield_now().await;
    }
    panic!("the front did not get there");
}

#[tokio::test]
async fn pipelined_requests_enter_the_queue_one_at_a_time_and_are_answered_in_order() {
    let harness = Harness::new();
    let mut client = harness.connect();
    client
        .write_all(
            b"GET /1 HTTP/1.1\r\nHost: a\r\n\r\nGET /2 HTTP/1.1\r\nHost: a\r\n\r\nGET /3 HTTP/1.1\r\nHost: a\r\n\r\n",
        )
        .await
        .unwrap();
    for expected in ["/1", "/2", "/3"] {
        settle(|| harness.depth() == 1).await;
        // However long it waits, the next request of the connection stays out of the queue.
        for _ in 0..100 {
            tokio::task::yield_now().await;
        }
        assert_eq!(harness.depth(), 1);
        assert_eq!(harness.answer_next().await, expected);
    }
    let responses = read_responses(&mut client, 3).await;
    let bodies: Vec<&str> = responses.iter().map(|(_, body)| body.as_str()).collect();
    assert_eq!(bodies, ["/1", "/2", "/3"]);
    assert!(responses.iter().all(|(head, _)| head.starts_with("HTTP/1.1 200 OK\r\n")));
}

#[tokio::test]
async fn a_client_that_leaves_withdraws_its_waiting_request() {
    let harness = Harness::new();
    let mut client = harness.connect();
    client.write_all(b"GET /gone HTTP/1.1\r\nHost: a\r\n\r\n").await.unwrap();
    settle(|| harness.depth() == 1).await;
    drop(client);
    settle(|| harness.depth() == 0).await;
    assert_eq!(harness.queue.snapshot(Reader::Json).withdrawn, 1);

    // The slot that frees up next gets the next client's request, never the ghost.
    let mut next = harness.connect();
    next.write_all(b"GET /next HTTP/1.1\r\nHost: a\r\n\r\n").await.unwrap();
    assert_eq!(harness.answer_next().await, "/next");
}

#[tokio::test(start_paused = true)]
async fn an_incomplete_head_gets_408_at_the_header_timeout() {
    let harness = Harness::new();
    let mut client = harness.connect();
    client.write_all(b"GET /slow HTTP/1.1\r\nHost: a\r\n").await.unwrap();
    let started = tokio::time::Instant::now();
    let responses = read_responses(&mut client, 1).await;
    assert!(responses[0].0.starts_with("HTTP/1.1 408 Request Timeout\r\n"));
    assert_eq!(started.elapsed(), Duration::from_secs(10));
    assert_eq!(harness.depth(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_stalled_body_gets_408_at_the_io_timeout_and_never_queues() {
    let harness = Harness::new();
    let mut client = harness.connect();
    client.write_all(b"POST /upload HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\nabc").await.unwrap();
    let started = tokio::time::Instant::now();
    let responses = read_responses(&mut client, 1).await;
    assert!(responses[0].0.starts_with("HTTP/1.1 408 Request Timeout\r\n"));
    assert_eq!(started.elapsed(), Duration::from_secs(60));
    assert_eq!(harness.queue.snapshot(Reader::Json).dispatched, 0);
}

#[tokio::test(start_paused = true)]
async fn a_request_no_slot_starts_in_time_gets_503_with_retry_after() {
    let harness = Harness::new();
    let mut client = harness.connect();
    client.write_all(b"GET /late HTTP/1.1\r\nHost: a\r\n\r\n").await.unwrap();
    let responses = read_responses(&mut client, 1).await;
    let head = &responses[0].0;
    assert!(head.starts_with("HTTP/1.1 503 Service Unavailable\r\n"), "{head}");
    assert!(head.contains("\r\nretry-after: 1\r\n"), "{head}");
    assert_eq!(harness.queue.snapshot(Reader::Json).shed_queue_timeout, 1);
}

#[tokio::test(start_paused = true)]
async fn a_shed_request_is_told_when_a_slot_is_likely_free() {
    let harness = Harness::new();
    for _ in 0..20 {
        harness.queue.record_service(Routing::default(), Duration::from_millis(2500));
    }
    let mut client = harness.connect();
    client.write_all(b"GET /late HTTP/1.1\r\nHost: a\r\n\r\n").await.unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(harness.queue.depth(), 1, "/late is queued");
    let request = || http::Request::new(RequestBody::Memory(Bytes::new()));
    let _behind: Vec<_> = (0..4).map(|_| harness.queue.enqueue(request(), None)).collect();
    let responses = read_responses(&mut client, 1).await;
    // Shed at its 30 s deadline with four waiting behind it that no slot started: a newcomer
    // would wait five services of 2.5 s for the one slot.
    let head = &responses[0].0;
    assert!(head.starts_with("HTTP/1.1 503 Service Unavailable\r\n"), "{head}");
    assert!(head.contains("\r\nretry-after: 13\r\n"), "{head}");
}

#[tokio::test]
async fn a_silent_connection_holds_no_read_buffer() {
    let harness = Harness::new();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let mut client = tokio::net::TcpStream::connect(listener.local_addr().unwrap()).await.unwrap();
    let (stream, _) = listener.accept().await.unwrap();
    let arrival = Arrival::now(&harness.front.stats);
    let mut connection = Connection::new(stream, Peer::local(), harness.front.clone(), arrival, BytesMut::new());
    // A fresh socket says it is readable before a byte has come: the wait must not keep a buffer.
    let silent = Duration::from_millis(100);
    assert!(tokio::time::timeout(silent, connection.read_head()).await.is_err());
    assert_eq!(connection.buf.capacity(), 0, "waiting for a first request");
    client.write_all(b"GET /a HTTP/1.1\r\nHost: a\r\n\r\n").await.unwrap();
    let head = connection.read_head().await.ok().flatten().expect("a request");
    assert_eq!(head.target, "/a");
    assert!(tokio::time::timeout(silent, connection.read_head()).await.is_err());
    assert_eq!(connection.buf.capacity(), 0, "idle between requests");
}
