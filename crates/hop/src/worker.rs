//! The worker's end of its region.
//!
//! Any of the worker's threads may serve any slot: a thread that finishes a request looks for a
//! published one ([`WorkerEnd::try_claim`]) and goes on with it while it still holds whatever it
//! holds (the GIL, for the Python worker), so under load one thread serves request after request
//! without sleeping or handing anything over. Only a thread that finds nothing sleeps
//! ([`WorkerEnd::wait_for_work`]), on a futex the front wakes when it publishes.
//!
//! While the app's requests have been seen to wait (`waits.rs`), a thread that claims passes
//! a wake-up on while more requests wait ([`WorkerEnd::claim_waiting`]), so the other threads
//! hold requests claimed ahead: a burst into a worker whose app blocks gets a thread per request.
//! An app whose requests never wait gets no wake-ups passed on, since the threads they would wake
//! only queue for what the serving thread holds. The other ways measured against this one (no
//! second thread woken while one serves, claiming only with the GIL in hand, one thread standing
//! by for the GIL, wake-ups always or never passed on) and why each was left: docs/design/hop.md,
//! "How a worker's threads take requests".
//!
//! The waits here block the calling thread: a Python worker calls them with the GIL released.

use std::fs::File;
use std::os::fd::{FromRawFd, OwnedFd};
use std::sync::atomic::{fence, AtomicBool, Ordering};
use std::time::Duration;

use crate::descriptors::DESCRIPTORS;
use crate::error::HopError;
use crate::files::FileInbox;
use crate::front::FrontEnd;
use crate::message::BodyFile;
use crate::region::{
    Header, Region, SlotView, CLAIMED, IDLE, PUBLISHED, READY, READY_FOR_WEBSOCKETS, WAITS_ON_BELL, WAITS_ON_FUTEX,
};
use crate::waits::Waits;
use crate::wake::{futex_wait, futex_wake, Doorbell};

/// The environment variable through which the front names the descriptors it passed down:
/// `REGION_FD,DOORBELL_FD,WORK_BELL_FD,FILES_FD`.
pub const ENV: &str = "HEADWAY_HOP";

/// The longest a worker thread sleeps at once: waits are woken by the front, and this only
/// bounds how long a missed wake-up (there should be none) could cost.
const NAP: Duration = Duration::from_secs(1);
/// How long the one spinning thread looks for work before it sleeps, while the app's requests
/// are seen to wait (`waits.rs`). Under load the front publishes the next request within
/// microseconds of reading a response, and a thread that catches it awake saves a wake-up on both
/// sides; when there is no load, this is all it costs.
const SPIN_WHILE_WAITING: Duration = Duration::from_micros(50);
/// The same while the app's requests do not wait. Then the worker's CPU is the serving thread's,
/// and each of the spinner's yields on a busy machine hands the CPU to another thread (the
/// front, the load, the serving thread) and takes it back, a context switch each way, while the
/// publication worth catching awake is the one that follows a response within microseconds
/// (docs/design/hop.md, "How long the spinning thread looks").
const SPIN_WHILE_CALM: Duration = Duration::from_micros(10);

/// The worker's end of its region: its threads claim published requests, read them from the
/// slots' request rings and write the responses into their response rings.
pub struct WorkerEnd {
    region: Region,
    doorbell: Doorbell,
    /// Rung by the front for an event loop that waits for requests ([`WorkerEnd::arm_loop`]).
    work_bell: Doorbell,
    /// Request bodies' files ([`crate::files`]).
    files: FileInbox,
    /// Set by [`WorkerEnd::stop`]: threads take no more requests.
    stopped: AtomicBool,
    /// Whether the app's requests wait: while they do, claims pass wake-ups on and the spinning
    /// thread looks longer.
    waits: Waits,
}

impl WorkerEnd {
    /// The worker's end of a region, from the descriptors [`FrontEnd::descriptors`] gives.
    pub fn attach([region, doorbell, work_bell, files]: [OwnedFd; DESCRIPTORS]) -> Result<WorkerEnd, HopError> {
        Ok(WorkerEnd {
            region: Region::attach(region)?,
            doorbell: Doorbell::from_fd(doorbell),
            work_bell: Doorbell::from_fd(work_bell),
            files: FileInbox::new(files),
            stopped: AtomicBool::new(false),
            waits: Waits::new(),
        })
    }

