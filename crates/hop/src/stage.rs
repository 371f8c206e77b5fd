//! The stage: the head of the one queue, in memory every worker process maps, so that a worker
//! thread that finishes a request takes the next one itself instead of waiting for the front.
//!
//! Why. When the front handed each request to a slot itself, a worker that finished its requests
//! waited for the front to hand over the next, and on a loaded machine the front may wait half a millisecond for a CPU
//! (the kernel does not move it to a CPU that idles in short spells). Requests placed in a
//! worker ahead of its threads served 7-10 % more on a Flask page (docs/benchmarks.md, "Where
//! the last idle share goes"), but a request placed in one worker waits behind that worker even
//! when another is free: a per-worker queue. The stage keeps one queue: every worker takes from
//! it, oldest first, and only into a slot it has free, so a worker still never holds more
//! requests than it has slots.
//!
//! What stays the front's. The front's queue decides what is staged, in its order; it may take a
//! staged request back ([`StageFront::withdraw`]: the client left, its deadline passed, the
//! controlled delay cut it) as long as no worker has taken it, and it learns of each take from
//! the worker's ring ([`StageFront::seen`]). A worker that dies after taking a request and
//! before the front has seen it does not lose it silently: [`StageFront::reclaim`] lists what
//! it had taken, for the front to fail as it fails the rest of that worker's requests.
//!
//! How. Each staged request sits in an entry: a state word and the request's head record and
//! body (or, for a request too large for an entry, nothing: the front writes it into the slot's
//! ring once it sees the take; or, for a request the front serves itself, a mark that the taker
//! is to hold a slot for it: see [`Content`]). The order is a ring of cells naming entries; cell `p` is written only by the
//! front and names the request staged `p`-th, whose ticket is `p` too. A worker takes the cell
//! at the head by moving its entry from staged to taken in one compare-and-swap, and then moves
//! the head on, whether it won the entry or not: a worker that dies between the two steps holds
//! nobody up, and a cell whose request was withdrawn is passed over. Only the front frees
//! entries, so it keeps the free ones in a list of its own.
//!
//! Everything a worker reads here is checked, as in the rest of the hop; the front reads no
//! bytes a worker wrote, only state words, and checks that a take a worker reports is one that
//! worker made.

use std::io;
use std::os::fd::{BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use crate::shm::SharedMemory;
use crate::HopError;

/// "HEADWAYS" and the layout version.
const MAGIC: u64 = 0x4845_4144_5741_5301;
const HEADER_SIZE: usize = 256;
/// An entry's `len` when its request is not in it (too large): the front writes it into the
/// taker's slot ring.
const LATER: u32 = u32::MAX;
/// An entry's `len` when the front serves the request itself and the taker holds a slot for it.
const HELD: u32 = u32::MAX - 1;

/// The state word of an entry: the kind in the low byte, the taker in the next three, the
/// ticket in the high half.
const FREE: u64 = 0;
const STAGED: u64 = 1;
const TAKEN: u64 = 2;

/// Takers are numbered worker (12 bits) and slot (12 bits).
const TAKER_LIMIT: u32 = 1 << 12;

fn state(ticket: u32, kind: u64, taker: u32) -> u64 {
    (u64::from(ticket) << 32) | (u64::from(taker) << 8) | kind
}

/// How a stage is divided: `entries` requests of up to `entry_bytes` each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StageLayout {
    pub entries: u32,
    pub entry_bytes: u32,
}

impl StageLayout {
    /// Cells in the order ring: twice the entries, so that cells of withdrawn requests not yet
    /// passed over rarely stop the front from staging.
    fn cells(&self) -> u64 {
        u64::from(self.entries * 2).next_power_of_two()
    }

    fn entry_stride(&self) -> usize {
        (std::mem::size_of::<EntryControl>() + self.entry_bytes as usize).next_multiple_of(64)
    }

    fn entries_offset(&self) -> usize {
        HEADER_SIZE + (self.cells() as usize * 8).next_multiple_of(64)
    }

    fn size(&self) -> usize {
        self.entries_offset() + self.entries as usize * self.entry_stride()
    }
}

