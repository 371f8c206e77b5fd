//! The front's side of one bundled worker process's shared-memory region (see the `headway_hop`
//! crate): made before the process starts, handed to it, and dropped when it is replaced.
//!
//! One task per region watches the doorbell the worker rings when the front sleeps, and wakes the
//! slots whose rings moved; each slot's exchange over its rings is in `slot::hop`.

use std::future::poll_fn;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use atomic_waker::AtomicWaker;
use headway_hop::front::{FrontEnd, FrontSlot, Seen};
use headway_hop::Layout;
use tokio::io::unix::AsyncFd;
use tokio::task::JoinHandle;

/// Bytes of each ring, each way, of every slot. A body larger than a ring goes through it in
/// records of a quarter of it, each time the ring fills or empties costing a wake-up of the side
/// that waits; a large upload took less CPU with rings of 256 KiB than of 64 KiB, and larger
/// rings gained nothing measurable (docs/design/speed.md has the figures). What it costs: every ring is touched in time
/// (records go round it), so a worker's region is resident in both processes, 2 x 256 KiB a slot
/// (5 MiB for 2 workers of 5 slots; docs/design/speed.md).
pub const RING_BYTES: usize = 256 * 1024;

/// The front's side of one worker process's region.
pub struct HopLink {
    /// The worker generation (process) the region belongs to.
    pub generation: u64,
    end: Arc<FrontEnd>,
    /// Per slot: told when the slot's rings moved, and when the process exited.
    news: Arc<Vec<News>>,
    /// The task that watches the doorbell; stopped with the link.
    watcher: JoinHandle<()>,
    /// The process has exited: nothing more will come through the region.
    gone: AtomicBool,
}

/// The worker process of a link has exited.
#[derive(Debug)]
pub struct Gone;

/// That a slot's rings moved, for the one task that serves the slot: a flag and that task's
/// waker. Every response passes through it; a `Notify` (a lock and a list of waiters to join and
/// leave at each wait) would cost some 2 % of a cheap request's instructions in the front, for a
/// channel that never has more than one waiter.
#[derive(Default)]
struct News {
    moved: AtomicBool,
    waker: AtomicWaker,
}

impl News {
    fn tell(&self) {
        self.moved.store(true, Ordering::Release);
        self.waker.wake();
    }

