//! The supervisor against a worker of a few lines of Python: crashes, reloads, recycles and a
//! stuck process.

use std::sync::atomic::Ordering;

use super::*;
use crate::queue::job::{Failure, Outcome, RequestBody};
use crate::workers::launch::{Launch, TakesWebSockets};
use crate::workers::replacement::RecyclePolicy;
use crate::workers::scaling::{ScaleUpWait, ScalingPolicy};
use crate::workers::slots_per_worker::SlotsPerWorker;
use crate::workers::worker::Phase;
use bytes::Bytes;

/// A worker in a few lines of Python: answers every request with its pid, exits when asked
/// to (`/exit`), as a crashing app would, and never answers `/hang`. It takes a while to
/// start once a file `slow` is next to it.
const WORKER: &str = r#"
import os, socket, threading, time
if os.path.exists(os.path.join(os.path.dirname(__file__), "slow")):
    time.sleep(1.5)
listener = socket.socket(socket.AF_UNIX)
listener.bind(os.environ["HEADWAY_SOCKET"])
listener.listen()

def serve(connection):
    data = b""
    while True:
        chunk = connection.recv(4096)
        if not chunk:
            break
        data += chunk
        while b"\r\n\r\n" in data:
            head, _, data = data.partition(b"\r\n\r\n")
            if b" /exit " in head:
                os._exit(3)
            if b" /hang " in head:
                time.sleep(3600)
            body = str(os.getpid()).encode()
            connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))

while True:
    threading.Thread(target=serve, args=(listener.accept()[0],), daemon=True).start()
"#;

async fn start() -> (Supervisor, Arc<Queue>, tempfile::TempDir) {
    start_with(RecyclePolicy::default()).await
}

async fn start_with(recycle: RecyclePolicy) -> (Supervisor, Arc<Queue>, tempfile::TempDir) {
    start_with_slots(recycle, 1, Duration::from_secs(30)).await
}

async fn start_with_slots(
    recycle: RecyclePolicy,
    threads: usize,
    request_timeout: Duration,
) -> (Supervisor, Arc<Queue>, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("worker.py");
    std::fs::write(&script, WORKER).unwrap();
    let config = SupervisorConfig {
        scaling: ScalingPolicy {
            start: 1,
            min: 1,
            max: 1,
            automatic: false,
            scale_up_wait: ScaleUpWait::Auto,
            idle_timeout: Duration::from_secs(30),
            max_memory: None,
        },
        slots: SlotsPerWorker::fixed(threads),
        launch: Launch::Command(format!("exec python3 {}", script.display())),
        boot_timeout: Duration::from_secs(30),
        request_timeout,
        max_head: 8192,
        recycle,
        preload: None,
        takes_websockets: TakesWebSockets::new(true),
        cpus: None,
    };
    let queue = Queue::new(10, Duration::from_secs(30), threads);
    let slots =
        Arc::new(SlotSettings { request_timeout, response_spool: crate::spool::SpoolLimits::unbounded(64 * 1024) });
    (Supervisor::start(config, queue.clone(), slots).await.expect("the worker starts"), queue, dir)
}

/// The pid that answered `path`, or the failure.
async fn request(queue: &Arc<Queue>, path: &str) -> Result<u32, Failure> {
    let request = http::Request::builder()
        .uri(path)
        .header(http::header::HOST, "test")
        .body(RequestBody::Memory(Bytes::new()))
        .unwrap();
    match queue.enqueue(request, None).outcome().await {
        Outcome::Response(response) => {
            let crate::queue::job::ResponseBody::Complete(body) = response.body else { panic!("a short body") };
            Ok(std::str::from_utf8(&body).unwrap().parse().unwrap())
        }
        Outcome::Failed(failure) => Err(failure),
        Outcome::Upgraded(_) => panic!("no WebSocket was asked for"),
    }
}

#[tokio::test]
async fn a_worker_that_dies_fails_its_request_and_is_restarted() {
    let (supervisor, queue, _dir) = start().await;
    let worker = supervisor.pool().workers()[0].clone();
    let first = request(&queue, "/").await.unwrap();
    assert_eq!(first, worker.pid());
    assert_eq!(request(&queue, "/exit").await, Err(Failure::WorkerFailed));
    // The request after the crash waits in the queue for the new process.
    let second = request(&queue, "/").await.unwrap();
    assert_ne!(second, first);
    assert_eq!(worker.restarts.load(Ordering::Relaxed), 1);
    supervisor.stop(Duration::from_secs(1)).await;
    assert_eq!(worker.phase(), Phase::Stopped);
}

