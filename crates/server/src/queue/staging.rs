//! The head of the queue in shared memory, for the bundled worker: the oldest waiting requests
//! are staged where the worker processes' threads take them themselves (`headway_hop::stage`).
//!
//! Why. A worker thread that finishes a request takes the next one at once, without waiting for
//! the front to hand it over; on a loaded 2-core machine the front itself may wait half a
//! millisecond for a CPU, and the worker idled meanwhile (docs/benchmarks.md, "Where the last
//! idle share goes"). The queue stays one: every worker takes from the same stage, oldest first,
//! and only into a slot it has free, so no request waits behind the wrong worker and a worker
//! still never holds more requests than it has slots.
//!
//! What stays the queue's. A staged job is still waiting, in its place in the queue: it counts
//! for the depth, the door and the controlled delay, and the queue ends its wait as it ends any
//! other (deadline, client gone, cut by the controlled delay) by withdrawing it from the stage.
//! Withdrawal and take race on one compare-and-swap in shared memory: a job a worker took first
//! is running, and is kept here until its slot reads the take ([`Staging::seen`]). The jobs of a
//! process that died before its takes were read are failed, not lost ([`Staging::reclaim`]).
//!
//! Staged jobs are always the oldest: `waiting[..staged]` are on the stage, the rest wait for
//! room on it.

use std::collections::VecDeque;
use std::io;
use std::os::fd::BorrowedFd;
use std::sync::Arc;

use headway_hop::front::FrontEnd;
use headway_hop::stage::{Content, Delivery, StageFront, StageLayout, Taken, Taker};
use headway_hop::HopError;

use crate::job::{Job, RequestBody, WebSocketHandshake};
use crate::tally::Tally;

/// Requests the stage holds at once: more than a 2-core machine's queue holds under a closed
/// loop of a few hundred clients, at 4 KiB an entry (1 MiB in all).
const ENTRIES: u32 = 256;
/// A request whose head record and body take more than this goes on its slot's ring once taken.
const ENTRY_BYTES: u32 = 4096 - 64;

/// A worker process that takes from the stage, as the queue sees it.
struct TakerProcess {
    end: Arc<FrontEnd>,
    /// The slots of the worker that run a request whose take the front has read.
    busy: Arc<Tally>,
    slots: usize,
}

pub(super) struct Staging {
    front: StageFront,
    /// How many of the oldest waiting jobs are on the stage.
    staged: usize,
    /// Jobs the queue tried to withdraw, which a worker had taken first: running, until their
    /// take is read.
    taken: Vec<Job>,
    /// By worker number: the processes that take now.
    takers: Vec<Option<TakerProcess>>,
    /// A request's head record, encoded here before it is copied into its entry.
    record: Vec<u8>,
    /// The worker number the next wake-up looks at first: among processes equally busy, the
    /// wake-ups go round, so that even one request at a time is spread over the processes.
    rotation: usize,
}

impl Staging {
    pub(super) fn new() -> io::Result<Staging> {
        let front = StageFront::create(StageLayout { entries: ENTRIES, entry_bytes: ENTRY_BYTES })?;
        Ok(Staging { front, staged: 0, taken: Vec::new(), takers: Vec::new(), record: Vec::new(), rotation: 0 })
    }

