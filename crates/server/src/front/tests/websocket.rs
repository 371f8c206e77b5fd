//! WebSockets through the front in-process: the test takes the handshake from the queue as a
//! slot would and answers `101` with one end of an in-memory stream, holding the other end as
//! the worker.

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};
use tokio::sync::watch;

use super::{find, read_responses, Harness};
use crate::front::websocket::frames::client_frame;
use crate::queue::job::{Outcome, Timing, Upgraded, WebSocketHandshake, WorkerSocket};
use crate::tally::{Hold, Tally};

const HANDSHAKE: &[u8] = b"GET /chat HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\
    Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n";

/// The worker's end of one socket, as a slot hands it over.
struct FakeWorker {
    io: DuplexStream,
    closing: watch::Sender<u64>,
    open: Arc<Tally>,
}

impl Harness {
    /// Takes the next request, which must be a handshake, and accepts it.
    async fn accept_websocket(&self) -> FakeWorker {
        let job = self.queue.next_job(&self.busy).recv().await;
        assert!(job.request.extensions().get::<WebSocketHandshake>().is_some(), "marked for a connection of its own");
        assert_eq!(job.request.headers()["upgrade"], "websocket");
        assert_eq!(job.request.headers()["connection"], "upgrade");
        let (front_end, worker_end) = tokio::io::duplex(64 * 1024);
        let (closing, watching) = watch::channel(0);
        let open = Arc::new(Tally::default());
        let mut head = http::Response::new(()).into_parts().0;
        head.status = http::StatusCode::SWITCHING_PROTOCOLS;
        head.headers.insert("sec-websocket-accept", http::HeaderValue::from_static("s3pPLMBiTxaQ9kYGzzhZRbK+xOo="));
        let socket = WorkerSocket {
            io: Box::new(front_end),
            compressed: false,
            closing: watching,
            held: Hold::new(open.clone()),
        };
        let timing = Timing { queued: Duration::ZERO, service: Duration::ZERO, worker: 1 };
        job.answer(Outcome::Upgraded(Upgraded { head, socket, timing }));
        self.busy.down();
        FakeWorker { io: worker_end, closing, open }
    }

    fn open_websockets(&self) -> u64 {
        self.front.stats.open_websockets()
    }
}

/// Reads the `101` head from the client's end; returns it.
async fn read_switch(client: &mut DuplexStream) -> String {
    let mut head = Vec::new();
    while find(&head, b"\r\n\r\n").is_none() {
        let mut byte = [0u8; 1];
        assert_eq!(client.read(&mut byte).await.unwrap(), 1, "the connection ended before the 101 head");
        head.push(byte[0]);
    }
    String::from_utf8(head).unwrap()
}

/// Reads one frame; returns its opcode and (unmasked) payload.
async fn read_frame(stream: &mut DuplexStream) -> (u8, Vec<u8>) {
    let mut head = [0u8; 2];
    stream.read_exact(&mut head).await.unwrap();
    let len = match head[1] & 0x7f {
        126 => u64::from(stream.read_u16().await.unwrap()),
        127 => stream.read_u64().await.unwrap(),
        len => u64::from(len),
    };
    let mut mask = [0u8; 4];
    if head[1] & 0x80 != 0 {
        stream.read_exact(&mut mask).await.unwrap();
    }
    let mut payload = vec![0u8; len as usize];
    stream.read_exact(&mut payload).await.unwrap();
    payload.iter_mut().zip(mask.iter().cycle()).for_each(|(byte, key)| *byte ^= key);
    (head[0] & 0x0f, payload)
}

/// Reads a close frame; returns its code and reason.
async fn read_close(stream: &mut DuplexStream) -> (u16, String) {
    let (opcode, payload) = read_frame(stream).await;
    assert_eq!(opcode, 8, "a close frame");
    (u16::from_be_bytes([payload[0], payload[1]]), String::from_utf8_lossy(&payload[2..]).into_owned())
}

