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

#[test]
fn a_request_behind_a_blocked_thread_is_taken_by_another() {
    let front = FrontEnd::new(Layout::new(3, 4096)).unwrap();
    let worker = Arc::new(WorkerEnd::beside(&front).unwrap());
    let (claimed, claims) = mpsc::channel();
    let (unblock, blocked) = mpsc::channel::<()>();
    let blocked = Arc::new(std::sync::Mutex::new(blocked));
    let threads: Vec<_> = (0..3)
        .map(|number| {
            let (worker, claimed, blocked) = (worker.clone(), claimed.clone(), blocked.clone());
            std::thread::spawn(move || {
                while let Some(index) = worker.claim_waiting(|wait| wait()) {
                    claimed.send((number, index)).unwrap();
                    if index == 0 {
                        // The app blocks on this request until the test lets it go.
                        blocked.lock().unwrap().recv_timeout(PATIENCE).unwrap();
                    }
                    let mut record = Vec::new();
                    worker.slot(index).pop(&mut record).unwrap();
                    worker.slot(index).release();
                }
            })
        })
        .collect();

    publish(&front, 0);
    let (blocked_thread, _) = claims.recv_timeout(PATIENCE).expect("the first request is claimed");
    publish(&front, 1);
    let (other_thread, index) = claims.recv_timeout(PATIENCE).expect("the second request is not held up");
    assert_eq!(index, 1);
    assert_ne!(other_thread, blocked_thread, "taken while the first thread is still blocked");

    unblock.send(()).unwrap();
    publish(&front, 2);
    assert_eq!(claims.recv_timeout(PATIENCE).expect("served after the block").1, 2);
    worker.stop();
    for thread in threads {
        thread.join().unwrap();
    }
}

/// The front wakes one sleeping thread at a time (see `Header::waking`), and each woken thread
/// passes the wake-up on: a burst of requests that all block in the app still gets a thread each.
#[test]
fn a_burst_into_sleeping_threads_wakes_one_thread_per_request() {
    const THREADS: usize = 4;
    let front = FrontEnd::new(Layout::new(THREADS as u32, 4096)).unwrap();
    let worker = Arc::new(WorkerEnd::beside(&front).unwrap());
    let (claimed, claims) = mpsc::channel();
    let (unblock, blocked) = mpsc::channel::<()>();
    let blocked = Arc::new(std::sync::Mutex::new(blocked));
    let threads: Vec<_> = (0..THREADS)
        .map(|number| {
            let (worker, claimed, blocked) = (worker.clone(), claimed.clone(), blocked.clone());
            std::thread::spawn(move || {
                while let Some(index) = worker.claim_waiting(|wait| wait()) {
                    claimed.send(number).unwrap();
                    // Every request blocks in the app until the test has seen them all claimed.
                    blocked.lock().unwrap().recv_timeout(PATIENCE).unwrap();
                    let mut record = Vec::new();
                    worker.slot(index).pop(&mut record).unwrap();
                    worker.slot(index).release();
                }
            })
        })
        .collect();
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
            claims.recv_timeout(left).expect("every request of the burst is claimed without waiting for a nap")
        })
        .collect();
    serving.sort();
    assert_eq!(serving, (0..THREADS).collect::<Vec<_>>(), "each request on a thread of its own");

    for _ in 0..THREADS {
        unblock.send(()).unwrap();
    }
    worker.stop();
    for thread in threads {
        thread.join().unwrap();
    }
}
