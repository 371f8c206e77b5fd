//! The front's end of one worker process's region.
//!
//! For each slot the front writes a request into the request ring and publishes it, then reads
//! the response from the response ring. It sleeps only in its event loop, on the [`Doorbell`];
//! the worker rings it when the front said it sleeps ([`FrontEnd::arm`]) and a response arrived,
//! or when request space the front waits for was freed. Which slot had news is found by
//! comparing each slot's positions with those the front last saw ([`FrontEnd::news`]).

use std::io::{self, IoSlice};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::sync::atomic::{fence, AtomicU64, Ordering};

use crate::descriptors::DESCRIPTORS;
use crate::error::HopError;
use crate::files::FileSender;
use crate::line::Line;
use crate::message::{BodyFile, BODY, BODY_FILE};
use crate::region::{Layout, Region, SlotView, IDLE, PUBLISHED, READY_FOR_WEBSOCKETS, WAITS_ON_BELL, WAITS_ON_FUTEX};
use crate::wake::{futex_wake, Doorbell};

/// The front's end of one worker process's region: it publishes requests into the slots' request
/// rings and reads responses from their response rings, and sleeps on its [`Doorbell`].
pub struct FrontEnd {
    region: Region,
    doorbell: Doorbell,
    /// Rung for a worker whose event loop waits for requests (it cannot sleep on a futex).
    work_bell: Doorbell,
    /// Where request bodies' files go ([`crate::files`]), and the worker's end of it.
    files: FileSender,
    worker_files: OwnedFd,
    /// The token of the next file sent.
    next_file: AtomicU64,
}

/// Where a slot's rings stood when the front last looked: news is a change.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Seen {
    response_tail: u32,
    request_head: u32,
}

impl FrontEnd {
    /// A region and a doorbell for a worker process about to start.
    pub fn new(layout: Layout) -> io::Result<FrontEnd> {
        let (files, worker_files) = crate::files::pair()?;
        Ok(FrontEnd {
            region: Region::create(layout)?,
            doorbell: Doorbell::new()?,
            work_bell: Doorbell::new()?,
            files: FileSender::new(files),
            worker_files,
            next_file: AtomicU64::new(0),
        })
    }

    /// What the worker process inherits, in the order [`crate::worker::ENV`] names them: the
    /// region, the doorbell, the work bell and the socket request bodies' files come on.
    pub fn descriptors(&self) -> [BorrowedFd<'_>; DESCRIPTORS] {
        [self.region.fd(), self.doorbell.as_fd(), self.work_bell.as_fd(), self.worker_files.as_fd()]
    }

    /// [`FrontEnd::descriptors`], duplicated: for a worker that does not inherit them.
    pub fn clone_descriptors(&self) -> io::Result<[OwnedFd; DESCRIPTORS]> {
        let [region, doorbell, work_bell, files] = self.descriptors().map(|fd| fd.try_clone_to_owned());
        Ok([region?, doorbell?, work_bell?, files?])
    }

    /// What the worker rings when the front sleeps and a response arrived.
    pub fn doorbell(&self) -> &Doorbell {
        &self.doorbell
    }

    /// How many slots the region has.
    pub fn slots(&self) -> usize {
        self.region.layout().slots as usize
    }

    /// Whether the worker has attached and its threads serve.
    pub fn is_worker_ready(&self) -> bool {
        self.region.header().ready.0.load(Ordering::Acquire) != 0
    }

    /// Whether the worker, once ready, said it takes WebSocket handshakes on its socket.
    pub fn worker_takes_websockets(&self) -> bool {
        self.region.header().ready.0.load(Ordering::Acquire) == READY_FOR_WEBSOCKETS
    }

    /// The front's side of slot `index`.
    pub fn slot(&self, index: usize) -> FrontSlot<'_> {
        FrontSlot { view: self.region.view(index), end: self }
    }

    /// The front is going to sleep on the doorbell: the worker rings it after its next response.
    /// Look for news once more after this, before sleeping.
    pub fn arm(&self) {
        self.region.header().front_waiting.0.store(1, Ordering::SeqCst);
        fence(Ordering::SeqCst);
    }

    /// The front is awake and will look for news anyway: the worker need not ring.
    pub fn disarm(&self) {
        self.region.header().front_waiting.0.store(0, Ordering::Relaxed);
    }

    /// The slots whose rings moved since `seen` (one entry per slot), which is brought up to date.
    pub fn news<'s>(&'s self, seen: &'s mut [Seen]) -> impl Iterator<Item = usize> + 's {
        seen.iter_mut().enumerate().filter_map(move |(index, seen)| {
            let slot = self.slot(index);
            let now = Seen { response_tail: slot.view.response.tail(), request_head: slot.view.request.head() };
            (std::mem::replace(seen, now) != now).then_some(index)
        })
    }
}

impl AsFd for FrontEnd {
    /// The doorbell's descriptor: what the front's event loop waits on.
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.doorbell.as_fd()
    }
}

impl AsRawFd for FrontEnd {
    fn as_raw_fd(&self) -> RawFd {
        self.doorbell.as_fd().as_raw_fd()
    }
}

/// The front's view of one slot, and of the region's end it belongs to.
pub struct FrontSlot<'a> {
    view: SlotView<'a>,
    end: &'a FrontEnd,
}