/// Waits (a few seconds at most) until `condition` holds: a socket's end may include the
/// front's short wait for the client to close.
async fn eventually(condition: impl Fn() -> bool) {
    for _ in 0..500 {
        if condition() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the front did not get there");
}

async fn at_end(stream: &mut DuplexStream) -> bool {
    let mut rest = Vec::new();
    stream.read_to_end(&mut rest).await.is_ok() && rest.is_empty()
}

/// A client and a worker joined by an open socket.
async fn open(harness: &Harness) -> (DuplexStream, FakeWorker) {
    let mut client = harness.connect();
    client.write_all(HANDSHAKE).await.unwrap();
    let worker = harness.accept_websocket().await;
    let head = read_switch(&mut client).await;
    assert!(head.starts_with("HTTP/1.1 101 Switching Protocols\r\n"), "{head}");
    (client, worker)
}

#[tokio::test]
async fn after_101_bytes_go_both_ways_and_the_socket_holds_no_slot() {
    let harness = Harness::new();
    let mut client = harness.connect();
    // A frame sent right behind the handshake waits for the socket and goes first.
    let early = client_frame(true, 1, b"early");
    client.write_all(&[HANDSHAKE, &early].concat()).await.unwrap();
    let mut worker = harness.accept_websocket().await;
    let head = read_switch(&mut client).await;
    assert!(head.contains("sec-websocket-accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n"), "{head}");
    assert!(head.contains("upgrade: websocket\r\n") && head.contains("connection: upgrade\r\n"), "{head}");
    assert_eq!(read_frame(&mut worker.io).await, (1, b"early".to_vec()));

    client.write_all(&client_frame(true, 2, &[7; 70_000])).await.unwrap();
    assert_eq!(read_frame(&mut worker.io).await, (2, vec![7; 70_000]));
    worker.io.write_all(&[0x81, 2, b'h', b'i']).await.unwrap();
    assert_eq!(read_frame(&mut client).await, (1, b"hi".to_vec()));

    eventually(|| harness.open_websockets() == 1).await;
    assert_eq!(harness.front.stats.open_connections(), 0, "a WebSocket is counted apart from HTTP connections");
    assert_eq!((harness.busy.get(), harness.depth()), (0, 0));
    assert_eq!(worker.open.get(), 1);

    // The client vanishes: the worker sees its connection end (and closes it, as a worker
    // does), and every count goes back.
    drop(client);
    assert!(at_end(&mut worker.io).await);
    drop(worker.io);
    eventually(|| harness.open_websockets() == 0 && worker.open.get() == 0).await;
}

#[tokio::test]
async fn a_message_over_the_limit_gets_1009_and_the_worker_1001_before_any_of_it() {
    let harness = Harness::with(|settings| settings.websocket.max_message = 100);
    let (mut client, mut worker) = open(&harness).await;
    let fine = client_frame(false, 2, &[1; 60]);
    let crossing = client_frame(true, 0, &[2; 41]);
    client.write_all(&[fine, crossing].concat()).await.unwrap();
    assert_eq!(read_close(&mut client).await, (1009, "message too big".to_owned()));
    assert!(at_end(&mut client).await);
    // The worker got a close frame from the front, masked as a client's must be; and not one
    // byte of the refused message, not even its first fragment, which was within the limit.
    let mut close = [0u8; 6];
    worker.io.read_exact(&mut close).await.unwrap();
    assert_eq!(close[0], 0x88);
    assert!(close[1] & 0x80 != 0, "masked");
    let (code, _) = read_close_rest(&mut worker.io, close).await;
    assert_eq!(code, 1001);
    assert!(at_end(&mut worker.io).await);
    eventually(|| harness.open_websockets() == 0).await;
}

/// The rest of a masked close frame whose first six bytes (head and mask) are in `start`.
async fn read_close_rest(stream: &mut DuplexStream, start: [u8; 6]) -> (u16, String) {
    let mut payload = vec![0u8; usize::from(start[1] & 0x7f)];
    stream.read_exact(&mut payload).await.unwrap();
    payload.iter_mut().zip(start[2..].iter().cycle()).for_each(|(byte, key)| *byte ^= key);
    (u16::from_be_bytes([payload[0], payload[1]]), String::from_utf8_lossy(&payload[2..]).into_owned())
}

#[tokio::test]
async fn an_unmasked_client_frame_is_a_protocol_error() {
    let harness = Harness::new();
    let (mut client, mut worker) = open(&harness).await;
    client.write_all(&[0x81, 1, b'x']).await.unwrap();
    assert_eq!(read_close(&mut client).await.0, 1002);
    assert_eq!(read_close(&mut worker.io).await.0, 1001);
}

#[tokio::test(start_paused = true)]
async fn an_idle_socket_is_closed_with_1001_both_ways() {
    let harness = Harness::with(|settings| settings.websocket.idle_timeout = Duration::from_secs(30));
    let (mut client, mut worker) = open(&harness).await;
    tokio::time::sleep(Duration::from_secs(20)).await;
    client.write_all(&client_frame(true, 9, b"ping")).await.unwrap();
    assert_eq!(read_frame(&mut worker.io).await, (9, b"ping".to_vec()));
    let moved = tokio::time::Instant::now();
    // Idle from the ping on: closed 30 s after it, not 30 s after the handshake.
    assert_eq!(read_close(&mut client).await, (1001, "idle timeout".to_owned()));
    assert_eq!(moved.elapsed(), Duration::from_secs(30));
    assert_eq!(read_close(&mut worker.io).await, (1001, "idle timeout".to_owned()));
}

#[tokio::test]
async fn a_worker_going_away_closes_with_1001_after_the_frame_under_way() {
    let harness = Harness::new();
    let (mut client, mut worker) = open(&harness).await;
    // Half a frame from the worker is on its way when the front is told to close.
    worker.io.write_all(&[0x82, 10, 0, 1, 2, 3, 4]).await.unwrap();
    let mut first = [0u8; 7];
    client.read_exact(&mut first).await.unwrap();
    worker.closing.send_modify(|closings| *closings += 1);
    tokio::time::sleep(Duration::from_millis(50)).await;
    worker.io.write_all(&[5, 6, 7, 8, 9]).await.unwrap();
    let mut rest = [0u8; 5];
    client.read_exact(&mut rest).await.unwrap();
    assert_eq!(rest, [5, 6, 7, 8, 9], "the frame is finished before the close frame");
    assert_eq!(read_close(&mut client).await, (1001, "server going away".to_owned()));
    assert_eq!(read_close(&mut worker.io).await.0, 1001);
    eventually(|| worker.open.get() == 0).await;
}

#[tokio::test]
async fn a_side_that_sent_close_is_not_sent_another() {
    let harness = Harness::new();
    let (mut client, mut worker) = open(&harness).await;
    // The worker starts the closing handshake; then the front closes the socket itself.
    worker.io.write_all(&[0x88, 2, 0x03, 0xe8]).await.unwrap();
    assert_eq!(read_close(&mut client).await.0, 1000);
    worker.closing.send_modify(|closings| *closings += 1);
    assert!(at_end(&mut client).await, "no second close frame for the client");
    assert_eq!(read_close(&mut worker.io).await.0, 1001, "the worker is answered for the client");
}

#[tokio::test]
async fn handshakes_beyond_the_limit_get_503_and_are_counted() {
    let harness = Harness::with(|settings| settings.websocket.max_open = 1);
    let (_client, _worker) = open(&harness).await;
    let mut refused = harness.connect();
    refused.write_all(HANDSHAKE).await.unwrap();
    let responses = read_responses(&mut refused, 1).await;
    assert!(responses[0].0.starts_with("HTTP/1.1 503 Service Unavailable\r\n"), "{}", responses[0].0);
    assert_eq!(responses[0].1, "too many open WebSockets\n");
    assert_eq!(harness.depth(), 0, "refused before it queues");
}

#[tokio::test]
async fn a_handshake_for_another_version_gets_426_naming_13() {
    let harness = Harness::new();
    let mut client = harness.connect();
    let old = String::from_utf8_lossy(HANDSHAKE).replace("Version: 13", "Version: 8");
    client.write_all(old.as_bytes()).await.unwrap();
    let responses = read_responses(&mut client, 1).await;
    assert!(responses[0].0.starts_with("HTTP/1.1 426 Upgrade Required\r\n"), "{}", responses[0].0);
    assert!(responses[0].0.contains("\r\nsec-websocket-version: 13\r\n"));
}

#[tokio::test]
async fn a_refused_answer_to_a_handshake_is_an_ordinary_response() {
    let harness = Harness::new();
    let mut client = harness.connect();
    client.write_all(HANDSHAKE).await.unwrap();
    assert_eq!(harness.answer_next().await, "/chat");
    let responses = read_responses(&mut client, 1).await;
    assert!(responses[0].0.starts_with("HTTP/1.1 200 OK\r\n"));
    assert_eq!(harness.open_websockets(), 0);
}