    /// Ready once told since the last time it was ready.
    fn poll_told(&self, cx: &mut Context<'_>) -> Poll<()> {
        if self.moved.swap(false, Ordering::Acquire) {
            return Poll::Ready(());
        }
        self.waker.register(cx.waker());
        // Told between the look and the registration: the tell found no waker to wake.
        if self.moved.swap(false, Ordering::Acquire) {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}

impl HopLink {
    /// A region for a worker process with `slots` slots about to start; its rings hold a request
    /// head of up to `max_head` bytes, and at least [`RING_BYTES`].
    pub fn prepare(slots: usize, max_head: usize) -> io::Result<Arc<FrontEnd>> {
        let layout = Layout::new(slots as u32, (2 * max_head).max(RING_BYTES));
        Ok(Arc::new(FrontEnd::new(layout)?))
    }

    /// Waits until the worker process has attached and serves (its first ring of the doorbell).
    pub async fn until_ready(doorbell: &AsyncFd<Arc<FrontEnd>>) -> io::Result<()> {
        loop {
            let mut guard = doorbell.readable().await?;
            doorbell.get_ref().doorbell().drain();
            guard.clear_ready();
            if doorbell.get_ref().is_worker_ready() {
                return Ok(());
            }
        }
    }

    /// Starts watching the doorbell of a worker process that is ready.
    pub fn start(doorbell: AsyncFd<Arc<FrontEnd>>, generation: u64) -> Arc<HopLink> {
        let end = doorbell.get_ref().clone();
        let news: Arc<Vec<News>> = Arc::new((0..end.slots()).map(|_| News::default()).collect());
        let watcher = tokio::spawn(watch_doorbell(doorbell, news.clone()));
        Arc::new(HopLink { generation, end, news, watcher, gone: AtomicBool::new(false) })
    }

    /// The process exited: every exchange still waiting on it fails.
    pub fn mark_gone(&self) {
        self.gone.store(true, Ordering::SeqCst);
        // Woken, not told: the slot's task reads `gone` once it finds its rings unmoved.
        self.news.iter().for_each(|news| news.waker.wake());
    }

    /// Slot `index`'s rings.
    pub fn slot(&self, index: usize) -> FrontSlot<'_> {
        self.end.slot(index)
    }

    /// Resolves when slot `index`'s rings move (or moved since the last time it resolved), or
    /// fails once the process has exited. Only the task that serves the slot waits on it.
    pub async fn moved(&self, index: usize) -> Result<(), Gone> {
        poll_fn(|cx| {
            if self.news[index].poll_told(cx).is_ready() {
                return Poll::Ready(Ok(()));
            }
            if self.gone.load(Ordering::SeqCst) {
                return Poll::Ready(Err(Gone));
            }
            Poll::Pending
        })
        .await
    }
}

impl Drop for HopLink {
    fn drop(&mut self) {
        self.watcher.abort();
    }
}

/// Wakes the slots whose rings moved, sleeping on the doorbell when none did.
///
/// The front says it sleeps ([`FrontEnd::arm`]) only before its last look, and takes it back
/// once awake: while it is awake and handing news on, a worker's response does not ring the
/// doorbell (an `eventfd` write in the worker, a read and a wake-up of the runtime in the front,
/// for news this task finds at its next look anyway). docs/design/front-cost.md has the counts.
async fn watch_doorbell(doorbell: AsyncFd<Arc<FrontEnd>>, news: Arc<Vec<News>>) {
    let end = doorbell.get_ref().clone();
    let mut seen = vec![Seen::default(); end.slots()];
    loop {
        if hand_on(&end, &mut seen, &news) {
            // Let the slots run before looking again.
            tokio::task::yield_now().await;
            continue;
        }
        // Say we sleep before the last look, so that a response written after it rings.
        end.arm();
        if hand_on(&end, &mut seen, &news) {
            end.disarm();
            tokio::task::yield_now().await;
            continue;
        }
        let Ok(mut guard) = doorbell.readable().await else { return };
        // Drained, although every ring is an edge of its own for tokio's edge-triggered
        // registration: undrained, it saves a few system calls a request but widens mixed-tail's
        // fast p99, for a reason not found (slot::tests::hop's stress test sees no lost
        // wake-up). The figures: docs/design/hop.md, "The front's doorbell".
        end.doorbell().drain();
        guard.clear_ready();
        // Awake: a ring that took the arming has cleared it, and any other wake-up leaves it to clear.
        end.disarm();
    }
}

/// Wakes the slots whose rings moved since `seen`; returns whether any did.
fn hand_on(end: &FrontEnd, seen: &mut [Seen], news: &[News]) -> bool {
    let mut moved = false;
    for index in end.news(seen) {
        news[index].tell();
        moved = true;
    }
    moved
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use headway_hop::message::{BODY, RESPONSE_HEAD};
    use headway_hop::worker::WorkerEnd;
    use tokio::io::Interest;

    use super::*;

    /// A link with `slots` slots to a worker end made beside it, ready, its watcher started.
    async fn started(slots: usize) -> (Arc<HopLink>, WorkerEnd) {
        let end = HopLink::prepare(slots, 8192).unwrap();
        let worker = WorkerEnd::beside(&end).unwrap();
        worker.announce_ready(false);
        // SAFETY: the doorbell belongs to `end`, which the AsyncFd owns.
        let doorbell = unsafe { AsyncFd::register_with_interest(end, Interest::READABLE) }.unwrap();
        HopLink::until_ready(&doorbell).await.unwrap();
        (HopLink::start(doorbell, 1), worker)
    }

    /// The worker rings the doorbell only for a front that sleeps: once the watcher is awake and
    /// handing news on, a response on another ring of the worker's finds it unarmed.
    #[tokio::test]
    async fn a_front_awake_for_news_is_not_rung_for_more() {
        let (link, worker) = started(1).await;
        let slot = worker.slot(0);
        // The watcher goes to sleep, and the first response wakes it.
        tokio::task::yield_now().await;
        assert!(slot.push(RESPONSE_HEAD, &[b"head"]).unwrap());
        slot.pushed();
        tokio::time::timeout(Duration::from_secs(5), link.moved(0))
            .await
            .expect("woken by the first response")
            .unwrap();

        assert!(slot.push(BODY, &[b"body"]).unwrap());
        slot.pushed();
        assert!(!link.end.doorbell().drain(), "the doorbell rang for a front that is awake");
        tokio::time::timeout(Duration::from_secs(5), link.moved(0))
            .await
            .expect("the second response is seen")
            .unwrap();
    }

    /// A slot waiting on a process that exits is woken and hears it; a slot whose rings moved
    /// before hears that first.
    #[tokio::test]
    async fn a_process_gone_ends_a_wait_after_what_it_wrote() {
        let (link, _worker) = started(2).await;
        let waiting = tokio::spawn({
            let link = link.clone();
            async move { link.moved(0).await }
        });
        tokio::task::yield_now().await;
        // Slot 1's rings moved just before the process went (as the watcher tells it).
        link.news[1].tell();
        link.mark_gone();
        let woken = tokio::time::timeout(Duration::from_secs(5), waiting).await.expect("the waiting slot is woken");
        assert!(matches!(woken.unwrap(), Err(Gone)), "the slot hears the process went");
        assert!(link.moved(1).await.is_ok(), "what the worker wrote before it went is read first");
        assert!(matches!(link.moved(1).await, Err(Gone)), "then that it went");
    }
}