/// The start of the stage.
#[repr(C)]
struct Header {
    magic: u64,
    entries: u32,
    entry_bytes: u32,
    /// The position of the oldest cell not yet passed over; moved on by takers and the front.
    head: Line64,
    /// The position of the next cell the front writes.
    tail: Line64,
}

#[repr(C, align(64))]
struct Line64(AtomicU64);

#[repr(C, align(64))]
struct EntryControl {
    state: AtomicU64,
    /// Bytes of the head record and body together, or [`LATER`] or [`HELD`]; written before
    /// the entry is staged.
    len: AtomicU32,
    /// Bytes of the head record, which the body follows.
    head_len: AtomicU32,
}

const _: () = assert!(std::mem::size_of::<Header>() <= HEADER_SIZE);

/// A staged request: the position of its cell (unique among the requests in the stage) and its
/// entry. A worker reports the ticket of each take on its ring.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ticket {
    pub position: u32,
    pub entry: u32,
}

/// Who took a request: a worker (numbered by the front, from 0) and one of its slots.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Taker {
    pub worker: u32,
    pub slot: u32,
}

impl Taker {
    fn packed(self) -> u32 {
        assert!(self.worker < TAKER_LIMIT && self.slot < TAKER_LIMIT, "a taker beyond {TAKER_LIMIT} workers or slots");
        (self.worker << 12) | self.slot
    }

    fn unpacked(packed: u32) -> Taker {
        Taker { worker: packed >> 12, slot: packed & (TAKER_LIMIT - 1) }
    }
}

/// What a staged entry holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Content<'a> {
    /// The request's head record and its whole body: the taker puts them on its slot's request
    /// ring itself, and the front only reads the response.
    Inline { head: &'a [u8], body: &'a [u8] },
    /// Nothing (the request is larger than an entry): the front writes it into the taker's
    /// ring once it has read the take.
    Later,
    /// A request the front serves on a connection of its own (a WebSocket handshake): the taker
    /// holds the slot, unused, until the front gives it back, so that the worker still runs no
    /// more than its slots.
    Held,
}

/// How a taken request reaches its slot (see [`Content`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    Inline,
    Later,
    Held,
}

/// A request a worker took: its ticket, and how it reaches the slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Taken {
    pub ticket: Ticket,
    pub delivery: Delivery,
}

/// The shared memory of a stage, as either side maps it.
pub struct Stage {
    memory: SharedMemory,
    layout: StageLayout,
}

impl Stage {
    /// Maps a stage the front created and checks that its layout is one this code reads.
    pub fn attach(fd: OwnedFd) -> Result<Stage, HopError> {
        let memory = SharedMemory::open(fd)?;
        if memory.len() < HEADER_SIZE {
            return Err(HopError::Corrupt("the stage is smaller than its header"));
        }
        // SAFETY: the mapping holds a header, whose plain fields the front wrote before passing
        // the descriptor on and never writes again.
        let (magic, layout) = unsafe {
            let header = &*(memory.base().as_ptr() as *const Header);
            (header.magic, StageLayout { entries: header.entries, entry_bytes: header.entry_bytes })
        };
        if magic != MAGIC {
            return Err(HopError::Corrupt("not a headway stage of this version"));
        }
        if layout.entries == 0 || layout.size() != memory.len() {
            return Err(HopError::Corrupt("the stage's layout does not match its size"));
        }
        Ok(Stage { memory, layout })
    }

