//! Slots against fake workers: tasks on a unix socket, or threads on the worker's end of a hop,
//! standing in for worker processes.

use super::*;
use crate::queue::job::RequestBody;
use crate::queue::Wait;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{UnixListener, UnixStream};

mod hop;
mod upgrade;

/// A worker and one slot serving it from a queue of its own.
struct FakeWorker {
    worker: Arc<Worker>,
    queue: Arc<Queue>,
    _dir: tempfile::TempDir,
}

impl FakeWorker {
    /// Runs one slot of a worker reached through `transport` (the fake process already runs).
    fn slot(
        socket: std::path::PathBuf,
        transport: Transport,
        request_timeout: Duration,
        dir: tempfile::TempDir,
    ) -> FakeWorker {
        let worker = Arc::new(Worker::new(1, socket, transport));
        worker.set_phase(Phase::Ready { generation: 1 });
        let queue = Queue::new(10, Duration::from_secs(30), 1);
        let settings =
            Arc::new(SlotSettings { request_timeout, response_spool: crate::spool::SpoolLimits::unbounded(64 * 1024) });
        tokio::spawn(Slot::new(worker.clone(), 0, queue.clone(), settings).run());
        FakeWorker { worker, queue, _dir: dir }
    }

    fn request(&self, path: &str) -> Wait {
        self.request_with_body(path, Bytes::new())
    }

    fn request_with_body(&self, path: &str, body: Bytes) -> Wait {
        let request = http::Request::builder()
            .method(if body.is_empty() { "GET" } else { "POST" })
            .uri(path)
            .header(http::header::HOST, "test")
            .body(RequestBody::Memory(body))
            .unwrap();
        self.queue.enqueue(request, None)
    }
}

impl FakeWorker {
    /// An HTTP worker: listens on a fresh socket and serves each connection with `serve`.
    fn http<F, Fut>(request_timeout: Duration, serve: F) -> FakeWorker
    where
        F: Fn(UnixStream) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = ()> + Send + 'static,
    {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("worker.sock");
        let listener = UnixListener::bind(&socket).unwrap();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(serve(stream));
            }
        });
        FakeWorker::slot(socket, Transport::Http, request_timeout, dir)
    }
}

/// Reads one request head from a worker connection; false if the connection ended first.
async fn read_head(stream: &mut UnixStream) -> bool {
    head_text(stream).await.is_some()
}

/// One request head from a worker connection, lower-cased; `None` if the connection ended first.
async fn head_text(stream: &mut UnixStream) -> Option<String> {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if !matches!(stream.read(&mut byte).await, Ok(1)) {
            return None;
        }
        head.push(byte[0]);
    }
    Some(String::from_utf8_lossy(&head).to_ascii_lowercase())
}

#[tokio::test]
async fn responses_come_back_and_the_slot_takes_the_next_request() {
    let fake = FakeWorker::http(Duration::from_secs(30), |mut stream| async move {
        while read_head(&mut stream).await {
            let _ = stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok").await;
        }
    });
    for path in ["/a", "/b"] {
        let Outcome::Response(response) = fake.request(path).outcome().await else { panic!("no response") };
        assert_eq!(response.head.status, http::StatusCode::OK);
        assert!(matches!(response.body, ResponseBody::Complete(body) if body == "ok"));
    }
    assert_eq!(fake.worker.served.load(Ordering::Relaxed), 2);
    fake.worker.busy.zero().await;
}

#[tokio::test]
async fn a_worker_that_vanishes_mid_request_fails_only_that_request_with_502() {
    let died = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let fake = FakeWorker::http(Duration::from_secs(30), move |mut stream| {
        let died = died.clone();
        async move {
            while read_head(&mut stream).await {
                if !died.swap(true, Ordering::Relaxed) {
                    return; // the process dies without answering
                }
                let _ = stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok").await;
            }
        }
    });
    assert!(matches!(fake.request("/dies").outcome().await, Outcome::Failed(Failure::WorkerFailed)));
    // The slot connects again (to the restarted worker) and serves what comes next.
    let Outcome::Response(response) = fake.request("/next").outcome().await else { panic!("no response") };
    assert_eq!(response.head.status, http::StatusCode::OK);
    fake.worker.busy.zero().await;
}

#[tokio::test]
async fn a_worker_silent_past_the_request_timeout_gets_504_and_is_reported_hung() {
    let fake = FakeWorker::http(Duration::from_millis(200), |mut stream| async move {
        read_head(&mut stream).await;
        std::future::pending::<()>().await; // stuck
    });
    let hung = fake.worker.clone();
    let reported = tokio::spawn(async move { hung.hung(1).await });
    assert!(matches!(fake.request("/stuck").outcome().await, Outcome::Failed(Failure::WorkerTimeout)));
    reported.await.unwrap();
}
