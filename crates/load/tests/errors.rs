//! Failures: each kind of broken answer is counted under its own kind, an unreachable target
//! fails the run with one line, and wrong options are usage errors (exit status 2).

mod common;

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use common::{args, config, serve, Reply};
use headway_load::{run, run_load, ErrorKind, UsageError};

async fn errors_for(reply: Reply, timeout: Duration) -> headway_load::Report {
    let server = serve(Arc::new(move |_: &common::Seen| reply.clone())).await;
    let mut c = config(server.url("/"));
    c.requests = Some(6);
    c.connections = 2;
    c.timeout = timeout;
    run_load(c).await.unwrap()
}

#[tokio::test]
async fn timeouts_are_counted() {
    let report = errors_for(Reply::Hang, Duration::from_millis(200)).await;
    assert_eq!(report.requests, 0);
    assert_eq!(report.errors, 6);
    assert_eq!(report.errors_by_kind[&ErrorKind::Timeout].count, 6);
    assert!(report.errors_by_kind[&ErrorKind::Timeout].example.contains("200ms"));
}

#[tokio::test]
async fn closed_without_answer_is_counted() {
    let report = errors_for(Reply::Close, Duration::from_secs(5)).await;
    assert_eq!(report.errors, 6);
    assert_eq!(report.errors_by_kind[&ErrorKind::ClosedEarly].count, 6);
}

#[tokio::test]
async fn malformed_answers_are_counted() {
    let report =
        errors_for(Reply::Raw(b"HTTP/1.1 200 OK\r\nContent-Length: nope\r\n\r\n".to_vec()), Duration::from_secs(5))
            .await;
    assert_eq!(report.errors, 6);
    assert_eq!(report.errors_by_kind[&ErrorKind::Malformed].count, 6);
    assert!(report.errors_by_kind[&ErrorKind::Malformed].example.contains("Content-Length"));
    let text = report.to_hey_text();
    assert!(text.contains("Error distribution:\n  [6]\tmalformed response: bad Content-Length\n"), "{text}");
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(json["errors_by_kind"]["malformed"]["count"], 6);
    assert_eq!(serde_json::from_value::<headway_load::Report>(json).unwrap(), report);
}

#[tokio::test]
async fn truncated_answers_are_counted() {
    // Half the promised body, then the server closes.
    let report =
        errors_for(Reply::Raw(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort".to_vec()), Duration::from_secs(5))
            .await;
    assert_eq!(report.requests, 0);
    assert_eq!(report.errors_by_kind[&ErrorKind::ClosedEarly].count, 6, "{:?}", report.errors_by_kind);
    assert!(report.errors_by_kind[&ErrorKind::ClosedEarly].example.contains("middle of the response"));
}

#[tokio::test]
async fn reset_connections_are_counted() {
    // Accepts, reads the request, then resets the connection (SO_LINGER 0).
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        use std::io::Read;
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let mut buf = [0u8; 1024];
            let _ = stream.read(&mut buf);
            let socket = socket2::SockRef::from(&stream);
            socket.set_linger(Some(Duration::ZERO)).unwrap();
            drop(stream);
        }
    });
    let mut c = config(format!("http://{addr}/"));
    c.requests = Some(4);
    c.connections = 1;
    let report = run_load(c).await.unwrap();
    assert_eq!(report.errors, 4);
    assert_eq!(report.errors_by_kind[&ErrorKind::Reset].count, 4, "{:?}", report.errors_by_kind);
}

#[tokio::test]
async fn unreachable_target_fails_with_one_line() {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let mut c = config(format!("http://127.0.0.1:{port}/"));
    c.duration = Some(Duration::from_secs(30));
    let started = std::time::Instant::now();
    let err = run_load(c).await.unwrap_err();
    assert_eq!(err.to_string(), format!("cannot connect to 127.0.0.1:{port}: connection refused"));
    assert!(err.downcast_ref::<UsageError>().is_none());
    // It gives up after each connection failed once, not at the end of the 30 s duration.
    assert!(started.elapsed() < Duration::from_secs(10));
}