    /// The descriptor to hand to each worker process.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.memory.fd()
    }

    pub fn layout(&self) -> StageLayout {
        self.layout
    }

    /// Whether a cell waits at the head (a staged request, or one withdrawn and not passed over
    /// yet): a worker thread about to sleep looks here last.
    pub fn has_cells(&self) -> bool {
        let header = self.header();
        header.head.0.load(Ordering::SeqCst) != header.tail.0.load(Ordering::SeqCst)
    }

    /// Takes the oldest staged request for `taker`'s slot, copying an inline request's head
    /// record and body into `head` and `body`. `None`: nothing is staged.
    pub fn take(&self, taker: Taker, head: &mut Vec<u8>, body: &mut Vec<u8>) -> Result<Option<Taken>, HopError> {
        let header = self.header();
        let taker = taker.packed();
        loop {
            let position = header.head.0.load(Ordering::Acquire);
            let tail = header.tail.0.load(Ordering::Acquire);
            if position == tail {
                return Ok(None);
            }
            if tail.wrapping_sub(position) > self.layout.cells() {
                // A head read before this thread was preempted can lag a tail read after it by
                // more than the ring: only a head that stands still there is out of range.
                if header.head.0.load(Ordering::Acquire) != position {
                    continue;
                }
                return Err(HopError::Corrupt("the stage's positions are out of range"));
            }
            let (ticket, index) = self.cell(position);
            if ticket != position as u32 {
                // Read while the front was rewriting the cell for a later round: the head has
                // moved on since it was loaded.
                continue;
            }
            let entry = self.entry(index)?;
            let won = entry
                .state
                .compare_exchange(
                    state(ticket, STAGED, 0),
                    state(ticket, TAKEN, taker),
                    Ordering::AcqRel,
                    Ordering::Relaxed,
                )
                .is_ok();
            // Whoever won the entry, the cell is used: pass it (another taker may have already).
            let _ =
                header.head.0.compare_exchange(position, position.wrapping_add(1), Ordering::AcqRel, Ordering::Relaxed);
            if !won {
                continue;
            }
            let ticket = Ticket { position: ticket, entry: index };
            let (len, head_len) = (entry.len.load(Ordering::Relaxed), entry.head_len.load(Ordering::Relaxed));
            let delivery = match len {
                LATER => Delivery::Later,
                HELD => Delivery::Held,
                len if len > self.layout.entry_bytes || head_len > len => {
                    return Err(HopError::Corrupt("a staged request longer than its entry"))
                }
                len => {
                    let record = self.record_ptr(index);
                    // SAFETY: `len` bytes of the entry's record space, which the front wrote
                    // before staging it and leaves alone until it has seen this take.
                    unsafe {
                        copy_out(record, head_len as usize, head);
                        copy_out(record.add(head_len as usize), (len - head_len) as usize, body);
                    }
                    Delivery::Inline
                }
            };
            return Ok(Some(Taken { ticket, delivery }));
        }
    }

    fn header(&self) -> &Header {
        // SAFETY: the header is at the start of the mapping, which lives as long as `self`.
        unsafe { &*(self.memory.base().as_ptr() as *const Header) }
    }

    fn cell_word(&self, position: u64) -> &AtomicU64 {
        let index = (position & (self.layout.cells() - 1)) as usize;
        // SAFETY: the cells follow the header, `cells()` of them, inside the mapping.
        unsafe { &*(self.memory.base().as_ptr().add(HEADER_SIZE + index * 8) as *const AtomicU64) }
    }

    /// The ticket and entry a cell names.
    fn cell(&self, position: u64) -> (u32, u32) {
        let word = self.cell_word(position).load(Ordering::Acquire);
        ((word >> 32) as u32, word as u32)
    }

    fn entry(&self, index: u32) -> Result<&EntryControl, HopError> {
        if index >= self.layout.entries {
            return Err(HopError::Corrupt("a stage cell names no entry"));
        }
        let offset = self.layout.entries_offset() + index as usize * self.layout.entry_stride();
        // SAFETY: entry `index` lies inside the mapping (checked against the layout).
        Ok(unsafe { &*(self.memory.base().as_ptr().add(offset) as *const EntryControl) })
    }

    fn record_ptr(&self, index: u32) -> *mut u8 {
        let offset = self.layout.entries_offset()
            + index as usize * self.layout.entry_stride()
            + std::mem::size_of::<EntryControl>();
        // SAFETY: the record space of an entry, inside the mapping.
        unsafe { self.memory.base().as_ptr().add(offset) }
    }
}

