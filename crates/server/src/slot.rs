//! A slot: one keep-alive HTTP/1.1 connection from the front to a worker's unix socket,
//! carrying one request at a time.
//!
//! A worker with T slots has exactly T such connections, so it never holds more than T
//! requests and never queues one internally: every wait happens in the front's queue. A slot
//! takes the oldest request from the queue, sends it, reads the response, passes the head to
//! the client's connection and pumps the body into a spool, and only then takes the next
//! request. The slot talks to a trusted local process, so it uses hyper's client rather than
//! the front's strict parser.

use std::future::poll_fn;
use std::io;
use std::path::Path;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http_body_util::BodyExt;
use hyper::body::{Body, Incoming};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use tokio::net::UnixStream;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tracing::{debug, warn};

use crate::job::{Failure, Job, Outcome, RequestBody, ResponseBody, Timing, WorkerResponse};
use crate::queue::Queue;
use crate::spool;
use crate::worker::{Phase, Worker};

/// Pause before reconnecting when a worker that says it is ready refuses a connection; and the
/// longest a slot whose request broke waits for the supervisor's verdict on the process.
const RECONNECT_DELAY: Duration = Duration::from_millis(50);

/// What every slot needs to know.
#[derive(Debug, Clone)]
pub struct SlotSettings {
    /// How long a worker may be silent (before the head, or between body pieces) before the
    /// request fails with 504 and the worker is replaced.
    pub request_timeout: Duration,
    /// Response bytes held in memory per response before spilling to disk.
    pub response_buffer: usize,
}

pub struct Slot {
    pub worker: Arc<Worker>,
    pub queue: Arc<Queue>,
    pub settings: Arc<SlotSettings>,
}

impl Slot {
    /// Serves requests for as long as the worker exists, reconnecting whenever the worker
    /// is restarted or closes the connection.
    pub async fn run(self) {
        let mut phase = self.worker.watch_phase();
        while let Some(generation) = ready_generation(&mut phase).await {
            match Connection::open(&self.worker.socket).await {
                Ok(mut connection) => {
                    if self.serve(&mut connection, generation, &mut phase).await == Ended::Broken {
                        // A request broke: the process is most likely dying. Its socket still
                        // accepts connections into the backlog for a moment after its own
                        // connections reset, and a request sent there would fail too, so wait
                        // until the supervisor has seen it exit (or, if it lives, a moment).
                        let _ = tokio::time::timeout(RECONNECT_DELAY, leaves_generation(&mut phase, generation)).await;
                    }
                }
                Err(err) => {
                    debug!(worker = self.worker.index, "cannot connect to worker: {err}");
                    tokio::time::sleep(RECONNECT_DELAY).await;
                }
            }
        }
    }

    /// Runs jobs on `connection` until it closes, a request on it fails, or the worker leaves
    /// generation `generation`.
    async fn serve(&self, connection: &mut Connection, generation: u64, phase: &mut watch::Receiver<Phase>) -> Ended {
        let busy = &self.worker.busy;
        loop {
            let mut next = self.queue.next_job(busy);
            let job = tokio::select! {
                job = next.recv() => Some(job),
                () = connection.closed() => None,
                () = leaves_generation(phase, generation) => None,
            };
            let Some(job) = job else {
                next.cancel(busy);
                return Ended::Closed;
            };
            let started = Instant::now();
            let reusable = self.forward(connection, job).await;
            busy.down();
            let took = started.elapsed();
            self.worker.busy_micros.fetch_add(took.as_micros() as u64, Ordering::Relaxed);
            self.queue.record_service(took);
            if !reusable {
                return Ended::Broken;
            }
            if *phase.borrow() != (Phase::Ready { generation }) {
                return Ended::Closed;
            }
        }
    }

