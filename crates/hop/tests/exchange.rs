//! Requests and responses through the hop, both ends in this process: a single front thread that
//! drives every slot and sleeps only on the doorbell (as the server's event loop does), and
//! either worker threads that claim any slot and sleep on the futexes, or one thread that serves
//! every slot as an event loop does (an ASGI worker's), never waiting but on the work bell.
//! Bodies several times the ring size go both ways, so every kind of wait is taken many times.

use std::os::fd::{AsFd, AsRawFd};
use std::sync::Arc;
use std::time::Duration;

use headway_hop::front::{FrontEnd, Seen};
use headway_hop::message::{self, BODY, END, REQUEST_HEAD, RESPONSE_HEAD};
use headway_hop::worker::WorkerEnd;
use headway_hop::Layout;

const SLOTS: usize = 4;
const RING: usize = 4096;
const REQUESTS: usize = 400;
/// Bounds every sleep, so a lost wake-up shows as a slow test rather than a hung one; the test
/// counts how often a timeout, not a wake-up, ended a sleep.
const NAP: Duration = Duration::from_secs(2);

/// The body of request `n`: up to five ring sizes, a pattern that shows misplaced bytes.
fn body_of(n: usize) -> Vec<u8> {
    let len = (n * 7919) % (5 * RING);
    (0..len).map(|i| (i * 31 + n) as u8).collect()
}

/// The worker's answer to a body: the same bytes, reversed.
fn answer_to(body: &[u8]) -> Vec<u8> {
    body.iter().rev().copied().collect()
}

fn serve(end: &WorkerEnd) {
    let mut record = Vec::new();
    while let Some(index) = end.claim_waiting(|wait| wait()) {
        let slot = end.slot(index);
        let head_record = slot.pop_waiting(&mut record, |wait| wait()).unwrap();
        assert_eq!(head_record, REQUEST_HEAD);
        let head = message::decode_request_head(&record).unwrap();
        let (body_len, path) = (head.body_len as usize, String::from_utf8(head.target.to_vec()).unwrap());
        let mut body = Vec::with_capacity(body_len);
        while body.len() < body_len {
            assert_eq!(slot.pop_waiting(&mut record, |wait| wait()).unwrap(), BODY);
            body.extend_from_slice(&record);
        }
        let answer = answer_to(&body);
        let mut head = Vec::new();
        let length = answer.len().to_string();
        let headers = [(&b"x-path"[..], path.as_bytes()), (&b"content-length"[..], length.as_bytes())];
        message::encode_response_head(&mut head, 200, headers);
        slot.push_waiting(RESPONSE_HEAD, &[&head], |wait| wait()).unwrap();
        for chunk in answer.chunks(slot.max_payload()) {
            slot.push_waiting(BODY, &[chunk], |wait| wait()).unwrap();
        }
        slot.release();
        slot.push_waiting(END, &[], |wait| wait()).unwrap();
    }
}

/// Where the front is with one slot.
enum Exchange {
    Free,
    Sending { n: usize, body: Vec<u8>, sent: usize },
    Receiving { n: usize, body: Vec<u8>, head_seen: bool },
}

struct Front {
    end: FrontEnd,
    exchanges: Vec<Exchange>,
    next: usize,
    done: usize,
    record: Vec<u8>,
}

