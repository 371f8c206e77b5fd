//! HTTP/2 through the front in-process: an `h2` client on an in-memory stream, the queue served
//! by the test as a slot would.

use std::time::Duration;

use bytes::Bytes;
use h2::client::SendRequest;
use h2::Reason;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::{settle, Harness};
use crate::front::conn::Arrival;
use crate::front::forwarding_fields::Peer;
use crate::front::h2::{opens_with_preface, serve};
use crate::front::stream::ReadAhead;
use crate::queue::Reader;

impl Harness {
    /// An HTTP/2 client connected to the front (its connection driven by a task of its own), and
    /// the task that ends with the connection's error, if any.
    async fn connect_h2(&self) -> (SendRequest<Bytes>, tokio::task::JoinHandle<Result<(), h2::Error>>) {
        let (client, server) = tokio::io::duplex(64 * 1024);
        let arrival = Arrival::now(&self.front.stats);
        tokio::spawn(serve(self.front.clone(), server, Peer::local(), arrival));
        let (send, connection) = h2::client::handshake(client).await.unwrap();
        (send, tokio::spawn(connection))
    }
}

fn get(path: &str) -> http::Request<()> {
    http::Request::get(format!("http://a{path}")).body(()).unwrap()
}

#[tokio::test]
async fn streams_of_one_connection_queue_as_requests_of_many_and_are_answered_each_on_its_own() {
    let harness = Harness::new();
    let (mut client, _connection) = harness.connect_h2().await;
    let mut responses = Vec::new();
    for path in ["/1", "/2", "/3"] {
        client = client.ready().await.unwrap();
        let (response, _) = client.send_request(get(path), true).unwrap();
        responses.push(response);
        settle(|| harness.depth() == responses.len()).await;
    }
    // All three wait in the queue at once, in the order they became complete.
    for expected in ["/1", "/2", "/3"] {
        assert_eq!(harness.answer_next().await, expected);
    }
    for (response, expected) in responses.into_iter().zip(["/1", "/2", "/3"]) {
        let response = response.await.unwrap();
        assert_eq!(response.status(), 200);
        assert_eq!(response.version(), http::Version::HTTP_2);
        let mut body = response.into_body();
        assert_eq!(body.data().await.unwrap().unwrap(), expected);
    }
}

#[tokio::test]
async fn the_worker_is_told_http2_and_the_authority_as_host() {
    let harness = Harness::new();
    let (client, _connection) = harness.connect_h2().await;
    let mut client = client.ready().await.unwrap();
    let _response = client.send_request(get("/v?x=1"), true).unwrap();
    let job = harness.queue.next_job(&harness.busy).recv().await;
    assert_eq!(job.request.version(), http::Version::HTTP_2);
    assert_eq!(job.request.uri(), "/v?x=1");
    assert_eq!(job.request.headers()["host"], "a");
    assert!(job.request.headers()["x-request-start"].to_str().unwrap().starts_with("t="));
}

#[tokio::test]
async fn a_stream_reset_while_queued_is_withdrawn_and_never_reaches_a_slot() {
    let harness = Harness::new();
    let (client, _connection) = harness.connect_h2().await;
    let mut client = client.ready().await.unwrap();
    let (_response, mut stream) = client.send_request(get("/gone"), false).unwrap();
    stream.send_data(Bytes::new(), true).unwrap();
    settle(|| harness.depth() == 1).await;
    stream.send_reset(Reason::CANCEL);
    settle(|| harness.depth() == 0).await;
    assert_eq!(harness.queue.snapshot(Reader::Json).withdrawn, 1);

    // The slot that frees up next gets the next stream, never the withdrawn one.
    let mut client = client.ready().await.unwrap();
    let (_next, _) = client.send_request(get("/next"), true).unwrap();
    assert_eq!(harness.answer_next().await, "/next");
}

#[tokio::test]
async fn a_rapid_reset_flood_is_told_to_calm_down_and_gets_no_more_than_the_stream_limit_into_a_slot() {
    let limit = 10;
    let harness = Harness::with(|settings| settings.http2.as_mut().unwrap().max_concurrent_streams = limit);
    let (mut client, connection) = harness.connect_h2().await;
    let started = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let slot = {
        let (queue, busy, started) = (harness.queue.clone(), harness.busy.clone(), started.clone());
        tokio::spawn(async move {
            loop {
                let job = queue.next_job(&busy).recv().await;
                started.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                drop(job); // the client is gone before any answer
                busy.down();
            }
        })
    };
    for n in 0..1000 {
        client = match client.ready().await {
            Ok(client) => client,
            Err(_) => break,
        };
        let Ok((_response, mut stream)) = client.send_request(get(&format!("/{n}")), false) else { break };
        stream.send_reset(Reason::CANCEL);
        tokio::task::yield_now().await;
    }
    let ended = connection.await.unwrap();
    slot.abort();
    let err = ended.expect_err("the front closed the connection");
    assert_eq!(err.reason(), Some(Reason::ENHANCE_YOUR_CALM), "{err}");
    assert!(started.load(std::sync::atomic::Ordering::Relaxed) <= limit as usize);
    assert_eq!(harness.front.stats.snapshot(&harness.queue, &[], Reader::Json).connections.http2_calmed, 1);
}

