//! Waking the other side, and only when it sleeps.
//!
//! A worker thread sleeps on a futex: a 32-bit word of the shared region that the kernel can wait
//! on across processes (not the private kind, which works only within one process). The front
//! sleeps in its event loop, which cannot wait on a futex, so the worker wakes it through an
//! eventfd the front watches: the [`Doorbell`]. Both are used the same way: the sleeper first
//! says it is about to sleep (a flag or a counter in shared memory), checks once more for work,
//! then sleeps; the other side, after publishing work, wakes it only if that flag says so. Under
//! load neither sleeps, and no system call is made.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::sync::atomic::AtomicU32;
use std::time::Duration;

/// Sleeps while `word` still holds `expected`, at most `timeout`. Returns early, spuriously or
/// because the word changed or a waker called [`futex_wake`]: callers re-check their condition.
pub fn futex_wait(word: &AtomicU32, expected: u32, timeout: Option<Duration>) {
    let spec = timeout.map(|timeout| libc::timespec {
        tv_sec: timeout.as_secs().min(i64::MAX as u64) as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    });
    let spec_ptr = spec.as_ref().map_or(std::ptr::null(), |spec| spec as *const libc::timespec);
    // SAFETY: FUTEX_WAIT on a valid, aligned 32-bit word that lives as long as the call; EAGAIN
    // (value changed), EINTR and ETIMEDOUT all mean "look again", as the contract says.
    unsafe {
        libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAIT, expected, spec_ptr, 0usize, 0u32);
    }
}

/// Wakes up to `count` threads (of any process) sleeping on `word`; returns how many it woke.
pub fn futex_wake(word: &AtomicU32, count: u32) -> usize {
    // SAFETY: FUTEX_WAKE on a valid, aligned word; it only reads the address.
    let woken = unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAKE,
            count.min(i32::MAX as u32),
            0usize,
            0usize,
            0u32,
        )
    };
    // A failure (-1) woke nobody.
    usize::try_from(woken).unwrap_or(0)
}

/// An eventfd: the worker rings it, the front's event loop wakes when it is readable.
pub struct Doorbell(OwnedFd);

impl Doorbell {
    /// A new eventfd, non-blocking, closed on exec.
    pub fn new() -> io::Result<Doorbell> {
        // SAFETY: eventfd with valid flags; the result is checked.
        let raw = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a new descriptor that nothing else owns.
        Ok(Doorbell(unsafe { OwnedFd::from_raw_fd(raw) }))
    }

    /// The doorbell of a descriptor the front passed down.
    pub fn from_fd(fd: OwnedFd) -> Doorbell {
        Doorbell(fd)
    }

    /// Makes the eventfd readable, waking whoever watches it.
    pub fn ring(&self) {
        let one = 1u64.to_ne_bytes();
        // SAFETY: an 8-byte write to an eventfd. It fails only if the counter would overflow,
        // which means the front has not read it in 2^64 rings: it is awake enough.
        unsafe {
            libc::write(self.0.as_raw_fd(), one.as_ptr() as *const libc::c_void, one.len());
        }
    }

    /// Clears the doorbell. Returns whether it had rung.
    pub fn drain(&self) -> bool {
        let mut count = [0u8; 8];
        // SAFETY: an 8-byte read from a non-blocking eventfd; EAGAIN means it had not rung.
        let read = unsafe { libc::read(self.0.as_raw_fd(), count.as_mut_ptr() as *mut libc::c_void, count.len()) };
        read == 8
    }
}

impl AsFd for Doorbell {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.0.as_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;
    use std::sync::Arc;
    use std::time::Instant;

    #[test]
    fn a_sleeper_wakes_when_the_word_changes() {
        let word = Arc::new(AtomicU32::new(0));
        let sleeper = std::thread::spawn({
            let word = word.clone();
            move || {
                while word.load(Ordering::Acquire) == 0 {
                    futex_wait(&word, 0, Some(Duration::from_secs(10)));
                }
            }
        });
        std::thread::sleep(Duration::from_millis(20));
        word.store(1, Ordering::Release);
        futex_wake(&word, 1);
        let started = Instant::now();
        sleeper.join().unwrap();
        assert!(started.elapsed() < Duration::from_secs(5), "woken by the wake, not the timeout");
    }

    #[test]
    fn a_doorbell_rings_once_until_drained() {
        let bell = Doorbell::new().unwrap();
        assert!(!bell.drain());
        bell.ring();
        bell.ring();
        assert!(bell.drain());
        assert!(!bell.drain());
    }
}