impl FrontSlot<'_> {
    /// Whether the worker is done with the last request published here.
    pub fn is_idle(&self) -> bool {
        self.view.state.0.load(Ordering::Acquire) == IDLE
    }

    /// The largest record payload the rings carry.
    pub fn max_payload(&self) -> usize {
        self.view.request.max_payload()
    }

    /// The payload of a request body's records ([`crate::ring::Ring::body_record`]).
    pub fn body_record(&self) -> usize {
        self.view.request.body_record()
    }

    /// Where the worker's reading of the request ring stands: pass it to [`FrontSlot::want_space`]
    /// after a push that did not fit.
    pub fn request_head(&self) -> u32 {
        self.view.request.head()
    }

    /// Writes a request record. `Ok(false)`: the ring is full for now.
    pub fn push(&self, kind: u8, parts: &[&[u8]]) -> Result<bool, HopError> {
        self.view.request.try_push(kind, parts)
    }

    /// Hands the worker the rest of the request body as the file `file`, `len` bytes from `offset`
    /// on ([`crate::files`]). `Ok(false)`: the ring is full for now, and nothing was sent. An
    /// error from the socket (full, or the worker gone) leaves the body to go through the ring.
    pub fn push_file(&self, file: BorrowedFd<'_>, offset: u64, len: u64) -> Result<bool, HopError> {
        if !self.view.request.fits(BodyFile::ENCODED)? {
            return Ok(false);
        }
        let token = self.end.next_file.fetch_add(1, Ordering::Relaxed);
        let record = BodyFile { token, offset, len }.encode();
        self.end.files.send(token, file)?;
        // Only the front writes this ring, and it had room: the record goes on.
        let pushed = self.view.request.try_push(BODY_FILE, &[&record])?;
        debug_assert!(pushed);
        Ok(pushed)
    }

    /// Hands the request whose head was just pushed to the worker, waking a sleeping thread, or
    /// the event loop that waits for it.
    pub fn publish(&self) {
        let header = self.view.header;
        self.view.client_gone.0.store(0, Ordering::SeqCst);
        self.view.state.0.store(PUBLISHED, Ordering::SeqCst);
        header.work_seq.0.fetch_add(1, Ordering::SeqCst);
        header.wake_a_sleeper();
        // A load first: most publications find no loop waiting, and a swap would write the line.
        if header.loop_waiting.0.load(Ordering::SeqCst) != 0 && header.loop_waiting.0.swap(0, Ordering::SeqCst) != 0 {
            self.end.work_bell.ring();
        }
    }

    /// The client of the request under way has gone: a worker's event loop is rung, so that an
    /// app waiting to hear of it (ASGI's `http.disconnect`) does; a thread of a worker without
    /// one sees the mark when it next sends.
    pub fn client_gone(&self) {
        self.view.client_gone.0.store(1, Ordering::SeqCst);
        if self.view.header.loop_serves.0.load(Ordering::SeqCst) != 0 {
            self.end.work_bell.ring();
        }
    }

    /// After pushing more of a body: wakes the worker if it waits for it.
    pub fn pushed(&self) {
        fence(Ordering::SeqCst);
        let control = self.view.request.control;
        self.wake(&control.consumer_waiting, &control.tail);
    }

    /// Wakes whoever `waiting` says waits: a thread on the futex `word`, or the event loop.
    fn wake(&self, waiting: &Line, word: &Line) {
        match waiting.0.swap(0, Ordering::SeqCst) {
            WAITS_ON_FUTEX => {
                futex_wake(&word.0, 1);
            }
            WAITS_ON_BELL => self.end.work_bell.ring(),
            _ => {}
        }
    }

    /// A push did not fit: asks the worker to ring the doorbell when it frees request space.
    /// Returns false if it already has since `head` was read (push again at once).
    pub fn want_space(&self, head: u32) -> bool {
        self.view.request.control.producer_waiting.0.store(WAITS_ON_FUTEX, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        self.view.request.head() == head
    }

    /// Takes the next response record, if one is there, into `payload`; frees its space for a
    /// worker thread that waits for it.
    pub fn pop(&self, payload: &mut Vec<u8>) -> Result<Option<u8>, HopError> {
        self.pop_run(payload, None, |_| 0)
    }

    /// Like [`FrontSlot::pop`], but a run of body records is first shown in place to `through`,
    /// and only what it did not use is copied ([`crate::ring::Ring::try_pop_through`]).
    pub fn pop_through(
        &self,
        payload: &mut Vec<u8>,
        through: impl FnOnce(&[IoSlice<'_>]) -> usize,
    ) -> Result<Option<u8>, HopError> {
        self.pop_run(payload, Some(BODY), through)
    }

    fn pop_run(
        &self,
        payload: &mut Vec<u8>,
        run_of: Option<u8>,
        through: impl FnOnce(&[IoSlice<'_>]) -> usize,
    ) -> Result<Option<u8>, HopError> {
        let kind = self.view.response.try_pop_through(payload, run_of, through)?;
        if kind.is_some() && self.view.response.half_free() {
            fence(Ordering::SeqCst);
            let control = self.view.response.control;
            self.wake(&control.producer_waiting, &control.head);
        }
        Ok(kind)
    }
}