    /// The worker's end of `front`'s region, in the same process: for tests and tools that play
    /// both sides.
    pub fn beside(front: &FrontEnd) -> Result<WorkerEnd, HopError> {
        WorkerEnd::attach(front.clone_descriptors()?)
    }

    /// The region and doorbell named by [`ENV`], if the front passed them.
    ///
    /// # Safety
    /// The descriptors named there must be open and owned by nobody else in this process (the
    /// front passed them down and nothing else took them): they are closed with the result.
    pub unsafe fn from_env() -> Result<Option<WorkerEnd>, HopError> {
        let Ok(value) = std::env::var(ENV) else { return Ok(None) };
        let fds: Vec<i32> = value.split(',').filter_map(|fd| fd.trim().parse().ok()).collect();
        let Ok(fds) = <[i32; DESCRIPTORS]>::try_from(fds) else {
            return Err(HopError::Corrupt("HEADWAY_HOP is not REGION_FD,DOORBELL_FD,WORK_BELL_FD,FILES_FD"));
        };
        // SAFETY: the caller vouches that the descriptors are ours to own.
        WorkerEnd::attach(fds.map(|fd| unsafe { OwnedFd::from_raw_fd(fd) })).map(Some)
    }

    /// How many slots the region has.
    pub fn slots(&self) -> usize {
        self.region.layout().slots as usize
    }

    /// Tells the front the worker serves, and whether it takes WebSocket handshakes on its
    /// socket (an ASGI app does; the front cannot know before the worker has imported it).
    pub fn announce_ready(&self, takes_websockets: bool) {
        let ready = if takes_websockets { READY_FOR_WEBSOCKETS } else { READY };
        self.region.header().ready.0.store(ready, Ordering::SeqCst);
        self.doorbell.ring();
    }

    /// The eventfd an event loop watches for requests, rung by the front after
    /// [`WorkerEnd::arm_loop`]; drain it when it wakes the loop.
    pub fn work_bell(&self) -> &Doorbell {
        &self.work_bell
    }

    /// An event loop serves the slots (an ASGI worker): besides publications, the front rings
    /// the work bell when it marks a client gone (see [`WorkerSlot::arm_for_request`] and
    /// [`WorkerSlot::arm_for_space`] for the rest).
    pub fn serve_from_loop(&self) {
        self.header().loop_serves.0.store(1, Ordering::SeqCst);
    }

    /// The event loop has room for a request and found none published: the front rings the
    /// work bell with its next publication. Look for one once more after this, before the loop
    /// sleeps.
    pub fn arm_loop(&self) {
        self.header().loop_waiting.0.store(1, Ordering::SeqCst);
        fence(Ordering::SeqCst);
    }

    /// Sleeps until [`WorkerEnd::stop`] is called.
    pub fn wait_for_stop(&self) {
        let word = &self.header().work_seq.0;
        while !self.is_stopped() {
            // Not counted as a sleeper: only the stop (which wakes every sleeper) wakes this.
            futex_wait(word, word.load(Ordering::SeqCst), Some(NAP));
        }
    }

    /// Takes a published request, if there is one: its slot is this thread's until
    /// [`WorkerSlot::release`].
    pub fn try_claim(&self) -> Option<usize> {
        (0..self.slots()).find(|&index| {
            let (control, _, _) = self.region.slot(index);
            control.state.0.load(Ordering::Relaxed) == PUBLISHED
                && control.state.0.compare_exchange(PUBLISHED, CLAIMED, Ordering::AcqRel, Ordering::Relaxed).is_ok()
        })
    }

    /// Claims the next published request, waiting while there is none; `None` once
    /// [`WorkerEnd::stop`] was called and no request is left published. If there is none at
    /// once, the waiting and the claim that ends it run inside `detached` (a Python worker runs
    /// them without the GIL): a thread takes the GIL back only with a request to run, so threads
    /// that find nothing never contend for it with the one that runs. A thread calls it again
    /// when it is done with the request it returned: that span is the request's service, which
    /// `waits.rs` looks at now and then.
    pub fn claim_waiting(
        &self,
        detached: impl FnOnce(&(dyn Fn() -> Option<usize> + Sync)) -> Option<usize>,
    ) -> Option<usize> {
        self.waits.request_done();
        let claimed = self.claim().or_else(|| {
            detached(&|| loop {
                if let Some(index) = self.claim() {
                    return Some(index);
                }
                if self.is_stopped() {
                    return None;
                }
                if !self.spin_for_work() {
                    self.wait_for_work(Some(NAP));
                }
            })
        });
        if claimed.is_some() {
            self.waits.request_started();
        }
        claimed
    }

