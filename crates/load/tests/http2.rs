//! `--http2`: N connections x M streams against a small HTTP/2 server the test runs, which
//! counts what it sees.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::net::TcpListener;

/// What the server saw.
#[derive(Default)]
struct Seen {
    connections: AtomicUsize,
    requests: AtomicUsize,
    /// Streams in the handler at once on one connection, at most.
    most_at_once: AtomicUsize,
}

/// An h2c server answering each request with "ok" after `delay`.
async fn server(delay: Duration) -> (String, Arc<Seen>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/path?q=1", listener.local_addr().unwrap());
    let seen = Arc::new(Seen::default());
    let counts = seen.clone();
    tokio::spawn(async move {
        loop {
            let (socket, _) = listener.accept().await.unwrap();
            let seen = counts.clone();
            tokio::spawn(async move {
                let mut connection = h2::server::handshake(socket).await.unwrap();
                seen.connections.fetch_add(1, Ordering::Relaxed);
                let at_once = Arc::new(AtomicUsize::new(0));
                while let Some(Ok((request, mut respond))) = connection.accept().await {
                    assert_eq!(request.uri().path_and_query().unwrap(), "/path?q=1");
                    assert_eq!(request.version(), http::Version::HTTP_2);
                    let (seen, at_once) = (seen.clone(), at_once.clone());
                    tokio::spawn(async move {
                        let now = at_once.fetch_add(1, Ordering::Relaxed) + 1;
                        seen.most_at_once.fetch_max(now, Ordering::Relaxed);
                        seen.requests.fetch_add(1, Ordering::Relaxed);
                        tokio::time::sleep(delay).await;
                        at_once.fetch_sub(1, Ordering::Relaxed);
                        let response = http::Response::builder().header("x-tally", "a").body(()).unwrap();
                        let mut body = respond.send_response(response, false).unwrap();
                        body.send_data(Bytes::from_static(b"ok"), true).unwrap();
                    });
                }
            });
        }
    });
    (url, seen)
}

#[tokio::test]
async fn connections_carry_their_streams_at_once_and_every_answer_is_counted() {
    let (url, seen) = server(Duration::from_millis(20)).await;
    let args = common::args(&["--http2", "-c", "2", "--streams", "4", "-n", "80", "--tally-header", "x-tally", &url]);
    let config = args.unwrap().to_config().unwrap();
    let report = headway_load::run_load(config).await.unwrap();
    assert_eq!((report.requests, report.errors), (80, 0));
    assert_eq!(report.status_codes.get(&200), Some(&80));
    assert_eq!(report.bytes, 160);
    assert_eq!(report.tally.get("a"), Some(&80));
    assert_eq!(report.connections_opened, 2);
    assert_eq!(report.settings.http2_streams, Some(4));
    assert_eq!(seen.connections.load(Ordering::Relaxed), 2);
    assert_eq!(seen.requests.load(Ordering::Relaxed), 80);
    assert_eq!(seen.most_at_once.load(Ordering::Relaxed), 4, "each connection carries 4 streams at once");
}

#[tokio::test]
async fn the_open_loop_times_from_the_intended_send() {
    // 20 requests a second for half a second, each answered after 300 ms, on one stream: the
    // later ones wait for the stream, and their latency counts that wait.
    let (url, _) = server(Duration::from_millis(300)).await;
    let args = common::args(&["--http2", "-c", "1", "--streams", "1", "--rate", "20", "-n", "4", &url]);
    let report = headway_load::run_load(args.unwrap().to_config().unwrap()).await.unwrap();
    assert_eq!(report.requests, 4);
    let slowest = report.latency.percentile(100.0).unwrap();
    assert!(slowest >= 1.0, "the fourth waits for three answers before it: {slowest} s");
}

#[test]
fn streams_need_http2_and_http2_refuses_what_it_cannot_do() {
    assert!(common::args(&["--streams", "4", "http://a/"]).is_err());
    let refused = |line: &[&str]| {
        let config = common::args(line).unwrap().to_config().unwrap();
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let err = runtime.block_on(headway_load::run_load(config)).unwrap_err();
        assert!(err.downcast_ref::<headway_load::UsageError>().is_some(), "{err}");
    };
    refused(&["--http2", "--pipeline", "2", "http://127.0.0.1:9/"]);
    refused(&["--http2", "--disable-keepalive", "http://127.0.0.1:9/"]);
    refused(&["--http2", "--streams", "0", "http://127.0.0.1:9/"]);
}
