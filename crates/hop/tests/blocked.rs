//! A worker's threads are there for apps that block: a request staged while one thread is stuck
//! in the app is taken by another thread, and a stop lets every thread go.

use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use headway_hop::message::{decode_request_head, END, REQUEST_HEAD};
use headway_hop::worker::WorkerEnd;

mod common;
use common::{get_head, inline, setup, stage_get};

/// Bounds each wait of the test, so that a lost request fails it rather than hanging it.
const PATIENCE: Duration = Duration::from_secs(10);

/// The worker's threads, each serving as an app would: each tells `claims` which thread took
/// the request for which target, and a request for which `blocks` says so holds its thread until
/// the test sends on `unblock`.
struct Threads {
    claims: mpsc::Receiver<(usize, Vec<u8>)>,
    unblock: mpsc::Sender<()>,
    handles: Vec<std::thread::JoinHandle<()>>,
}

impl Threads {
    fn start(worker: &Arc<WorkerEnd>, count: usize, blocks: fn(&[u8]) -> bool) -> Threads {
        let (claimed, claims) = mpsc::channel();
        let (unblock, blocked) = mpsc::channel::<()>();
        let blocked = Arc::new(std::sync::Mutex::new(blocked));
        let handles = (0..count)
            .map(|number| {
                let (worker, claimed, blocked) = (worker.clone(), claimed.clone(), blocked.clone());
                std::thread::spawn(move || {
                    let mut record = Vec::new();
                    while let Some(index) = worker.claim_waiting(|wait| wait()).unwrap() {
                        let slot = worker.slot(index);
                        assert_eq!(slot.pop(&mut record).unwrap(), Some(REQUEST_HEAD), "taken with its head");
                        let target = decode_request_head(&record).unwrap().target.to_vec();
                        claimed.send((number, target.clone())).unwrap();
                        if blocks(&target) {
                            blocked.lock().unwrap().recv_timeout(PATIENCE).unwrap();
                        }
                        assert!(slot.push(END, &[]).unwrap());
                        slot.release();
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
    let (front, mut stage, worker) = setup(3, 0);
    let worker = Arc::new(worker);
    // The app blocks on `/block` until the test lets it go.
    let threads = Threads::start(&worker, 3, |target| target == b"/block");

    stage_get(&front, &mut stage, "/block");
    let (blocked_thread, _) = threads.claims.recv_timeout(PATIENCE).expect("the first request is taken");
    stage_get(&front, &mut stage, "/second");
    let (other_thread, target) = threads.claims.recv_timeout(PATIENCE).expect("the second request is not held up");
    assert_eq!(target, b"/second");
    assert_ne!(other_thread, blocked_thread, "taken while the first thread is still blocked");

    threads.unblock.send(()).unwrap();
    stage_get(&front, &mut stage, "/third");
    assert_eq!(threads.claims.recv_timeout(PATIENCE).expect("served after the block").1, b"/third");
    threads.stop(&worker);
}

/// The front wakes one sleeping thread for the requests it stages at once (see
/// `Header::waking`), and each woken thread passes the wake-up on: a burst of requests that all
/// block in the app still gets a thread each.
#[test]
fn a_burst_into_sleeping_threads_wakes_one_thread_per_request() {
    const THREADS: usize = 4;
    let (front, mut stage, worker) = setup(THREADS as u32, 0);
    let worker = Arc::new(worker);
    // Every request blocks in the app until the test has seen them all taken.
    let threads = Threads::start(&worker, THREADS, |_| true);
    // Let the threads fall asleep, so that the burst has to wake them.
    std::thread::sleep(Duration::from_millis(100));

    // Staged together and woken for once, as the server's queue does.
    for n in 0..THREADS {
        stage.put(inline(&get_head(&format!("/{n}")))).unwrap();
    }
    front.wake_for_stage();
    // A wake-up lost on the way would be made good only by the sleepers' one-second naps, which
    // end 900 ms from here: well before that, every request must be taken.
    let deadline = Instant::now() + Duration::from_millis(500);
    let mut serving: Vec<usize> = (0..THREADS)
        .map(|_| {
            let left = deadline.saturating_duration_since(Instant::now());
            let (thread, _) = threads
                .claims
                .recv_timeout(left)
                .expect("every request of the burst is taken without waiting for a nap");
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