    pub(super) fn fd(&self) -> BorrowedFd<'_> {
        self.front.stage().fd()
    }

    /// Worker `number`'s new process serves and takes from the stage.
    pub(super) fn attach(&mut self, number: u32, end: Arc<FrontEnd>, busy: Arc<Tally>, slots: usize) {
        let index = number as usize;
        if self.takers.len() <= index {
            self.takers.resize_with(index + 1, || None);
        }
        self.takers[index] = Some(TakerProcess { end, busy, slots });
        self.wake();
    }

    /// Worker `number` takes no more (it is drained, or gone).
    pub(super) fn detach(&mut self, number: u32) {
        if let Some(taker) = self.takers.get_mut(number as usize) {
            *taker = None;
        }
    }

    /// Slots free in the processes that take, as far as the front has read their takes and
    /// ends: that many of the oldest waiting jobs start at once (or have started, their take not
    /// read yet), as if handed to idle slots.
    pub(super) fn free_slots(&self) -> usize {
        self.takers.iter().flatten().map(|taker| taker.slots.saturating_sub(taker.busy.get())).sum()
    }

    /// Stages the waiting jobs after those already staged, oldest first, as far as the stage
    /// has room, and wakes a worker if it staged any.
    pub(super) fn stage_more(&mut self, waiting: &mut VecDeque<Job>) {
        let before = self.staged;
        while let Some(job) = waiting.get_mut(self.staged) {
            let Some(staged) = self.put(job) else { break };
            job.staged = Some(staged);
            self.staged += 1;
        }
        if self.staged > before {
            self.wake();
        }
    }

    /// Puts one job on the stage: whole when it fits an entry, else only its place.
    fn put(&mut self, job: &Job) -> Option<Taken> {
        let (content, delivery) = if job.request.extensions().get::<WebSocketHandshake>().is_some() {
            (Content::Held, Delivery::Held)
        } else {
            match job.request.body() {
                RequestBody::Memory(body) => {
                    crate::job::encode_hop_head(&job.request, &mut self.record);
                    if self.front.fits(self.record.len() + body.len()) {
                        (Content::Inline { head: &self.record, body }, Delivery::Inline)
                    } else {
                        (Content::Later, Delivery::Later)
                    }
                }
                RequestBody::Spooled { .. } => (Content::Later, Delivery::Later),
            }
        };
        Some(Taken { ticket: self.front.put(content)?, delivery })
    }

    /// A job taken out of the waiting line to be refused or dropped: withdrawn from the stage if
    /// it is staged. `None` if a worker took it first: it runs, and is kept until its take is
    /// read.
    pub(super) fn unstage(&mut self, mut job: Job) -> Option<Job> {
        let Some(staged) = job.staged.take() else { return Some(job) };
        self.staged -= 1;
        if self.front.withdraw(staged.ticket) {
            return Some(job);
        }
        job.staged = Some(staged);
        self.taken.push(job);
        None
    }

    /// A slot of worker `taker` read that it took `taken`: checks that it did, and returns the
    /// job, now the slot's.
    pub(super) fn seen(&mut self, waiting: &mut VecDeque<Job>, taken: Taken, taker: Taker) -> Result<Job, HopError> {
        self.front.seen(taken.ticket, taker)?;
        let is_it = |job: &Job| job.staged.is_some_and(|staged| staged.ticket == taken.ticket);
        let job = if let Some(index) = self.taken.iter().position(is_it) {
            self.taken.swap_remove(index)
        } else {
            let index = waiting.iter().take(self.staged).position(is_it);
            let job = index.and_then(|index| waiting.remove(index));
            let job = job.ok_or(HopError::Corrupt("a take of a request the queue did not stage"))?;
            self.staged -= 1;
            job
        };
        if job.staged.map(|staged| staged.delivery) != Some(taken.delivery) {
            return Err(HopError::Corrupt("a take record that says another delivery than staged"));
        }
        // Requests still staged may have been left to this worker's threads, now busier.
        if self.staged > 0 {
            self.wake();
        }
        Ok(job)
    }

    /// Worker `number`'s process is gone: the jobs it took whose take was never read.
    pub(super) fn reclaim(&mut self, waiting: &mut VecDeque<Job>, number: u32) -> Vec<Job> {
        let mut lost = Vec::new();
        for (ticket, _) in self.front.reclaim(number) {
            let is_it = |job: &Job| job.staged.is_some_and(|staged| staged.ticket == ticket);
            if let Some(index) = self.taken.iter().position(is_it) {
                lost.push(self.taken.swap_remove(index));
            } else if let Some(index) = waiting.iter().take(self.staged).position(is_it) {
                lost.extend(waiting.remove(index));
                self.staged -= 1;
            }
        }
        lost
    }

    /// Requests worker `number` took whose take no slot has read yet.
    pub(super) fn unread_takes(&self, number: u32) -> usize {
        self.front.taken_by(number)
    }

    /// A slot finished its request: if requests are staged, a thread of the least busy process
    /// is woken for them, as that process may be this slot's, whose thread went to sleep before
    /// they were staged (while the front still counted its slot busy).
    pub(super) fn slot_finished(&mut self) {
        if self.staged > 0 {
            self.wake();
        }
    }

    /// Wakes a sleeping thread of the least busy process, if it has one: it takes the oldest
    /// staged request. (A thread that finishes a request looks at the stage before it sleeps, so
    /// a busy process needs no waking.) The front counts the takes it has read and the requests
    /// whose end it has read, so it may wake a process whose threads have all just taken, or
    /// pass over one whose thread just finished; it wakes again as it reads those takes
    /// ([`Staging::seen`]) and ends ([`Staging::slot_finished`]), each time the least busy.
    fn wake(&mut self) {
        let count = self.takers.len();
        let least_busy = (0..count)
            .map(|step| (self.rotation + step) % count)
            .filter_map(|number| Some((number, self.takers[number].as_ref()?)))
            .min_by_key(|(_, taker)| taker.busy.get());
        if let Some((number, taker)) = least_busy {
            taker.end.wake_for_stage();
            self.rotation = number + 1;
        }
    }
}

