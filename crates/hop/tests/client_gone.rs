//! The front telling the worker that a request's client has gone: the worker's watcher wakes with
//! the slot, a slot whose client is still there is not named, and the next request taken into
//! the slot starts with its client present.

use std::sync::Arc;
use std::time::Duration;

use headway_hop::message::{END, REQUEST_HEAD};
use headway_hop::stage::Taker;

mod common;
use common::{read_take, setup, stage_get};

#[test]
fn the_watcher_hears_which_client_left_and_the_next_request_starts_clean() {
    let (front, mut stage, worker) = setup(3, 0);
    let worker = Arc::new(worker);
    stage_get(&front, &mut stage, "/a");
    stage_get(&front, &mut stage, "/b");
    assert_eq!(worker.try_claim().unwrap(), Some(0));
    assert_eq!(worker.try_claim().unwrap(), Some(1));
    // The front marks a client gone only once it has read the take.
    for slot in [0, 1] {
        stage.seen(read_take(&front, slot).ticket, Taker { worker: 0, slot: slot as u32 }).unwrap();
    }

    let watcher = {
        let worker = worker.clone();
        std::thread::spawn(move || {
            let mut seen = 0;
            worker.wait_for_gone_clients(&mut seen)
        })
    };
    std::thread::sleep(Duration::from_millis(50)); // most likely asleep by now; either way it must see the mark
    front.slot(1).client_gone();
    assert_eq!(watcher.join().unwrap(), Some(vec![1]));
    assert!(worker.slot(1).is_client_gone() && !worker.slot(0).is_client_gone());

    // The worker ends the exchange; the next request taken into the slot has its client.
    let mut record = Vec::new();
    let slot = worker.slot(1);
    assert_eq!(slot.pop(&mut record).unwrap(), Some(REQUEST_HEAD));
    assert!(slot.push(END, &[]).unwrap());
    slot.release();
    stage_get(&front, &mut stage, "/c");
    assert_eq!(worker.try_claim().unwrap(), Some(1), "slot 0 still busy");
    assert!(!worker.slot(1).is_client_gone());
}

#[test]
fn a_stopped_worker_stops_watching() {
    let (_front, _stage, worker) = setup(1, 0);
    let worker = Arc::new(worker);
    let watcher = {
        let worker = worker.clone();
        std::thread::spawn(move || worker.wait_for_gone_clients(&mut 0))
    };
    worker.stop();
    assert_eq!(watcher.join().unwrap(), None);
}