    /// [`WorkerEnd::try_claim`], then passes a wake-up on if more requests wait and the app's
    /// requests have been seen to wait ([`crate::waits`]).
    fn claim(&self) -> Option<usize> {
        let index = self.try_claim()?;
        if self.waits.seen() {
            self.hand_on();
        }
        Some(index)
    }

    /// Looks for a published request for a short while without sleeping, if no other thread
    /// does; returns whether one appeared (claim it then). Yields the CPU between looks, so on a
    /// busy machine the front, which publishes, gets to run.
    fn spin_for_work(&self) -> bool {
        let spinning = &self.header().spinning.0;
        if spinning.compare_exchange(0, 1, Ordering::SeqCst, Ordering::Relaxed).is_err() {
            return false;
        }
        let spin = if self.waits.seen() { SPIN_WHILE_WAITING } else { SPIN_WHILE_CALM };
        let until = std::time::Instant::now() + spin;
        let mut found = false;
        while !found && !self.is_stopped() && std::time::Instant::now() < until {
            std::thread::yield_now();
            found = self.any_published();
        }
        spinning.store(0, Ordering::SeqCst);
        found
    }

    /// After a claim: if more requests wait, wakes a sleeping thread unless one spins or is being
    /// woken. The front wakes nobody while a thread spins or is on its way, so the thread that
    /// claims passes the wake-up on.
    fn hand_on(&self) {
        // The header's words first: under load they settle it without a look at every slot.
        let header = self.header();
        if header.needs_waking() && self.any_published() {
            header.wake_a_sleeper();
        }
    }

    fn any_published(&self) -> bool {
        (0..self.slots()).any(|index| self.region.slot(index).0.state.0.load(Ordering::SeqCst) == PUBLISHED)
    }

    /// Sleeps until the front publishes a request (or `timeout`); call after
    /// [`WorkerEnd::try_claim`] found nothing, and claim again after.
    pub fn wait_for_work(&self, timeout: Option<Duration>) {
        let header = self.header();
        let seen = header.work_seq.0.load(Ordering::SeqCst);
        header.sleepers.0.fetch_add(1, Ordering::SeqCst);
        // Published between the failed claim and the count above: the front may not have seen
        // this thread as a sleeper, so look once more before sleeping.
        if !self.any_published() && !self.is_stopped() {
            futex_wait(&header.work_seq.0, seen, timeout);
        }
        header.sleepers.0.fetch_sub(1, Ordering::SeqCst);
        header.woke();
    }

    /// Stops taking requests: threads in [`WorkerEnd::claim_waiting`] return (those serving a
    /// request finish it first).
    pub fn stop(&self) {
        self.stopped.store(true, Ordering::SeqCst);
        let header = self.header();
        header.work_seq.0.fetch_add(1, Ordering::SeqCst);
        futex_wake(&header.work_seq.0, u32::MAX);
    }

    /// Whether [`WorkerEnd::stop`] was called.
    pub fn is_stopped(&self) -> bool {
        self.stopped.load(Ordering::SeqCst)
    }

    /// The worker's side of slot `index`, which the calling thread claimed.
    pub fn slot(&self, index: usize) -> WorkerSlot<'_> {
        WorkerSlot { view: self.region.view(index), doorbell: &self.doorbell, files: &self.files }
    }

    fn header(&self) -> &Header {
        self.region.header()
    }
}

/// A worker thread's view of the slot it claimed.
pub struct WorkerSlot<'a> {
    view: SlotView<'a>,
    doorbell: &'a Doorbell,
    files: &'a FileInbox,
}