#[cfg(test)]
mod tests {
    //! The queue's rules for staged requests, with worker processes played in this process: each
    //! is a region of its own on the same stage, whose worker end takes as a worker thread would,
    //! and whose front end reads the takes as a slot would.

    use std::time::Duration;

    use bytes::Bytes;
    use headway_hop::message::{decode_request_head, decode_taken, REQUEST_HEAD, TAKEN};
    use headway_hop::worker::WorkerEnd;
    use headway_hop::Layout;

    use super::super::{Queue, Reader, Wait};
    use super::*;
    use crate::job::{Failure, Outcome};

    fn queue(timeout: Duration) -> Arc<Queue> {
        let queue = Queue::new(1000, timeout, 2);
        queue.open_stage().unwrap();
        queue
    }

    fn request(queue: &Arc<Queue>, path: &str) -> Wait {
        queue.enqueue(http::Request::builder().uri(path).body(RequestBody::Memory(Bytes::new())).unwrap())
    }

    /// A worker process with `slots` slots taking from `queue`'s stage as worker `number`.
    struct Process {
        number: u32,
        front: Arc<FrontEnd>,
        worker: WorkerEnd,
        busy: Arc<Tally>,
    }

    impl Process {
        fn start(queue: &Queue, number: u32, slots: u32) -> Process {
            let stage = queue.stage_fd().unwrap().unwrap();
            let front = Arc::new(FrontEnd::staged(Layout::new(slots, 64 * 1024), stage, number).unwrap());
            let worker = WorkerEnd::beside(&front).unwrap();
            let busy = Arc::new(Tally::default());
            queue.taker_ready(number, front.clone(), busy.clone(), slots as usize);
            Process { number, front, worker, busy }
        }

        /// A thread of the worker takes the oldest staged request: its slot and target.
        fn take(&self) -> Option<(usize, String)> {
            let slot = self.worker.try_claim().unwrap()?;
            let mut record = Vec::new();
            assert_eq!(self.worker.slot(slot).pop(&mut record).unwrap(), Some(REQUEST_HEAD));
            let target = String::from_utf8(decode_request_head(&record).unwrap().target.to_vec()).unwrap();
            Some((slot, target))
        }

