//! What the hop's tests share: a front, its stage and a worker beside it, and the front's side of
//! a bodiless request.

// Each test crate uses only some of these.
#![allow(dead_code)]

use headway_hop::front::FrontEnd;
use headway_hop::message::{self, decode_taken, TAKEN};
use headway_hop::stage::{Content, StageFront, StageLayout, Taken, Ticket};
use headway_hop::worker::WorkerEnd;
use headway_hop::Layout;

/// A stage of 8 entries of `entry_bytes`, and the front's and the worker's ends of a region of
/// `slots` slots with rings of `ring` bytes, for worker `number` of the stage.
pub fn setup_with(slots: u32, ring: usize, entry_bytes: u32, number: u32) -> (FrontEnd, StageFront, WorkerEnd) {
    let stage = StageFront::create(StageLayout { entries: 8, entry_bytes }).unwrap();
    let front =
        FrontEnd::staged(Layout::new(slots, ring), stage.stage().fd().try_clone_to_owned().unwrap(), number).unwrap();
    let worker = WorkerEnd::beside(&front).unwrap();
    (front, stage, worker)
}

/// [`setup_with`] 4 KiB rings and entries of 512 bytes.
pub fn setup(slots: u32, number: u32) -> (FrontEnd, StageFront, WorkerEnd) {
    setup_with(slots, 4096, 512, number)
}

/// A request with no body whose head record is `head`.
pub fn inline(head: &[u8]) -> Content<'_> {
    Content::Inline { head, body: &[] }
}

/// The head record of a `GET` of `target` with no body.
pub fn get_head(target: &str) -> Vec<u8> {
    let mut head = Vec::new();
    message::encode_request_head(&mut head, 0, true, b"GET", target.as_bytes(), b"", std::iter::empty());
    head
}

/// Stages a `GET` of `target` with no body, and wakes the worker for it.
pub fn stage_get(front: &FrontEnd, stage: &mut StageFront, target: &str) -> Ticket {
    let ticket = stage.put(inline(&get_head(target))).expect("room on the stage");
    front.wake_for_stage();
    ticket
}

/// What the front reads first on a slot's response ring after a take.
pub fn read_take(front: &FrontEnd, slot: usize) -> Taken {
    let mut record = Vec::new();
    assert_eq!(front.slot(slot).pop(&mut record).unwrap(), Some(TAKEN));
    decode_taken(&record).unwrap()
}