/// Copies `len` bytes at `from` into `to`.
///
/// # Safety
/// `from` must be valid for `len` bytes that nobody writes meanwhile.
unsafe fn copy_out(from: *const u8, len: usize, to: &mut Vec<u8>) {
    to.clear();
    to.reserve(len);
    // SAFETY: the caller vouches for `from`; `to` has room for `len` bytes.
    unsafe {
        std::ptr::copy_nonoverlapping(from, to.as_mut_ptr(), len);
        to.set_len(len);
    }
}

/// The front's side of a stage: the shared memory and what only the front knows (the free
/// entries). Used under the queue's lock: one caller at a time.
pub struct StageFront {
    stage: Stage,
    free: Vec<u32>,
}

impl StageFront {
    /// A new, empty stage.
    pub fn create(layout: StageLayout) -> io::Result<StageFront> {
        assert!(layout.entries > 0 && u64::from(layout.entries) * 2 <= u64::from(u32::MAX), "{layout:?}");
        let memory = SharedMemory::create(c"headway-stage", layout.size())?;
        // SAFETY: the header is at the start of the mapping; no worker has it yet.
        unsafe {
            let header = memory.base().as_ptr() as *mut Header;
            (*header).magic = MAGIC;
            (*header).entries = layout.entries;
            (*header).entry_bytes = layout.entry_bytes;
        }
        Ok(StageFront { stage: Stage { memory, layout }, free: (0..layout.entries).rev().collect() })
    }

    pub fn stage(&self) -> &Stage {
        &self.stage
    }

    /// Whether a request whose head record and body take `len` bytes goes in an entry (a longer
    /// one is staged as [`Content::Later`]).
    pub fn fits(&self, len: usize) -> bool {
        len <= self.stage.layout.entry_bytes as usize
    }

    /// Stages a request after every one staged before. Returns its ticket, or `None` if every
    /// entry or cell is in use.
    pub fn put(&mut self, content: Content<'_>) -> Option<Ticket> {
        let header = self.stage.header();
        let tail = header.tail.0.load(Ordering::Relaxed);
        if tail.wrapping_sub(header.head.0.load(Ordering::Acquire)) >= self.stage.layout.cells()
            && !self.pass_dead_cells()
        {
            return None;
        }
        let index = self.free.pop()?;
        let entry = self.stage.entry(index).expect("a free entry is an entry");
        let len = match content {
            Content::Inline { head, body } => {
                let len = head.len() + body.len();
                assert!(self.fits(len), "a request of {len} bytes staged inline");
                let record = self.stage.record_ptr(index);
                // SAFETY: the entry is free: no worker reads its record space until it is staged,
                // and it holds `entry_bytes`, at least `len`.
                unsafe {
                    std::ptr::copy_nonoverlapping(head.as_ptr(), record, head.len());
                    std::ptr::copy_nonoverlapping(body.as_ptr(), record.add(head.len()), body.len());
                }
                entry.head_len.store(head.len() as u32, Ordering::Relaxed);
                len as u32
            }
            Content::Later => LATER,
            Content::Held => HELD,
        };
        entry.len.store(len, Ordering::Relaxed);
        let ticket = tail as u32;
        entry.state.store(state(ticket, STAGED, 0), Ordering::Release);
        self.stage.cell_word(tail).store((u64::from(ticket) << 32) | u64::from(index), Ordering::Release);
        header.tail.0.store(tail.wrapping_add(1), Ordering::Release);
        Some(Ticket { position: ticket, entry: index })
    }

    /// Passes over the cells at the head whose requests were withdrawn or taken; true if that
    /// freed a cell.
    fn pass_dead_cells(&self) -> bool {
        let header = self.stage.header();
        let mut passed = false;
        loop {
            let head = header.head.0.load(Ordering::Acquire);
            if head == header.tail.0.load(Ordering::Relaxed) {
                return passed;
            }
            let (ticket, index) = self.stage.cell(head);
            let live = self
                .stage
                .entry(index)
                .is_ok_and(|entry| entry.state.load(Ordering::Acquire) == state(ticket, STAGED, 0));
            if live {
                return passed;
            }
            passed |=
                header.head.0.compare_exchange(head, head.wrapping_add(1), Ordering::AcqRel, Ordering::Relaxed).is_ok();
        }
    }