    /// Runs one job. Returns whether the connection can carry another request.
    async fn forward(&self, connection: &mut Connection, job: Job) -> bool {
        let Job { request, reply, complete_at, .. } = job;
        if reply.is_closed() {
            return true; // the client left between dispatch and now: nothing to run
        }
        let started = Instant::now();
        let timeout = self.settings.request_timeout;
        let response = match tokio::time::timeout(timeout, connection.send(&self.worker.socket, request)).await {
            Ok(Ok(response)) => response,
            Ok(Err(err)) => {
                warn!(worker = self.worker.index, "request failed: {err}");
                let _ = reply.send(Outcome::Failed(Failure::WorkerFailed));
                return false;
            }
            Err(_) => {
                warn!(worker = self.worker.index, "no response within {timeout:?}; replacing the worker");
                let _ = reply.send(Outcome::Failed(Failure::WorkerTimeout));
                self.worker.report_hung();
                return false;
            }
        };
        self.worker.served.fetch_add(1, Ordering::Relaxed);
        let timing = Timing {
            queued: started.saturating_duration_since(complete_at),
            service: started.elapsed(),
            worker: self.worker.index,
        };
        let (head, mut body) = response.into_parts();

        let (pieces, ended) = drain_ready(&mut body).await;
        match ended {
            Some(Ok(())) => {
                let body = ResponseBody::Complete(concat(pieces));
                let _ = reply.send(Outcome::Response(WorkerResponse { head, body, timing }));
                return true;
            }
            Some(Err(err)) => {
                warn!(worker = self.worker.index, "response body failed: {err}");
                let _ = reply.send(Outcome::Failed(Failure::WorkerFailed));
                return false;
            }
            None => {}
        }

        // The body is still coming: hand the client a spool and keep pumping into it.
        let (writer, reader) = spool::channel(self.settings.response_buffer);
        for piece in pieces {
            if let Err(err) = writer.write(piece) {
                warn!("cannot buffer response: {err}");
                return false;
            }
        }
        let streaming = ResponseBody::Streaming(reader);
        let _ = reply.send(Outcome::Response(WorkerResponse { head, body: streaming, timing }));
        loop {
            match tokio::time::timeout(timeout, body.frame()).await {
                Ok(Some(Ok(frame))) => {
                    if let Ok(data) = frame.into_data() {
                        if let Err(err) = writer.write(data) {
                            warn!("cannot buffer response: {err}");
                            return false;
                        }
                    }
                }
                Ok(None) => {
                    writer.finish();
                    return true;
                }
                Ok(Some(Err(err))) => {
                    warn!(worker = self.worker.index, "response body failed: {err}");
                    return false;
                }
                Err(_) => {
                    warn!(worker = self.worker.index, "response body stalled for {timeout:?}; replacing the worker");
                    self.worker.report_hung();
                    return false;
                }
            }
        }
    }
}

/// How a slot's connection ended.
#[derive(Debug, PartialEq, Eq)]
enum Ended {
    /// Closed while idle, or the worker is being replaced: reconnect when it is ready.
    Closed,
    /// A request failed on it (the worker died, hung, or broke the connection).
    Broken,
}

/// Waits until the worker is ready and returns its generation; `None` once it is stopped.
async fn ready_generation(phase: &mut watch::Receiver<Phase>) -> Option<u64> {
    loop {
        match *phase.borrow_and_update() {
            Phase::Ready { generation } => return Some(generation),
            Phase::Stopped => return None,
            Phase::Starting | Phase::Draining => {}
        }
        phase.changed().await.ok()?;
    }
}

/// Resolves once the worker is no longer in `generation`'s ready phase.
async fn leaves_generation(phase: &mut watch::Receiver<Phase>, generation: u64) {
    let _ = phase.wait_for(|now| *now != Phase::Ready { generation }).await;
}

/// Takes every body frame that is already available. Returns them, and how the body ended
/// if it did: most responses of a web app arrive whole in one read, and then the client
/// can get a `Content-Length` and a single write.
async fn drain_ready(body: &mut Incoming) -> (Vec<Bytes>, Option<Result<(), hyper::Error>>) {
    let mut pieces = Vec::new();
    let ended = poll_fn(|cx| loop {
        match Pin::new(&mut *body).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Ok(data) = frame.into_data() {
                    pieces.push(data);
                }
            }
            Poll::Ready(Some(Err(err))) => return Poll::Ready(Some(Err(err))),
            Poll::Ready(None) => return Poll::Ready(Some(Ok(()))),
            Poll::Pending => return Poll::Ready(None),
        }
    })
    .await;
    (pieces, ended)
}

fn concat(mut pieces: Vec<Bytes>) -> Bytes {
    match pieces.len() {
        0 => Bytes::new(),
        1 => pieces.pop().expect("one piece"),
        _ => {
            let mut whole = BytesMut::with_capacity(pieces.iter().map(Bytes::len).sum());
            pieces.iter().for_each(|piece| whole.extend_from_slice(piece));
            whole.freeze()
        }
    }
}

/// One HTTP/1.1 connection to a worker, driven by hyper.
struct Connection {
    sender: SendRequest<RequestBody>,
    /// The task that drives the connection; it ends when the connection closes.
    driver: Option<JoinHandle<()>>,
}

