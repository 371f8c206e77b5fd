//! A worker's threads are there for apps that block: a request published while one thread is
//! stuck in the app is taken by another thread, and a stop lets every thread go.

use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use headway_hop::front::FrontEnd;
use headway_hop::worker::WorkerEnd;
use headway_hop::Layout;

mod common;
use common::publish;

/// Bounds each wait of the test, so that a lost request fails it rather than hanging it.
const PATIENCE: Duration = Duration::from_secs(10);

/// The worker's threads, each serving as an app would: each tells `claims` which thread took
/// which slot, and a request for which `blocks` says so holds its thread until the test sends on
/// `unblock`.
struct Threads {
    claims: mpsc::Receiver<(usize, usize)>,
    unblock: mpsc::Sender<()>,
    handles: Vec<std::thread::JoinHandle<()>>,
}

impl Threads {
    fn start(worker: &Arc<WorkerEnd>, count: usize, blocks: fn(usize) -> bool) -> Threads {
        let (claimed, claims) = mpsc::channel();
        let (unblock, blocked) = mpsc::channel::<()>();
        let blocked = Arc::new(std::sync::Mutex::new(blocked));
        let handles = (0..count)
            .map(|number| {
                let (worker, claimed, blocked) = (worker.clone(), claimed.clone(), blocked.clone());
                std::thread::spawn(move || {
                    while let Some(index) = worker.claim_waiting(|wait| wait()) {
                        claimed.send((number, index)).unwrap();
                        if blocks(index) {
                            blocked.lock().unwrap().recv_timeout(PATIENCE).unwrap();
                        }
                        let mut record = Vec::new();
                        worker.slot(index).pop(&mut record).unwrap();
                        worker.slot(index).release();
                    }
                })
            })
            .collect();
        Threads { claims, unblock, handles }
    }

    /// Stops the worker and waits for every thread.
    fn stop(self, worker: &WorkerEnd) {
        worker.stop();
        for handle in self.handles {
            handle.join().unwrap();
        }
    }
}

#[test]
fn a_request_behind_a_blocked_thread_is_taken_by_another() {
    let front = FrontEnd::new(Layout::new(3, 4096)).unwrap();
    let worker = Arc::new(WorkerEnd::beside(&front).unwrap());
    // The app blocks on the first request until the test lets it go.
    let threads = Threads::start(&worker, 3, |index| index == 0);

    publish(&front, 0);
    let (blocked_thread, _) = threads.claims.recv_timeout(PATIENCE).expect("the first request is claimed");
    publish(&front, 1);
    let (other_thread, index) = threads.claims.recv_timeout(PATIENCE).expect("the second request is not held up");
    assert_eq!(index, 1);
    assert_ne!(other_thread, blocked_thread, "taken while the first thread is still blocked");

    threads.unblock.send(()).unwrap();
    publish(&front, 2);
    assert_eq!(threads.claims.recv_timeout(PATIENCE).expect("served after the block").1, 2);
    threads.stop(&worker);
}

/// The front wakes one sleeping thread at a time (see `Header::waking`), and each woken thread
/// passes the wake-up on: a burst of requests that all block in the app still gets a thread each.
#[test]
fn a_burst_into_sleeping_threads_wakes_one_thread_per_request() {
    const THREADS: usize = 4;
    let front = FrontEnd::new(Layout::new(THREADS as u32, 4096)).unwrap();
    let worker = Arc::new(WorkerEnd::beside(&front).unwrap());
    // Every request blocks in the app until the test has seen them all claimed.
    let threads = Threads::start(&worker, THREADS, |_| true);
    // Let the threads fall asleep, so that the burst has to wake them.
    std::thread::sleep(Duration::from_millis(100));

    for index in 0..THREADS {
        publish(&front, index);
    }
    // A wake-up lost on the way would be made good only by the sleepers' one-second naps, which
    // end 900 ms from here: well before that, every request must be claimed.
    let deadline = Instant::now() + Duration::from_millis(500);
    let mut serving: Vec<usize> = (0..THREADS)
        .map(|_| {
            let left = deadline.saturating_duration_since(Instant::now());
            let (thread, _) = threads
                .claims
                .recv_timeout(left)
                .expect("every request of the burst is claimed without waiting for a nap");
            thread
        })
        .collect();
    serving.sort();
    assert_eq!(serving, (0..THREADS).collect::<Vec<_>>(), "each request on a thread of its own");

    for _ in 0..THREADS {
        threads.unblock.send(()).unwrap();
    }
    threads.stop(&worker);
}