impl Front {
    /// Moves slot `index` as far as it goes without waiting; returns whether it moved.
    fn step(&mut self, index: usize) -> bool {
        let slot = self.end.slot(index);
        let mut moved = false;
        loop {
            let exchange = std::mem::replace(&mut self.exchanges[index], Exchange::Free);
            self.exchanges[index] = match exchange {
                Exchange::Free if self.next < REQUESTS => {
                    let n = self.next;
                    self.next += 1;
                    let body = body_of(n);
                    let mut head = Vec::new();
                    let target = format!("/{n}");
                    message::encode_request_head(
                        &mut head,
                        body.len() as u64,
                        message::Version::Http11,
                        b"POST",
                        target.as_bytes(),
                        b"",
                        std::iter::empty(),
                    );
                    assert!(slot.is_idle());
                    assert!(slot.push(REQUEST_HEAD, &[&head]).unwrap(), "a head fits an empty ring");
                    slot.publish();
                    Exchange::Sending { n, body, sent: 0 }
                }
                Exchange::Free => return moved,
                Exchange::Sending { n, body, sent } if sent == body.len() => {
                    Exchange::Receiving { n, body, head_seen: false }
                }
                Exchange::Sending { n, body, sent } => {
                    let end = (sent + slot.max_payload()).min(body.len());
                    let head = slot.request_head();
                    if slot.push(BODY, &[&body[sent..end]]).unwrap() {
                        slot.pushed();
                        Exchange::Sending { n, body, sent: end }
                    } else if slot.want_space(head) {
                        self.exchanges[index] = Exchange::Sending { n, body, sent };
                        return moved;
                    } else {
                        Exchange::Sending { n, body, sent }
                    }
                }
                Exchange::Receiving { n, mut body, head_seen } => match slot.pop(&mut self.record).unwrap() {
                    None => {
                        self.exchanges[index] = Exchange::Receiving { n, body, head_seen };
                        return moved;
                    }
                    Some(RESPONSE_HEAD) => {
                        let head = message::decode_response_head(&self.record).unwrap();
                        assert_eq!(head.status, 200);
                        assert_eq!(head.headers[0], (&b"x-path"[..], format!("/{n}").as_bytes()));
                        body.clear();
                        Exchange::Receiving { n, body, head_seen: true }
                    }
                    Some(BODY) => {
                        assert!(head_seen);
                        body.extend_from_slice(&self.record);
                        Exchange::Receiving { n, body, head_seen }
                    }
                    Some(END) => {
                        assert_eq!(body, answer_to(&body_of(n)), "the answer to request {n}");
                        self.done += 1;
                        Exchange::Free
                    }
                    Some(other) => panic!("unexpected record {other}"),
                },
            };
            moved = true;
        }
    }
}

/// Sleeps until the doorbell rings or `NAP` passes; returns whether it rang.
fn sleep_on_doorbell(end: &FrontEnd) -> bool {
    let mut poll = libc::pollfd { fd: end.as_fd().as_raw_fd(), events: libc::POLLIN, revents: 0 };
    // SAFETY: poll on one valid descriptor.
    unsafe { libc::poll(&mut poll, 1, NAP.as_millis() as i32) };
    end.doorbell().drain()
}

/// Where a loop worker is with one slot.
enum Served {
    Idle,
    Reading { body_len: usize, path: String, body: Vec<u8> },
    Writing { records: Vec<(u8, Vec<u8>)> },
}