impl Connection {
    async fn open(socket: &Path) -> io::Result<Self> {
        let stream = UnixStream::connect(socket).await?;
        let (sender, connection) = hyper::client::conn::http1::Builder::new()
            .handshake(TokioIo::new(stream))
            .await
            .map_err(io::Error::other)?;
        let driver = tokio::spawn(async move {
            if let Err(err) = connection.await {
                debug!("worker connection ended: {err}");
            }
        });
        Ok(Connection { sender, driver: Some(driver) })
    }

    /// Resolves when the worker closes the connection.
    async fn closed(&mut self) {
        match self.driver.as_mut() {
            Some(driver) => {
                let _ = driver.await;
                self.driver = None;
            }
            None => std::future::pending().await,
        }
    }

    /// Sends a request and waits for the response head. Workers close idle keep-alive
    /// connections (Puma after 20 s, Node after 5 s); when hyper reports that a request was
    /// not sent because of that, it is sent again once on a new connection. Nothing reached
    /// the app, so this is safe for any method.
    async fn send(
        &mut self,
        socket: &Path,
        mut request: http::Request<RequestBody>,
    ) -> Result<http::Response<Incoming>, SendError> {
        let mut reconnected = false;
        loop {
            let sent = match self.sender.ready().await {
                Ok(()) => self.sender.try_send_request(request).await,
                Err(err) if reconnected => return Err(SendError::Http(err)),
                Err(_) => {
                    *self = Connection::open(socket).await.map_err(SendError::Reconnect)?;
                    reconnected = true;
                    continue;
                }
            };
            match sent {
                Ok(response) => return Ok(response),
                Err(mut err) => match err.take_message() {
                    Some(unsent) if !reconnected => {
                        request = unsent;
                        *self = Connection::open(socket).await.map_err(SendError::Reconnect)?;
                        reconnected = true;
                    }
                    _ => return Err(SendError::Http(err.into_error())),
                },
            }
        }
    }
}

#[derive(Debug, thiserror::Error)]
enum SendError {
    #[error("{0}")]
    Http(hyper::Error),
    #[error("worker closed the connection and refused a new one: {0}")]
    Reconnect(io::Error),
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::RequestBody;
    use crate::queue::Wait;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::UnixListener;

    /// A worker process stood in for by a task: `answer` decides what each connection gets.
    struct FakeWorker {
        worker: Arc<Worker>,
        queue: Arc<Queue>,
        _dir: tempfile::TempDir,
    }

    impl FakeWorker {
        /// Listens on a fresh socket, serves each connection with `serve`, and runs one slot.
        fn start<F, Fut>(request_timeout: Duration, serve: F) -> FakeWorker
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
            let worker = Arc::new(Worker::new(1, socket));
            worker.set_phase(Phase::Ready { generation: 1 });
            let queue = Arc::new(Queue::new(10, Duration::from_secs(30), 1));
            let settings = Arc::new(SlotSettings { request_timeout, response_buffer: 64 * 1024 });
            tokio::spawn(Slot { worker: worker.clone(), queue: queue.clone(), settings }.run());
            FakeWorker { worker, queue, _dir: dir }
        }

        fn request(&self, path: &str) -> Wait {
            let request = http::Request::builder()
                .uri(path)
                .header(http::header::HOST, "test")
                .body(RequestBody::Memory(Bytes::new()))
                .unwrap();
            self.queue.enqueue(request)
        }
    }

    /// Reads one request head from a worker connection; false if the connection ended first.
    async fn read_head(stream: &mut UnixStream) -> bool {
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            if !matches!(stream.read(&mut byte).await, Ok(1)) {
                return false;
            }
            head.push(byte[0]);
        }
        true
    }

    #[tokio::test]
    async fn responses_come_back_and_the_slot_takes_the_next_request() {
        let fake = FakeWorker::start(Duration::from_secs(30), |mut stream| async move {
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
        let fake = FakeWorker::start(Duration::from_secs(30), move |mut stream| {
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
        let fake = FakeWorker::start(Duration::from_millis(200), |mut stream| async move {
            read_head(&mut stream).await;
            std::future::pending::<()>().await; // stuck
        });
        let hung = fake.worker.clone();
        let reported = tokio::spawn(async move { hung.hung().await });
        assert!(matches!(fake.request("/stuck").outcome().await, Outcome::Failed(Failure::WorkerTimeout)));
        reported.await.unwrap();
    }
}