impl WorkerSlot<'_> {
    /// The largest record payload the rings carry.
    pub fn max_payload(&self) -> usize {
        self.view.response.max_payload()
    }

    /// The payload of a response body's records ([`crate::ring::Ring::body_record`]).
    pub fn body_record(&self) -> usize {
        self.view.response.body_record()
    }

    /// Whether the front has said that the client of the request under way has gone.
    pub fn is_client_gone(&self) -> bool {
        self.view.client_gone.0.load(Ordering::SeqCst) != 0
    }

    /// Where the front's writing of the request stands: pass it to
    /// [`WorkerSlot::wait_for_request`] after a pop that found nothing.
    pub fn request_tail(&self) -> u32 {
        self.view.request.tail()
    }

    /// Takes the next request record, if the front has written it; tells a front that waits for
    /// space that there is some.
    pub fn pop(&self, payload: &mut Vec<u8>) -> Result<Option<u8>, HopError> {
        let kind = self.view.request.try_pop(payload)?;
        if kind.is_some() && self.view.request.half_free() {
            fence(Ordering::SeqCst);
            if self.view.request.control.producer_waiting.0.swap(0, Ordering::SeqCst) != 0 {
                self.doorbell.ring();
            }
        }
        Ok(kind)
    }

    /// The file a [`crate::message::BODY_FILE`] record names, and which of its bytes are the
    /// body's.
    pub fn body_file(&self, record: &[u8]) -> Result<(File, BodyFile), HopError> {
        let named = BodyFile::decode(record)?;
        Ok((File::from(self.files.take(named.token)?), named))
    }

    /// Takes the next request record, sleeping until the front writes it. The sleep goes
    /// through `sleep`, which runs the blocking wait it is given (a Python worker releases the
    /// GIL around it).
    pub fn pop_waiting(
        &self,
        payload: &mut Vec<u8>,
        mut sleep: impl FnMut(&(dyn Fn() + Sync)),
    ) -> Result<u8, HopError> {
        loop {
            let tail = self.request_tail();
            if let Some(kind) = self.pop(payload)? {
                return Ok(kind);
            }
            sleep(&|| self.wait_for_request(tail, Some(NAP)));
        }
    }

    /// Writes a response record, sleeping (through `sleep`) until the front has read enough for
    /// it to fit; then rings the doorbell if the front sleeps.
    pub fn push_waiting(
        &self,
        kind: u8,
        parts: &[&[u8]],
        mut sleep: impl FnMut(&(dyn Fn() + Sync)),
    ) -> Result<(), HopError> {
        loop {
            let head = self.response_head();
            if self.push(kind, parts)? {
                self.pushed();
                return Ok(());
            }
            sleep(&|| self.wait_for_space(head, Some(NAP)));
        }
    }

    /// Sleeps until the front writes past `tail` (or `timeout`).
    pub fn wait_for_request(&self, tail: u32, timeout: Option<Duration>) {
        let control = self.view.request.control;
        control.consumer_waiting.0.store(WAITS_ON_FUTEX, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        if self.view.request.tail() == tail {
            futex_wait(&control.tail.0, tail, timeout);
        }
        control.consumer_waiting.0.store(0, Ordering::Relaxed);
    }

    /// Where the front's reading of the response stands: pass it to
    /// [`WorkerSlot::wait_for_space`] after a push that did not fit.
    pub fn response_head(&self) -> u32 {
        self.view.response.head()
    }

    /// Writes a response record. `Ok(false)`: the ring is full for now.
    pub fn push(&self, kind: u8, parts: &[&[u8]]) -> Result<bool, HopError> {
        self.view.response.try_push(kind, parts)
    }

    /// An event loop found no request record after `tail`: the front rings the work bell when
    /// it writes one. Returns false if it already has (pop again at once, the loop must not
    /// wait).
    pub fn arm_for_request(&self, tail: u32) -> bool {
        self.view.request.control.consumer_waiting.0.store(WAITS_ON_BELL, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        self.view.request.tail() == tail
    }

    /// An event loop's response record did not fit after the front had read to `head`: the front
    /// rings the work bell when it reads more. Returns false if it already has (push again at
    /// once).
    pub fn arm_for_space(&self, head: u32) -> bool {
        self.view.response.control.producer_waiting.0.store(WAITS_ON_BELL, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        self.view.response.head() == head
    }

    /// Sleeps until the front reads past `head` (or `timeout`).
    pub fn wait_for_space(&self, head: u32, timeout: Option<Duration>) {
        let control = self.view.response.control;
        control.producer_waiting.0.store(WAITS_ON_FUTEX, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        if self.view.response.head() == head {
            futex_wait(&control.head.0, head, timeout);
        }
    }

    /// After pushing response records: rings the doorbell if the front sleeps.
    pub fn pushed(&self) {
        fence(Ordering::SeqCst);
        if self.view.header.front_waiting.0.swap(0, Ordering::SeqCst) != 0 {
            self.doorbell.ring();
        }
    }

    /// Gives the slot back before the response's last record: once the front has read that
    /// record it may publish the next request here at once.
    pub fn release(&self) {
        self.view.state.0.store(IDLE, Ordering::SeqCst);
    }
}