        /// The front reads the take on `slot`'s ring, as the slot's task does.
        fn read_take(&self, queue: &Queue, slot: usize) -> Result<Job, HopError> {
            let mut record = Vec::new();
            assert_eq!(self.front.slot(slot).pop(&mut record).unwrap(), Some(TAKEN));
            queue.take(decode_taken(&record).unwrap(), Taker { worker: self.number, slot: slot as u32 }, &self.busy)
        }

        /// The worker finishes the request on `slot` (as far as the queue is concerned).
        fn finish(&self, slot: usize) {
            self.worker.slot(slot).release();
            self.busy.down();
        }
    }

    fn path(job: &Job) -> &str {
        job.request.uri().path()
    }

    #[tokio::test]
    async fn every_worker_takes_from_one_line_oldest_first() {
        let queue = queue(Duration::from_secs(10));
        let (one, two) = (Process::start(&queue, 0, 1), Process::start(&queue, 1, 2));
        let _waits: Vec<Wait> = ["/a", "/b", "/c", "/d"].into_iter().map(|path| request(&queue, path)).collect();
        assert_eq!(queue.depth(), 4, "staged requests still wait");
        let (slot_a, a) = two.take().unwrap();
        let (slot_b, b) = one.take().unwrap();
        let (slot_c, c) = two.take().unwrap();
        assert_eq!([&a[..], &b[..], &c[..]], ["/a", "/b", "/c"]);
        assert!(one.take().is_none() && two.take().is_none(), "each worker holds no more than its slots");
        // The front reads the takes in any order; each job goes to the slot that took it.
        assert_eq!(path(&one.read_take(&queue, slot_b).unwrap()), "/b");
        assert_eq!(path(&two.read_take(&queue, slot_c).unwrap()), "/c");
        assert_eq!(path(&two.read_take(&queue, slot_a).unwrap()), "/a");
        assert_eq!((one.busy.get(), two.busy.get(), queue.depth()), (1, 2, 1));
        one.finish(slot_b);
        assert_eq!(one.take().unwrap().1, "/d");
        assert_eq!(queue.snapshot(Reader::Json).dispatched, 3, "/d is taken, not read yet");
    }

    #[tokio::test]
    async fn a_request_whose_client_left_is_never_taken() {
        let queue = queue(Duration::from_secs(10));
        let process = Process::start(&queue, 0, 2);
        let gone = request(&queue, "/gone");
        let _kept = request(&queue, "/kept");
        drop(gone);
        let (slot, path_taken) = process.take().unwrap();
        assert_eq!(path_taken, "/kept");
        assert!(process.take().is_none());
        process.read_take(&queue, slot).unwrap();
        assert_eq!((queue.snapshot(Reader::Json).withdrawn, queue.abandoned_running()), (1, 0));
    }

