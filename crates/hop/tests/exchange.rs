//! Requests and responses through the hop, both ends in this process: a single front thread that
//! stages requests and drives every slot, sleeping only on the doorbell (as the server's event
//! loop does), and worker threads that take requests from the stage into any free slot and sleep
//! on the futexes. The stage holds only a few requests, so the front stages more as it reads
//! takes; a request too large for an entry is written into its slot's ring once its take is
//! read. Bodies several times the ring size go both ways, so every kind of wait is taken many
//! times.

use std::collections::HashMap;
use std::os::fd::{AsFd, AsRawFd};
use std::sync::Arc;
use std::time::Duration;

use headway_hop::front::{FrontEnd, Seen};
use headway_hop::message::{self, decode_taken, BODY, END, REQUEST_HEAD, RESPONSE_HEAD, TAKEN};
use headway_hop::stage::{Content, Delivery, StageFront, Taker, Ticket};
use headway_hop::worker::WorkerEnd;

mod common;

const SLOTS: usize = 4;
const RING: usize = 4096;
/// Half a ring: requests with short bodies go in an entry, the rest come after their take.
const ENTRY_BYTES: u32 = 2048;
const REQUESTS: usize = 400;
/// The worker's number on the stage, which its takes name.
const NUMBER: u32 = 2;
/// Bounds every sleep, so a lost wake-up shows as a slow test rather than a hung one; the test
/// counts how often a timeout, not a wake-up, ended a sleep.
const NAP: Duration = Duration::from_secs(2);

/// The head record and body of request `n`: a body up to five ring sizes, a pattern that shows
/// misplaced bytes.
fn request_of(n: usize) -> (Vec<u8>, Vec<u8>) {
    let len = (n * 7919) % (5 * RING);
    let body: Vec<u8> = (0..len).map(|i| (i * 31 + n) as u8).collect();
    let mut head = Vec::new();
    let target = format!("/{n}");
    message::encode_request_head(&mut head, len as u64, true, b"POST", target.as_bytes(), b"", std::iter::empty());
    (head, body)
}

/// The worker's answer to a body: the same bytes, reversed.
fn answer_to(body: &[u8]) -> Vec<u8> {
    body.iter().rev().copied().collect()
}

fn serve(end: &WorkerEnd) {
    let mut record = Vec::new();
    while let Some(index) = end.claim_waiting(|wait| wait()).unwrap() {
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
        slot.push_waiting(END, &[], |wait| wait()).unwrap();
        slot.release();
    }
}

/// Where the front is with one slot.
enum Exchange {
    /// No request under way: the next record is the take of one.
    Free,
    Sending {
        n: usize,
        body: Vec<u8>,
        sent: usize,
    },
    Receiving {
        n: usize,
        body: Vec<u8>,
        head_seen: bool,
    },
}

struct Front {
    end: FrontEnd,
    stage: StageFront,
    /// The request each staged ticket stands for.
    staged: HashMap<Ticket, usize>,
    exchanges: Vec<Exchange>,
    next: usize,
    done: usize,
    /// Takes read, by how the request reached the slot: inline, later.
    deliveries: [usize; 2],
    record: Vec<u8>,
}

impl Front {
    /// Stages the next requests while the stage has room, and wakes the worker if it staged
    /// any; returns whether it did.
    fn stage_more(&mut self) -> bool {
        let before = self.next;
        while self.next < REQUESTS {
            let (head, body) = request_of(self.next);
            let content = if self.stage.fits(head.len() + body.len()) {
                Content::Inline { head: &head, body: &body }
            } else {
                Content::Later
            };
            let Some(ticket) = self.stage.put(content) else { break };
            self.staged.insert(ticket, self.next);
            self.next += 1;
        }
        let staged = self.next > before;
        if staged {
            self.end.wake_for_stage();
        }
        staged
    }

    /// Moves slot `index` as far as it goes without waiting; returns whether it moved.
    fn step(&mut self, index: usize) -> bool {
        let slot = self.end.slot(index);
        let mut moved = false;
        loop {
            let exchange = std::mem::replace(&mut self.exchanges[index], Exchange::Free);
            self.exchanges[index] = match exchange {
                Exchange::Free => match slot.pop(&mut self.record).unwrap() {
                    None => return moved,
                    Some(TAKEN) => {
                        let taken = decode_taken(&self.record).unwrap();
                        self.stage.seen(taken.ticket, Taker { worker: NUMBER, slot: index as u32 }).unwrap();
                        let n = self.staged.remove(&taken.ticket).expect("a take of a staged request");
                        match taken.delivery {
                            Delivery::Inline => {
                                self.deliveries[0] += 1;
                                Exchange::Receiving { n, body: Vec::new(), head_seen: false }
                            }
                            Delivery::Later => {
                                self.deliveries[1] += 1;
                                let (head, body) = request_of(n);
                                assert!(slot.push(REQUEST_HEAD, &[&head]).unwrap(), "a head fits an empty ring");
                                slot.pushed();
                                Exchange::Sending { n, body, sent: 0 }
                            }
                            Delivery::Held => panic!("a held slot for a request staged whole or later"),
                        }
                    }
                    Some(other) => panic!("record {other} before a take"),
                },
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
                        assert_eq!(body, answer_to(&request_of(n).1), "the answer to request {n}");
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

#[test]
fn every_request_gets_its_own_answer_through_every_kind_of_wait() {
    let (end, stage, worker) = common::setup_with(SLOTS as u32, RING, ENTRY_BYTES, NUMBER);
    let worker = Arc::new(worker);
    let threads: Vec<_> = (0..3)
        .map(|_| {
            let worker = worker.clone();
            std::thread::spawn(move || serve(&worker))
        })
        .collect();
    worker.announce_ready(false);
    assert!(end.is_worker_ready());

    let mut front = Front {
        end,
        stage,
        staged: HashMap::new(),
        exchanges: (0..SLOTS).map(|_| Exchange::Free).collect(),
        next: 0,
        done: 0,
        deliveries: [0; 2],
        record: Vec::new(),
    };
    let mut seen = vec![Seen::default(); SLOTS];
    let mut timeouts = 0;
    while front.done < REQUESTS {
        let mut moved = front.stage_more();
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
    for thread in threads {
        thread.join().unwrap();
    }
    assert_eq!(timeouts, 0, "the front slept through a take or a response it should have been woken for");
    let [inline, later] = front.deliveries;
    assert!(inline > 0 && later > 0, "requests both staged whole ({inline}) and written after the take ({later})");
}