/// Serves every slot from one thread, as an event loop does: nothing ever waits but on the work
/// bell, which the front rings for a publication, request bytes or response space the loop asked
/// for. Returns how many sleeps a timeout rather than the bell ended.
fn serve_as_a_loop(end: &WorkerEnd) -> usize {
    end.serve_from_loop();
    let mut slots: Vec<Served> = (0..end.slots()).map(|_| Served::Idle).collect();
    let (mut record, mut timeouts, mut armed) = (Vec::new(), 0, false);
    while !end.is_stopped() {
        let mut moved = false;
        while let Some(index) = end.try_claim() {
            let slot = end.slot(index);
            assert_eq!(slot.pop(&mut record).unwrap(), Some(REQUEST_HEAD), "the head comes with the publication");
            let head = message::decode_request_head(&record).unwrap();
            let path = String::from_utf8(head.target.to_vec()).unwrap();
            slots[index] = Served::Reading { body_len: head.body_len as usize, path, body: Vec::new() };
            moved = true;
        }
        let mut waits = false;
        for (index, served) in slots.iter_mut().enumerate() {
            let slot = end.slot(index);
            loop {
                match served {
                    Served::Idle => break,
                    Served::Reading { body_len, path, body } if body.len() == *body_len => {
                        let answer = answer_to(body);
                        let mut head = Vec::new();
                        let length = answer.len().to_string();
                        let headers = [(&b"x-path"[..], path.as_bytes()), (&b"content-length"[..], length.as_bytes())];
                        message::encode_response_head(&mut head, 200, headers);
                        let mut records = vec![(RESPONSE_HEAD, head)];
                        records.extend(answer.chunks(slot.max_payload()).map(|chunk| (BODY, chunk.to_vec())));
                        records.push((END, Vec::new()));
                        records.reverse();
                        *served = Served::Writing { records };
                    }
                    Served::Reading { body, .. } => {
                        let tail = slot.request_tail();
                        match slot.pop(&mut record).unwrap() {
                            Some(kind) => {
                                assert_eq!(kind, BODY);
                                body.extend_from_slice(&record);
                            }
                            None if slot.arm_for_request(tail) => {
                                waits = true;
                                break;
                            }
                            None => {}
                        }
                    }
                    Served::Writing { records } => match records.last() {
                        None => {
                            *served = Served::Idle;
                            break;
                        }
                        Some((kind, payload)) => {
                            if *kind == END {
                                slot.release();
                            }
                            let head = slot.response_head();
                            if slot.push(*kind, &[payload]).unwrap() {
                                slot.pushed();
                                records.pop();
                            } else if slot.arm_for_space(head) {
                                waits = true;
                                break;
                            }
                        }
                    },
                }
                moved = true;
            }
        }
        if moved && !waits {
            armed = false;
            continue;
        }
        // Asked to be rung for a publication, then one more look before sleeping.
        if !armed && slots.iter().any(|served| matches!(served, Served::Idle)) {
            end.arm_loop();
            armed = true;
            continue;
        }
        armed = false;
        let mut poll = libc::pollfd { fd: end.work_bell().as_fd().as_raw_fd(), events: libc::POLLIN, revents: 0 };
        // SAFETY: poll on one valid descriptor.
        unsafe { libc::poll(&mut poll, 1, NAP.as_millis() as i32) };
        if !end.work_bell().drain() && !end.is_stopped() && slots.iter().any(|served| !matches!(served, Served::Idle)) {
            timeouts += 1;
        }
    }
    timeouts
}

#[test]
fn every_request_gets_its_own_answer_through_every_kind_of_wait() {
    let end = FrontEnd::new(Layout::new(SLOTS as u32, RING)).unwrap();
    let worker = Arc::new(WorkerEnd::beside(&end).unwrap());
    let threads: Vec<_> = (0..3)
        .map(|_| {
            let worker = worker.clone();
            std::thread::spawn(move || serve(&worker))
        })
        .collect();
    exchange_every_request(end, &worker);
    for thread in threads {
        thread.join().unwrap();
    }
}

#[test]
fn a_loop_worker_is_woken_by_the_bell_for_every_kind_of_wait() {
    let end = FrontEnd::new(Layout::new(SLOTS as u32, RING)).unwrap();
    let worker = Arc::new(WorkerEnd::beside(&end).unwrap());
    let thread = {
        let worker = worker.clone();
        std::thread::spawn(move || serve_as_a_loop(&worker))
    };
    exchange_every_request(end, &worker);
    assert_eq!(thread.join().unwrap(), 0, "the loop slept through news it should have been rung for");
}

/// Drives every slot from one thread until every request has its answer, then stops the worker.
fn exchange_every_request(end: FrontEnd, worker: &WorkerEnd) {
    worker.announce_ready(false);
    assert!(end.is_worker_ready());

    let mut front =
        Front { end, exchanges: (0..SLOTS).map(|_| Exchange::Free).collect(), next: 0, done: 0, record: Vec::new() };
    let mut seen = vec![Seen::default(); SLOTS];
    let mut timeouts = 0;
    while front.done < REQUESTS {
        let mut moved = false;
        for index in 0..SLOTS {
            moved |= front.step(index);
        }
        if moved {
            continue;
        }
        front.end.arm();
        let news = front.end.news(&mut seen).count();
        if news == 0 && !sleep_on_doorbell(&front.end) {
            timeouts += 1;
        }
        front.end.disarm();
    }
    worker.stop();
    worker.work_bell().ring(); // a loop worker sleeps on the bell, not the futex stop wakes
    assert_eq!(timeouts, 0, "the front slept through a response it should have been woken for");
}
