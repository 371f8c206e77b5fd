//! Requests through the stage: a worker thread takes the oldest into a free slot of its own, finds
//! its record on the slot's request ring, and tells the front with a take record first on the
//! response ring; a request too large for an entry comes on the ring after the front has read
//! the take; and a sleeping thread is woken by the front's staging.

use std::sync::Arc;
use std::time::Duration;

use headway_hop::message::{BODY, END, REQUEST_HEAD};
use headway_hop::stage::{Content, Delivery, Taker};

mod common;
use common::{inline, read_take, setup};

#[test]
fn threads_take_the_oldest_into_free_slots_only() {
    let (front, mut stage, worker) = setup(2, 5);
    let tickets: Vec<_> =
        [b"one", b"two", b"thr"].iter().map(|record| stage.put(inline(&record[..])).unwrap()).collect();

    let mut record = Vec::new();
    for (slot, name) in [(0, b"one"), (1, b"two")] {
        assert_eq!(worker.try_claim().unwrap(), Some(slot));
        assert_eq!(worker.slot(slot).pop(&mut record).unwrap(), Some(REQUEST_HEAD));
        assert_eq!(&record, name);
        let taken = read_take(&front, slot);
        assert_eq!(taken.delivery, Delivery::Inline);
        assert_eq!(taken.ticket, tickets[slot]);
        stage.seen(taken.ticket, Taker { worker: 5, slot: slot as u32 }).unwrap();
    }
    assert_eq!(worker.try_claim().unwrap(), None, "both slots busy: the third waits on the stage");

    // Slot 0's request ends; its thread takes the third before the front has read the end.
    let slot = worker.slot(0);
    assert!(slot.push(END, &[]).unwrap());
    slot.release();
    assert_eq!(worker.try_claim().unwrap(), Some(0));
    assert_eq!(front.slot(0).pop(&mut record).unwrap(), Some(END));
    assert_eq!(read_take(&front, 0).ticket, tickets[2]);
}

#[test]
fn a_request_too_large_for_the_stage_comes_on_the_ring_after_the_take() {
    let (front, mut stage, worker) = setup(1, 0);
    let ticket = stage.put(Content::Later).unwrap();
    assert_eq!(worker.try_claim().unwrap(), Some(0));
    let mut record = Vec::new();
    assert_eq!(worker.slot(0).pop(&mut record).unwrap(), None, "nothing on the ring before the front writes it");
    let taken = read_take(&front, 0);
    assert!(taken.delivery == Delivery::Later && taken.ticket == ticket);
    assert!(front.slot(0).push(REQUEST_HEAD, &[b"big head"]).unwrap());
    assert!(front.slot(0).push(BODY, &[&[7u8; 2000]]).unwrap());
    assert_eq!(worker.slot(0).pop(&mut record).unwrap(), Some(REQUEST_HEAD));
    assert_eq!(record, b"big head");
}

#[test]
fn a_body_comes_after_its_head_and_a_held_slot_waits_for_the_front() {
    let (front, mut stage, worker) = setup(2, 0);
    let held = stage.put(Content::Held).unwrap();
    stage.put(Content::Inline { head: b"post", body: b"form=1" }).unwrap();
    // The held request takes slot 0 without a thread; the thread goes on to the next.
    assert_eq!(worker.try_claim().unwrap(), Some(1));
    let taken = read_take(&front, 0);
    assert_eq!((taken.ticket, taken.delivery), (held, Delivery::Held));
    let mut record = Vec::new();
    assert_eq!(worker.slot(1).pop(&mut record).unwrap(), Some(REQUEST_HEAD));
    assert_eq!(worker.slot(1).pop(&mut record).unwrap(), Some(BODY));
    assert_eq!(record, b"form=1");
    stage.put(inline(b"next")).unwrap();
    assert_eq!(worker.try_claim().unwrap(), None, "slot 0 is held, slot 1 busy");
    assert!(front.slot(0).give_back());
    assert!(!front.slot(0).give_back(), "given back once");
    assert_eq!(worker.try_claim().unwrap(), Some(0));
}

#[test]
fn a_drained_worker_takes_nothing_more() {
    let (front, mut stage, worker) = setup(1, 0);
    let ticket = stage.put(inline(b"one")).unwrap();
    front.stop_taking();
    assert_eq!(worker.try_claim().unwrap(), None);
    assert!(stage.withdraw(ticket), "still staged, for another worker");
}

#[test]
fn a_full_response_ring_still_has_room_for_the_next_take() {
    let (front, mut stage, worker) = setup(1, 0);
    stage.put(inline(b"first")).unwrap();
    stage.put(inline(b"second")).unwrap();
    assert_eq!(worker.try_claim().unwrap(), Some(0));
    let slot = worker.slot(0);
    let mut record = Vec::new();
    slot.pop(&mut record).unwrap();
    // The app answers more than the front has read yet: the ring fills up.
    while slot.push(BODY, &[&[1u8; 100]]).unwrap() {}
    slot.release();
    assert_eq!(worker.try_claim().unwrap(), Some(0), "the take record fits in the room kept for it");
    assert_eq!(read_take(&front, 0).ticket.position, 0);
}

#[test]
fn a_sleeping_thread_wakes_for_a_staged_request() {
    let (front, mut stage, worker) = setup(1, 0);
    let worker = Arc::new(worker);
    let thread = {
        let worker = worker.clone();
        std::thread::spawn(move || worker.claim_waiting(|wait| wait()).unwrap())
    };
    // Past its spin, most likely asleep: woken by the front (or, were the wake-up lost, by its
    // one-second nap).
    std::thread::sleep(Duration::from_millis(100));
    stage.put(inline(b"late")).unwrap();
    front.wake_for_stage();
    assert_eq!(thread.join().unwrap(), Some(0));
}