    #[tokio::test]
    async fn a_client_leaving_after_the_take_leaves_the_job_to_its_slot() {
        let queue = queue(Duration::from_secs(10));
        let process = Process::start(&queue, 0, 1);
        let wait = request(&queue, "/a");
        let (slot, _) = process.take().unwrap();
        drop(wait); // taken first: it runs, and its slot tells the worker the client left
        assert_eq!(queue.abandoned_running(), 1);
        let job = process.read_take(&queue, slot).unwrap();
        assert!(job.reply.is_closed());
        assert_eq!(queue.depth(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_staged_request_not_taken_by_its_deadline_gets_503_and_a_taken_one_runs() {
        let queue = queue(Duration::from_secs(2));
        let process = Process::start(&queue, 0, 1);
        let mut taken = request(&queue, "/taken");
        let mut late = request(&queue, "/late");
        let (slot, _) = process.take().unwrap();
        // The deadline passes before the front reads the take, and before anyone takes /late.
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert!(matches!(late.outcome().await, Outcome::Failed(Failure::QueueTimeout)));
        process.finish(slot);
        assert!(process.take().is_none(), "a shed request is off the stage");
        let job = process.read_take(&queue, slot).unwrap();
        assert_eq!(path(&job), "/taken");
        job.answer(Outcome::Failed(Failure::WorkerTimeout));
        assert!(matches!(taken.outcome().await, Outcome::Failed(Failure::WorkerTimeout)));
        assert_eq!(queue.snapshot(Reader::Json).shed_queue_timeout, 1);
    }

    #[tokio::test]
    async fn a_worker_killed_holding_requests_fails_only_its_own() {
        let queue = queue(Duration::from_secs(10));
        let doomed = Process::start(&queue, 0, 2);
        let survivor = Process::start(&queue, 1, 1);
        let mut read = request(&queue, "/read");
        let mut unread = request(&queue, "/unread");
        let mut other = request(&queue, "/other");
        let (slot, _) = doomed.take().unwrap();
        doomed.take().unwrap();
        // Its slot read one take (and fails that request itself); the other was never read.
        let job = doomed.read_take(&queue, slot).unwrap();
        drop(doomed);
        queue.taker_gone(0);
        job.answer(Outcome::Failed(Failure::WorkerFailed));
        assert!(matches!(read.outcome().await, Outcome::Failed(Failure::WorkerFailed)));
        assert!(matches!(unread.outcome().await, Outcome::Failed(Failure::WorkerFailed)));
        let (slot, taken) = survivor.take().unwrap();
        assert_eq!(taken, "/other");
        survivor.read_take(&queue, slot).unwrap().answer(Outcome::Failed(Failure::WorkerTimeout));
        assert!(matches!(other.outcome().await, Outcome::Failed(Failure::WorkerTimeout)));
    }

    #[tokio::test]
    async fn a_worker_that_never_takes_holds_nobody_up() {
        let queue = queue(Duration::from_secs(10));
        let _idle = Process::start(&queue, 0, 4);
        let busy = Process::start(&queue, 1, 1);
        // More requests than the stage holds: the rest are staged as room frees up, in order.
        let count = ENTRIES as usize + 50;
        let _waits: Vec<Wait> = (0..count).map(|n| request(&queue, &format!("/{n}"))).collect();
        for n in 0..count {
            let (slot, taken) = busy.take().expect("staged in time");
            assert_eq!(taken, format!("/{n}"));
            busy.read_take(&queue, slot).unwrap();
            busy.finish(slot);
        }
        assert_eq!(queue.depth(), 0);
    }

    #[tokio::test]
    async fn a_drained_worker_takes_no_more_and_its_takes_are_counted_until_read() {
        let queue = queue(Duration::from_secs(10));
        let process = Process::start(&queue, 0, 2);
        let _waits: Vec<Wait> = ["/a", "/b"].into_iter().map(|path| request(&queue, path)).collect();
        let (slot, _) = process.take().unwrap();
        queue.taker_stopped(0);
        process.front.stop_taking();
        assert!(!process.front.takes_in_flight());
        assert!(process.take().is_none(), "stopped");
        assert_eq!(queue.unread_takes(0), 1);
        process.read_take(&queue, slot).unwrap();
        assert_eq!((queue.unread_takes(0), queue.depth()), (0, 1));
    }

    #[tokio::test]
    async fn a_take_the_worker_did_not_make_is_refused() {
        let queue = queue(Duration::from_secs(10));
        let honest = Process::start(&queue, 0, 1);
        let liar = Process::start(&queue, 1, 1);
        let _wait = request(&queue, "/a");
        let (slot, _) = honest.take().unwrap();
        let mut record = Vec::new();
        assert_eq!(honest.front.slot(slot).pop(&mut record).unwrap(), Some(TAKEN));
        let taken = decode_taken(&record).unwrap();
        assert!(queue.take(taken, Taker { worker: 1, slot: 0 }, &liar.busy).is_err());
        assert_eq!(liar.busy.get(), 0);
        assert_eq!(path(&queue.take(taken, Taker { worker: 0, slot: slot as u32 }, &honest.busy).unwrap()), "/a");
    }
}