    /// Takes a staged request back before any worker takes it. False: a worker took it first
    /// (the front will see the take on that worker's ring).
    pub fn withdraw(&mut self, ticket: Ticket) -> bool {
        let entry = self.stage.entry(ticket.entry).expect("a ticket the front gave");
        let withdrawn = entry
            .state
            .compare_exchange(state(ticket.position, STAGED, 0), FREE, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok();
        if withdrawn {
            self.free.push(ticket.entry);
        }
        withdrawn
    }

    /// The front has read, on `taker`'s ring, that it took `ticket`: checks that it did, and
    /// frees the entry.
    pub fn seen(&mut self, ticket: Ticket, taker: Taker) -> Result<(), HopError> {
        let entry = self.stage.entry(ticket.entry)?;
        if entry.state.load(Ordering::Acquire) != state(ticket.position, TAKEN, taker.packed()) {
            return Err(HopError::Corrupt("a take the stage does not show"));
        }
        entry.state.store(FREE, Ordering::Release);
        self.free.push(ticket.entry);
        Ok(())
    }

    /// How many requests worker `worker` took that the front has not seen yet.
    pub fn taken_by(&self, worker: u32) -> usize {
        (0..self.stage.layout.entries)
            .filter(|&index| {
                let word = self.stage.entry(index).expect("an index below the count").state.load(Ordering::Acquire);
                word & 0xff == TAKEN && Taker::unpacked((word >> 8) as u32 & 0xff_ffff).worker == worker
            })
            .count()
    }

    /// Worker `worker` is gone: frees the entries it took and the front has not seen, and
    /// returns their tickets (requests that reached the worker and will never be answered).
    pub fn reclaim(&mut self, worker: u32) -> Vec<(Ticket, Taker)> {
        let mut reclaimed = Vec::new();
        for index in 0..self.stage.layout.entries {
            let entry = self.stage.entry(index).expect("an index below the count");
            let word = entry.state.load(Ordering::Acquire);
            let taker = Taker::unpacked((word >> 8) as u32 & 0xff_ffff);
            if word & 0xff == TAKEN && taker.worker == worker {
                entry.state.store(FREE, Ordering::Release);
                self.free.push(index);
                reclaimed.push((Ticket { position: (word >> 32) as u32, entry: index }, taker));
            }
        }
        reclaimed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;
    use std::sync::{Arc, Mutex};

    fn front(entries: u32) -> StageFront {
        StageFront::create(StageLayout { entries, entry_bytes: 64 }).unwrap()
    }

    /// A worker process's own mapping of the front's stage.
    fn worker_mapping(front: &StageFront) -> Stage {
        Stage::attach(front.stage().fd().try_clone_to_owned().unwrap()).unwrap()
    }

    fn taker(worker: u32, slot: u32) -> Taker {
        Taker { worker, slot }
    }

    /// A request with no body whose head record is `head`.
    fn inline(head: &[u8]) -> Content<'_> {
        Content::Inline { head, body: &[] }
    }

    fn take(stage: &Stage, who: Taker) -> Option<(Ticket, Vec<u8>)> {
        let (mut head, mut body) = (Vec::new(), Vec::new());
        stage.take(who, &mut head, &mut body).unwrap().map(|taken| {
            assert_eq!((taken.delivery, body.len()), (Delivery::Inline, 0));
            (taken.ticket, head)
        })
    }

    #[test]
    fn requests_are_taken_oldest_first_with_their_records() {
        let mut front = front(8);
        let worker = worker_mapping(&front);
        let tickets: Vec<_> = (0..5u8).map(|n| front.put(inline(&[n; 10])).unwrap()).collect();
        for (n, ticket) in tickets.iter().enumerate() {
            let (taken, record) = take(&worker, taker(0, n as u32)).unwrap();
            assert_eq!(taken, *ticket);
            assert_eq!(record, vec![n as u8; 10]);
            front.seen(taken, taker(0, n as u32)).unwrap();
        }
        assert!(take(&worker, taker(0, 0)).is_none());
        assert!(!worker.has_cells());
    }

    #[test]
    fn a_request_too_large_for_an_entry_is_staged_without_its_record() {
        let mut front = front(2);
        let worker = worker_mapping(&front);
        assert!(!front.fits(65));
        let ticket = front.put(Content::Later).unwrap();
        let taken = worker.take(taker(1, 0), &mut Vec::new(), &mut Vec::new()).unwrap().unwrap();
        assert_eq!(taken, Taken { ticket, delivery: Delivery::Later });
    }

    #[test]
    fn a_body_comes_with_its_head_and_a_held_request_with_neither() {
        let mut front = front(2);
        let worker = worker_mapping(&front);
        let posted = front.put(Content::Inline { head: b"head", body: b"body" }).unwrap();
        let held = front.put(Content::Held).unwrap();
        let (mut head, mut body) = (Vec::new(), Vec::new());
        let taken = worker.take(taker(0, 0), &mut head, &mut body).unwrap().unwrap();
        assert_eq!(
            (taken, &head[..], &body[..]),
            (Taken { ticket: posted, delivery: Delivery::Inline }, &b"head"[..], &b"body"[..])
        );
        let taken = worker.take(taker(0, 1), &mut head, &mut body).unwrap().unwrap();
        assert_eq!(taken, Taken { ticket: held, delivery: Delivery::Held });
    }

    #[test]
    fn a_withdrawn_request_is_never_taken_and_a_taken_one_cannot_be_withdrawn() {
        // Withdrawal covers every way the queue ends a wait: the client left, the deadline
        // passed, the controlled delay cut it.
        let mut front = front(8);
        let worker = worker_mapping(&front);
        let first = front.put(inline(b"first")).unwrap();
        let second = front.put(inline(b"second")).unwrap();
        let third = front.put(inline(b"third")).unwrap();
        assert!(front.withdraw(first), "the oldest, past its deadline");
        assert!(front.withdraw(third), "its client left");
        let (taken, record) = take(&worker, taker(0, 0)).unwrap();
        assert_eq!((taken, &record[..]), (second, &b"second"[..]));
        assert!(!front.withdraw(second), "taken first");
        assert!(take(&worker, taker(0, 1)).is_none());
        // The withdrawn entries are free again: the stage holds as many as before.
        front.seen(second, taker(0, 0)).unwrap();
        let again: Vec<_> = (0..8).map(|_| front.put(inline(b"x")).unwrap()).collect();
        assert_eq!(again.len(), 8);
        assert!(front.put(inline(b"x")).is_none(), "every entry in use");
    }

    #[test]
    fn a_worker_killed_after_taking_leaves_its_takes_to_the_front_and_the_rest_to_the_others() {
        let mut front = front(8);
        let tickets: Vec<_> = (0..4u8).map(|n| front.put(inline(&[n]))).collect();
        {
            // Worker 3 takes two requests, then dies before its ring says so: its mapping goes
            // with it.
            let doomed = worker_mapping(&front);
            take(&doomed, taker(3, 0)).unwrap();
            take(&doomed, taker(3, 1)).unwrap();
        }
        let reclaimed = front.reclaim(3);
        assert_eq!(reclaimed, vec![(tickets[0].unwrap(), taker(3, 0)), (tickets[1].unwrap(), taker(3, 1))]);
        assert!(front.seen(tickets[0].unwrap(), taker(3, 0)).is_err(), "already reclaimed");
        let survivor = worker_mapping(&front);
        assert_eq!(take(&survivor, taker(1, 0)).unwrap().0, tickets[2].unwrap());
        assert_eq!(take(&survivor, taker(1, 1)).unwrap().0, tickets[3].unwrap());
        assert!(front.reclaim(1).len() == 2 && front.reclaim(3).is_empty());
    }

    #[test]
    fn a_worker_that_never_takes_holds_nothing_up() {
        let mut front = front(4);
        let _idle = worker_mapping(&front);
        let busy = worker_mapping(&front);
        // Many more requests than entries pass through, with withdrawals among them: the cells
        // of withdrawn requests are passed over, by the takers or by the front when it needs
        // room.
        let mut taken = 0;
        for round in 0..100u32 {
            let ticket = front.put(inline(&round.to_le_bytes())).expect("room after every take");
            if round % 3 == 0 {
                assert!(front.withdraw(ticket));
                continue;
            }
            let (got, record) = take(&busy, taker(2, 0)).unwrap();
            assert_eq!((got, record), (ticket, round.to_le_bytes().to_vec()));
            front.seen(got, taker(2, 0)).unwrap();
            taken += 1;
        }
        assert_eq!(taken, 66);
    }

    #[test]
    fn a_take_the_worker_did_not_make_is_refused() {
        let mut front = front(2);
        let worker = worker_mapping(&front);
        let ticket = front.put(inline(b"a")).unwrap();
        assert!(front.seen(ticket, taker(0, 0)).is_err(), "staged, not taken");
        take(&worker, taker(0, 0)).unwrap();
        assert!(front.seen(ticket, taker(0, 1)).is_err(), "another slot's");
        assert!(front.seen(Ticket { position: ticket.position, entry: 99 }, taker(0, 0)).is_err());
        front.seen(ticket, taker(0, 0)).unwrap();
    }

    #[test]
    fn a_foreign_file_or_a_broken_cell_is_refused() {
        let front = front(2);
        let other = crate::region::Region::create(crate::Layout::new(1, 4096)).unwrap();
        assert!(Stage::attach(other.fd().try_clone_to_owned().unwrap()).is_err());
        let worker = worker_mapping(&front);
        front.stage().cell_word(0).store(7, Ordering::Release); // position 0 naming entry 7 of 2
        front.stage().header().tail.0.store(1, Ordering::Release);
        assert!(worker.take(taker(0, 0), &mut Vec::new(), &mut Vec::new()).is_err());
    }

    #[test]
    fn concurrent_takers_take_each_request_once_and_in_order() {
        const REQUESTS: u32 = 20_000;
        let front = Arc::new(Mutex::new(front(16)));
        let taken = Arc::new(Mutex::new(Vec::new()));
        let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let takers: Vec<_> = (0..4u32)
            .map(|worker| {
                let stage = worker_mapping(&front.lock().unwrap());
                let (front, taken, done) = (front.clone(), taken.clone(), done.clone());
                std::thread::spawn(move || {
                    let mut mine = Vec::new();
                    let (mut record, mut body) = (Vec::new(), Vec::new());
                    let give_up = std::time::Instant::now() + std::time::Duration::from_secs(60);
                    loop {
                        assert!(std::time::Instant::now() < give_up, "the takers never ran out of requests");
                        match stage.take(taker(worker, 0), &mut record, &mut body).unwrap() {
                            Some(got) => {
                                assert_eq!(record, got.ticket.position.to_le_bytes());
                                front.lock().unwrap().seen(got.ticket, taker(worker, 0)).unwrap();
                                mine.push(got.ticket.position);
                            }
                            None if done.load(Ordering::SeqCst) && !stage.has_cells() => break,
                            None => std::thread::yield_now(),
                        }
                    }
                    assert!(mine.windows(2).all(|pair| pair[0] < pair[1]), "each taker's takes in order");
                    taken.lock().unwrap().extend(mine);
                })
            })
            .collect();
        let mut withdrawn = HashSet::new();
        let mut staged = 0;
        while staged < REQUESTS {
            let mut front = front.lock().unwrap();
            let position = front.stage().header().tail.0.load(Ordering::Relaxed) as u32;
            let Some(ticket) = front.put(inline(&position.to_le_bytes())) else {
                drop(front);
                std::thread::yield_now();
                continue;
            };
            staged += 1;
            if staged % 7 == 0 && front.withdraw(ticket) {
                withdrawn.insert(ticket.position);
            }
        }
        done.store(true, Ordering::SeqCst);
        for taker in takers {
            taker.join().unwrap();
        }
        let taken = taken.lock().unwrap();
        let unique: HashSet<_> = taken.iter().copied().collect();
        assert_eq!(unique.len(), taken.len(), "no request taken twice");
        assert!(unique.is_disjoint(&withdrawn), "no withdrawn request taken");
        assert_eq!(taken.len() + withdrawn.len(), REQUESTS as usize, "none lost");
    }
}