#[tokio::test]
async fn a_reload_replaces_the_worker_with_no_failed_request() {
    let (supervisor, queue, _dir) = start().await;
    let before = request(&queue, "/").await.unwrap();
    let reloader = supervisor.reloader();
    let reload = tokio::spawn(async move { reloader.reload().await });
    // Requests made during the reload wait for the new process; none fails.
    let during = request(&queue, "/").await;
    reload.await.unwrap().expect("the reload completes");
    let after = request(&queue, "/").await.unwrap();
    assert!(during.is_ok(), "{during:?}");
    assert_ne!(after, before);
    assert_eq!(supervisor.pool().workers()[0].restarts.load(Ordering::Relaxed), 0, "a reload is not a restart");
    supervisor.stop(Duration::from_secs(1)).await;
}

#[tokio::test]
async fn a_worker_that_served_its_max_requests_is_recycled_with_no_failed_request() {
    let policy = RecyclePolicy { max_requests: 3, ..RecyclePolicy::default() };
    let (supervisor, queue, _dir) = start_with(policy).await;
    let mut pids: Vec<u32> = Vec::new();
    // Until a third process has answered (a process answers on while its replacement starts).
    while pids.chunk_by(|a, b| a == b).count() < 3 {
        assert!(pids.len() < 100_000, "no recycle");
        pids.push(request(&queue, "/").await.expect("no request fails"));
    }
    let worker = supervisor.pool().workers()[0].clone();
    let processes: Vec<&[u32]> = pids.chunk_by(|a, b| a == b).collect();
    // Each process served its three, and went on serving while its replacement started.
    assert!(processes.len() >= 2, "{pids:?}");
    assert!(processes[..processes.len() - 1].iter().all(|served| served.len() >= 3), "{pids:?}");
    let recycled = worker.recycles.snapshot().max_requests;
    assert!(recycled as usize >= processes.len() - 1, "{recycled} for {pids:?}");
    assert_eq!(worker.restarts.load(Ordering::Relaxed), 0, "a recycle is not a restart");
    supervisor.stop(Duration::from_secs(1)).await;
}

#[tokio::test]
async fn a_reload_of_the_only_worker_serves_from_the_old_process_until_the_new_one_listens() {
    let (supervisor, queue, dir) = start().await;
    let old = request(&queue, "/").await.unwrap();
    std::fs::write(dir.path().join("slow"), "").unwrap(); // the next process boots for 1.5 s
    let reloader = supervisor.reloader();
    let reload = tokio::spawn(async move { reloader.reload().await });
    let mut answered = Vec::new();
    while !reload.is_finished() {
        answered.push(request(&queue, "/").await.expect("no request fails during a reload"));
    }
    reload.await.unwrap().expect("the reload completes");
    let new = request(&queue, "/").await.unwrap();
    assert_ne!(new, old);
    // In order: the old process answered while the new one booted, then the new one.
    let by_process: Vec<u32> = answered.chunk_by(|a, b| a == b).map(|run| run[0]).collect();
    assert!(by_process == [old] || by_process == [old, new], "{by_process:?}");
    assert!(answered.iter().filter(|&&pid| pid == old).count() >= 3, "the old process served during the boot");
    supervisor.stop(Duration::from_secs(1)).await;
}

#[tokio::test]
async fn a_stuck_worker_is_replaced_once_however_many_of_its_requests_time_out() {
    let (supervisor, queue, _dir) = start_with_slots(RecyclePolicy::default(), 2, Duration::from_millis(500)).await;
    let worker = supervisor.pool().workers()[0].clone();
    let stuck = worker.pid();
    let (first, second) = tokio::join!(request(&queue, "/hang"), request(&queue, "/hang"));
    assert_eq!((first, second), (Err(Failure::WorkerTimeout), Err(Failure::WorkerTimeout)));
    let fresh = request(&queue, "/").await.unwrap();
    assert_ne!(fresh, stuck);
    // Long enough for a stale report to have killed it, as it once did.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(request(&queue, "/").await.unwrap(), fresh, "the fresh process still serves");
    assert_eq!(worker.recycles.snapshot().timeout, 1);
    assert_eq!(worker.restarts.load(Ordering::Relaxed), 1);
    supervisor.stop(Duration::from_secs(1)).await;
}
