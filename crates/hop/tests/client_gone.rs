//! The front telling the worker that a request's client has gone: an event loop serving the
//! slots is rung, the slot is marked (and no other), and the next request published on the slot
//! starts with its client present. A worker without a loop is not rung: its threads see the mark
//! when they next send.

use headway_hop::front::FrontEnd;
use headway_hop::message::REQUEST_HEAD;
use headway_hop::worker::WorkerEnd;
use headway_hop::Layout;

mod common;
use common::publish;

#[test]
fn the_loop_is_rung_and_the_next_request_starts_clean() {
    let front = FrontEnd::new(Layout::new(3, 4096)).unwrap();
    let worker = WorkerEnd::beside(&front).unwrap();
    worker.serve_from_loop();
    publish(&front, 1);
    publish(&front, 2);
    assert_eq!(worker.try_claim(), Some(1));
    assert_eq!(worker.try_claim(), Some(2));
    worker.work_bell().drain();

    front.slot(2).client_gone();
    assert!(worker.work_bell().drain(), "the loop is rung");
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
fn a_worker_without_a_loop_is_only_marked() {
    let front = FrontEnd::new(Layout::new(1, 4096)).unwrap();
    let worker = WorkerEnd::beside(&front).unwrap();
    publish(&front, 0);
    assert_eq!(worker.try_claim(), Some(0));
    front.slot(0).client_gone();
    assert!(worker.slot(0).is_client_gone());
    assert!(!worker.work_bell().drain(), "nothing watches the bell");
}
