//! The front telling the worker that a request's client has gone: the worker's watcher wakes with
//! the slot, a slot whose client is still there is not named, and the next request published on
//! the slot starts with its client present.

use std::sync::Arc;
use std::time::Duration;

use headway_hop::front::FrontEnd;
use headway_hop::message::REQUEST_HEAD;
use headway_hop::worker::WorkerEnd;
use headway_hop::Layout;

mod common;
use common::publish;

#[test]
fn the_watcher_hears_which_client_left_and_the_next_request_starts_clean() {
    let front = FrontEnd::new(Layout::new(3, 4096)).unwrap();
    let worker = Arc::new(WorkerEnd::beside(&front).unwrap());
    publish(&front, 1);
    publish(&front, 2);
    assert_eq!(worker.try_claim(), Some(1));
    assert_eq!(worker.try_claim(), Some(2));

    let watcher = {
        let worker = worker.clone();
        std::thread::spawn(move || {
            let mut seen = 0;
            worker.wait_for_gone_clients(&mut seen)
        })
    };
    std::thread::sleep(Duration::from_millis(50)); // most likely asleep by now; either way it must see the mark
    front.slot(2).client_gone();
    assert_eq!(watcher.join().unwrap(), Some(vec![2]));
    assert!(worker.slot(2).is_client_gone() && !worker.slot(1).is_client_gone());

    // The worker ends the exchange; the next request on the slot has its client.
    let mut record = Vec::new();
    let slot = worker.slot(2);
    assert_eq!(slot.pop(&mut record).unwrap(), Some(REQUEST_HEAD));
    slot.release();
    publish(&front, 2);
    assert!(!worker.slot(2).is_client_gone());
}

#[test]
fn a_stopped_worker_stops_watching() {
    let front = FrontEnd::new(Layout::new(1, 4096)).unwrap();
    let worker = Arc::new(WorkerEnd::beside(&front).unwrap());
    let watcher = {
        let worker = worker.clone();
        std::thread::spawn(move || worker.wait_for_gone_clients(&mut 0))
    };
    worker.stop();
    assert_eq!(watcher.join().unwrap(), None);
}
