//! A worker's threads are there for apps that block: a request published while one thread is
//! stuck in the app is taken by another thread, and a stop lets every thread go.

use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

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
