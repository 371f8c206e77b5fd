//! Whether the app's requests wait (on I/O, a lock, a sleep) while they are served, which is
//! what a worker's other threads are for.
//!
//! A thread that claims a request passes a wake-up on while more wait
//! ([`crate::worker::WorkerEnd::claim_waiting`]), so that a burst into an app that blocks gets a
//! thread per request. For an app whose requests never wait, the threads woken that way only
//! queue for what the serving thread holds (the Python worker's GIL) and hand it to each other,
//! a quarter or more of a fast app's CPU in the worker (docs/design/hop.md). So a worker passes
//! wake-ups on only while its app has been seen to wait: each thread looks at one request in
//! [`SAMPLE`] (the first among them), counting the thread's voluntary context switches over it
//! (`getrusage(RUSAGE_THREAD)`, one system call at each end); a request that switched waited.
//! One that waited turns passing on back on at once; [`CALM`] looks in a row that saw none turn
//! it off. A worker starts with it on: its first burst comes before any look. The same record
//! sets how long a worker's spinning thread looks for work before it sleeps (`worker.rs`).

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

/// One request in this many of each thread's is looked at.
const SAMPLE: u32 = 32;
/// Looks in a row whose requests did not wait, over the worker's threads, before its claims stop
/// passing wake-ups on: with [`SAMPLE`], some 500 requests.
const CALM: u32 = 16;

/// A worker's record of whether its app's requests wait, shared by its threads.
pub(crate) struct Waits {
    seen: AtomicBool,
    calm_looks: AtomicU32,
}

/// A thread's look: the voluntary context switches it had made when the request looked at
/// started, while that request is served, and the requests the thread has started.
#[derive(Clone, Copy)]
struct Look {
    switches_before: Option<i64>,
    served: u32,
}

thread_local! {
    static LOOK: Cell<Look> = const { Cell::new(Look { switches_before: None, served: 0 }) };
}

impl Waits {
    pub(crate) fn new() -> Waits {
        Waits { seen: AtomicBool::new(true), calm_looks: AtomicU32::new(0) }
    }

    /// Whether the app's requests have been seen to wait: claims pass wake-ups on, and the
    /// spinning thread looks for work longer, while they do.
    pub(crate) fn seen(&self) -> bool {
        self.seen.load(Ordering::Relaxed)
    }

    /// The calling thread starts serving a request: one in [`SAMPLE`] is looked at.
    pub(crate) fn request_started(&self) {
        LOOK.with(|look| {
            let mut now = look.get();
            if now.served % SAMPLE == 0 {
                now.switches_before = voluntary_switches();
            }
            now.served = now.served.wrapping_add(1);
            look.set(now);
        });
    }

    /// The calling thread is done with the request it started, if it started one.
    pub(crate) fn request_done(&self) {
        LOOK.with(|look| {
            let mut now = look.get();
            let Some(before) = now.switches_before.take() else { return };
            look.set(now);
            let Some(after) = voluntary_switches() else { return };
            if after > before {
                self.calm_looks.store(0, Ordering::Relaxed);
                self.seen.store(true, Ordering::Relaxed);
            } else if self.calm_looks.fetch_add(1, Ordering::Relaxed) + 1 >= CALM {
                self.seen.store(false, Ordering::Relaxed);
            }
        });
    }
}

/// The calling thread's voluntary context switches so far (`None` if the kernel would not say).
fn voluntary_switches() -> Option<i64> {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::uninit();
    // SAFETY: getrusage writes a whole rusage to the pointer on success, which is checked.
    let usage = unsafe {
        if libc::getrusage(libc::RUSAGE_THREAD, usage.as_mut_ptr()) != 0 {
            return None;
        }
        usage.assume_init()
    };
    Some(usage.ru_nvcsw)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn serve(waits: &Waits, requests: u32, wait: Option<Duration>) {
        for _ in 0..requests {
            waits.request_started();
            if let Some(wait) = wait {
                std::thread::sleep(wait);
            }
            waits.request_done();
        }
    }

    #[test]
    fn requests_that_never_wait_turn_passing_on_off_and_one_that_waits_turns_it_back_on() {
        // On a thread of its own: the looks are per thread.
        std::thread::spawn(|| {
            let waits = Waits::new();
            assert!(waits.seen(), "on before any look");
            serve(&waits, SAMPLE * (CALM - 1), None);
            assert!(waits.seen(), "on until CALM looks in a row saw no wait");
            serve(&waits, SAMPLE, None);
            assert!(!waits.seen());
            // The next look is of a request that sleeps.
            serve(&waits, 1, Some(Duration::from_millis(1)));
            assert!(waits.seen());
            // A look that waited starts the count of calm looks again.
            serve(&waits, SAMPLE - 1, None);
            serve(&waits, SAMPLE * (CALM - 1), None);
            assert!(waits.seen());
        })
        .join()
        .unwrap();
    }
}