#[tokio::test]
async fn missing_unix_socket_fails_with_one_line() {
    let mut c = config("http://app.test/".into());
    c.unix_socket = Some("/nonexistent/headway-load-test.sock".into());
    let err = run_load(c).await.unwrap_err().to_string();
    assert!(err.starts_with("cannot connect to unix:/nonexistent/headway-load-test.sock: "), "{err}");
    assert!(!err.contains('\n'));
}

#[test]
fn hey_flags_parse_into_the_config() {
    let parsed = args(&[
        "-n",
        "300",
        "-c",
        "7",
        "-z",
        "1m30s",
        "-q",
        "2",
        "-m",
        "PUT",
        "-H",
        "X-A: 1",
        "-H",
        "X-B:2",
        "-d",
        "body",
        "-T",
        "application/json",
        "-t",
        "3",
        "--host",
        "h.test",
        "--disable-keepalive",
        "-o",
        "json",
        "--cpus",
        "2",
        "http://127.0.0.1:1/x",
        "http://127.0.0.1:1/y",
        "--weights",
        "2,1",
    ])
    .unwrap();
    let c = parsed.to_config().unwrap();
    assert_eq!(c.requests, Some(300));
    assert_eq!(c.connections, 7);
    assert_eq!(c.duration, Some(Duration::from_secs(90)));
    assert_eq!(c.connection_rate, Some(2.0));
    assert_eq!(c.method, "PUT");
    assert_eq!(
        c.headers,
        vec![
            ("X-A".to_string(), "1".to_string()),
            ("X-B".to_string(), "2".to_string()),
            ("Content-Type".to_string(), "application/json".to_string())
        ]
    );
    assert_eq!(c.body, b"body");
    assert_eq!(c.timeout, Duration::from_secs(3));
    assert_eq!(c.host.as_deref(), Some("h.test"));
    assert!(!c.keep_alive);
    assert_eq!(c.threads, 2);
    assert_eq!(c.targets.iter().map(|t| t.weight).collect::<Vec<_>>(), vec![2, 1]);
    assert_eq!(parsed.output, headway_load::OutputFormat::Json);
}

#[test]
fn wrong_flags_are_rejected_by_the_parser() {
    assert!(args(&["--no-such-flag", "http://x/"]).is_err());
    assert!(args(&["-n", "many", "http://x/"]).is_err());
    assert!(args(&["-z", "10 parsecs", "http://x/"]).is_err());
    assert!(args(&["-o", "csv", "http://x/"]).is_err());
    assert!(args(&["--arrival", "poisson", "http://x/"]).is_err(), "--arrival needs --rate");
    assert!(args(&[]).is_err(), "a URL is required");
}

#[test]
fn wrong_values_exit_with_status_2() {
    for line in [
        &["-c", "0", "http://127.0.0.1:1/"][..],
        &["--pipeline", "4", "--disable-keepalive", "http://127.0.0.1:1/"],
        &["--rate", "10", "-q", "1", "http://127.0.0.1:1/"],
        &["-H", "no colon", "http://127.0.0.1:1/"],
        &["--weights", "1,2", "http://127.0.0.1:1/"],
        &["--cacert", "/nonexistent/ca.pem", "https://127.0.0.1:1/"],
        &["not a url"],
        &["-t", "0", "http://127.0.0.1:1/"],
    ] {
        let parsed = args(line).unwrap();
        assert_eq!(run(parsed).unwrap(), ExitCode::from(2), "{line:?}");
    }
}

#[test]
fn unreachable_target_exits_with_status_1() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let url = format!("http://127.0.0.1:{port}/");
    assert_eq!(run(args(&["-n", "3", &url]).unwrap()).unwrap(), ExitCode::from(1));
}