#[tokio::test]
async fn a_shutdown_sends_goaway_and_the_streams_in_flight_finish() {
    let harness = Harness::new();
    let (client, connection) = harness.connect_h2().await;
    let mut client = client.ready().await.unwrap();
    let (response, _) = client.send_request(get("/in-flight"), true).unwrap();
    settle(|| harness.depth() == 1).await;
    harness._shutdown.send_replace(true);
    // GOAWAY first: the client may open no new stream, and the one in flight still finishes.
    let refused = async {
        let mut ready = client.clone().ready().await?;
        let (late, _) = ready.send_request(get("/late"), true)?;
        late.await.map(drop)
    };
    let late = tokio::time::timeout(std::time::Duration::from_secs(10), refused).await;
    late.expect("answered in time").expect_err("a stream opened after GOAWAY is refused");
    assert_eq!(harness.answer_next().await, "/in-flight");
    let response = response.await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.into_body().data().await.unwrap().unwrap(), "/in-flight");
    connection.await.unwrap().expect("a clean close");
    assert_eq!(harness.depth(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_connection_without_streams_is_closed_at_the_header_then_the_keep_alive_timeout() {
    let harness = Harness::new();
    let started = tokio::time::Instant::now();
    let (_client, connection) = harness.connect_h2().await;
    connection.await.unwrap().expect("a graceful close");
    assert_eq!(started.elapsed(), Duration::from_secs(10), "no first stream within the header timeout");

    let (client, connection) = harness.connect_h2().await;
    let mut client = client.ready().await.unwrap();
    let (response, _) = client.send_request(get("/one"), true).unwrap();
    assert_eq!(harness.answer_next().await, "/one");
    response.await.unwrap();
    let answered = tokio::time::Instant::now();
    connection.await.unwrap().expect("a graceful close");
    assert_eq!(answered.elapsed(), Duration::from_secs(75), "idle for the keep-alive timeout");
}

#[tokio::test]
async fn a_ping_flood_is_told_to_calm_down() {
    let harness = Harness::new();
    let (mut client, server) = tokio::io::duplex(1 << 20);
    tokio::spawn(serve(harness.front.clone(), server, Peer::local(), Arrival::now(&harness.front.stats)));
    let mut wire = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    wire.extend_from_slice(&[0, 0, 0, 4, 0, 0, 0, 0, 0]); // SETTINGS, empty
    for _ in 0..200 {
        wire.extend_from_slice(&[0, 0, 8, 6, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8]);
        // PING
    }
    client.write_all(&wire).await.unwrap();
    let mut answer = Vec::new();
    client.read_to_end(&mut answer).await.unwrap();
    // The last frame is a GOAWAY (type 7) whose error code is ENHANCE_YOUR_CALM (11).
    let goaway = answer.windows(4).rposition(|window| window == [0, 0, 8, 7]).expect("a GOAWAY");
    assert_eq!(&answer[goaway + 13..goaway + 17], &11u32.to_be_bytes());
    let pongs = answer.windows(5).filter(|window| *window == [0, 0, 8, 6, 1]).count();
    assert!(pongs <= 101, "{pongs} PINGs answered");
}

#[tokio::test]
async fn only_the_preface_makes_a_plain_connection_http2() {
    for (sent, expected) in [
        (&b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0"[..], Some(true)),
        (b"GET / HTTP/1.1\r\n", Some(false)),
        (b"PRI * HTTP/1.1\r\n\r\n", Some(false)),
        (b"PRI", Some(false)), // then closed
        (b"", None),
    ] {
        let (mut client, server) = tokio::io::duplex(1024);
        client.write_all(sent).await.unwrap();
        drop(client);
        let mut server = ReadAhead::new(server, bytes::Bytes::new());
        let mut read = bytes::BytesMut::new();
        assert_eq!(opens_with_preface(&mut server, &mut read).await.unwrap(), expected, "{sent:?}");
        assert!(sent.starts_with(&read), "what was read is kept to be read again");
    }
}
