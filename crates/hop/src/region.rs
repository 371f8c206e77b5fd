//! The shared memory of one worker process: a header, then a block per slot holding the control
//! words of the slot and the bytes of its two rings.
//!
//! The front creates a region for each worker process it starts (a `memfd`, so it has no name
//! in the file system and goes away with the last process that maps it) and hands the worker
//! its file descriptor. Every word both sides change is an atomic in the mapping; each one a
//! side writes often sits on a cache line of its own, so the two processes do not slow each
//! other down by writing next to each other.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::atomic::Ordering;

use crate::error::HopError;
use crate::line::Line;
use crate::ring::{Ring, RingControl};
use crate::wake::futex_wake;

/// "HEADWAY" and the layout version, first in the region: a worker of another version refuses
/// to attach rather than misreading the layout.
const MAGIC: u64 = 0x4845_4144_5741_5906;
const HEADER_SIZE: usize = 4096;
/// Control words of a slot, before its ring bytes.
const SLOT_CONTROL_SIZE: usize = std::mem::size_of::<SlotControl>();
/// The smallest and largest ring sizes accepted.
const MIN_CAPACITY: u32 = 4096;
const MAX_CAPACITY: u32 = 1 << 28;

/// How a region is divided: `slots` blocks, each with two rings of `ring_capacity` bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// How many slots: requests the worker process serves at once.
    pub slots: u32,
    /// The bytes of each ring, a power of two.
    pub ring_capacity: u32,
}

impl Layout {
    /// `slots` slots whose rings hold at least `min_ring_bytes` each (rounded up to a power of
    /// two, so positions wrap with a mask).
    pub fn new(slots: u32, min_ring_bytes: usize) -> Layout {
        let capacity = (min_ring_bytes.clamp(MIN_CAPACITY as usize, MAX_CAPACITY as usize)).next_power_of_two();
        Layout { slots, ring_capacity: capacity as u32 }
    }

    fn slot_stride(&self) -> usize {
        (SLOT_CONTROL_SIZE + 2 * self.ring_capacity as usize).next_multiple_of(4096)
    }

    /// The bytes of the whole region.
    pub fn size(&self) -> usize {
        HEADER_SIZE + self.slots as usize * self.slot_stride()
    }
}

/// The start of the region.
#[repr(C)]
pub(crate) struct Header {
    magic: u64,
    slots: u32,
    ring_capacity: u32,
    /// [`READY`] or [`READY_FOR_WEBSOCKETS`] once the worker's threads serve.
    pub ready: Line,
    /// Bumped each time the front publishes a request: the futex word idle worker threads
    /// sleep on.
    pub work_seq: Line,
    /// Worker threads asleep (or about to be) on `work_seq`.
    pub sleepers: Line,
    /// 1 while a worker thread spins, looking for work without sleeping: the front need not wake
    /// anyone then.
    pub spinning: Line,
    /// 1 from a wake-up on `work_seq` until a woken thread is back at work: it claims a request
    /// and passes a wake-up on if more wait, so a burst of publications costs one wake-up at a
    /// time, not one each (every wake-up is a system call on the side that makes it, the front's
    /// busiest cost when the worker's threads keep falling asleep).
    pub waking: Line,
    /// 1 while the worker's event loop (an ASGI worker's) has room for a request and found none
    /// published: the front rings the work bell with its next publication, and only then.
    pub loop_waiting: Line,
    /// 1 while the front is asleep (or about to be) on the doorbell: the worker rings it after
    /// writing a response, and only then.
    pub front_waiting: Line,
    /// 1 when an event loop serves the slots (an ASGI worker's): it hears of a client gone
    /// through the work bell, as it hears of everything else.
    pub loop_serves: Line,
}

impl Header {
    /// Whether a request just published needs a sleeping worker thread woken: none spins (a
    /// spinning thread will find it), none is being woken (it will pass a wake-up on), and one
    /// sleeps.
    pub fn needs_waking(&self) -> bool {
        self.spinning.0.load(Ordering::SeqCst) == 0
            && self.waking.0.load(Ordering::SeqCst) == 0
            && self.sleepers.0.load(Ordering::SeqCst) > 0
    }

    /// Wakes one sleeping worker thread for a request just published, if one needs waking (see
    /// [`Header::needs_waking`]).
    pub fn wake_a_sleeper(&self) {
        if self.needs_waking() && self.waking.0.swap(1, Ordering::SeqCst) == 0 && futex_wake(&self.work_seq.0, 1) == 0 {
            // The sleeper counted had already woken: nobody is on the way.
            self.waking.0.store(0, Ordering::SeqCst);
        }
    }

    /// A worker thread is awake again (woken or not): a later publication may wake another.
    pub fn woke(&self) {
        self.waking.0.store(0, Ordering::SeqCst);
    }
}

/// A thread of the worker sleeps on the ring's futex word; or the front sleeps on its doorbell.
pub(crate) const WAITS_ON_FUTEX: u32 = 1;
/// The worker's event loop waits: it watches the work bell, and cannot sleep on a futex.
pub(crate) const WAITS_ON_BELL: u32 = 2;

/// The control words of one slot.
#[repr(C)]
pub(crate) struct SlotControl {
    /// [`IDLE`], [`PUBLISHED`] (a request waits for a worker thread) or [`CLAIMED`].
    pub state: Line,
    /// 1 once the client of the request under way has gone; cleared when the next is published.
    pub client_gone: Line,
    pub request: RingControl,
    pub response: RingControl,
}

/// The worker serves.
pub(crate) const READY: u32 = 1;
/// The worker serves, and takes WebSocket handshakes on its socket.
pub(crate) const READY_FOR_WEBSOCKETS: u32 = 2;

pub(crate) const IDLE: u32 = 0;
pub(crate) const PUBLISHED: u32 = 1;
pub(crate) const CLAIMED: u32 = 2;

const _: () = assert!(std::mem::size_of::<Header>() <= HEADER_SIZE);

/// A mapped region.
pub struct Region {
    base: NonNull<u8>,
    layout: Layout,
    fd: OwnedFd,
}

// SAFETY: the mapping is shared memory accessed only through atomics (control words) and
// through byte copies into ring space that the ring protocol gives to one side at a time.
unsafe impl Send for Region {}
unsafe impl Sync for Region {}

impl Region {
    /// A new zeroed region for `layout` (zero is the idle state of every word).
    pub fn create(layout: Layout) -> io::Result<Region> {
        // The system call, not glibc's wrapper: glibc has it only from 2.27, and the wheel and
        // the binary promise to run on glibc 2.17 (manylinux2014); the kernel has had it since
        // 3.17.
        // SAFETY: memfd_create with a valid C string; the result is checked.
        let raw = unsafe { libc::syscall(libc::SYS_memfd_create, c"headway-hop".as_ptr(), libc::MFD_CLOEXEC) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a new descriptor (an int, as the kernel returns it) that nothing else
        // owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw as libc::c_int) };
        // SAFETY: ftruncate on our descriptor.
        if unsafe { libc::ftruncate(fd.as_raw_fd(), layout.size() as libc::off_t) } != 0 {
            return Err(io::Error::last_os_error());
        }
        let region = Region::map(fd, layout)?;
        // SAFETY: the header is at the start of a mapping at least HEADER_SIZE long, and the
        // worker has not been given the region yet.
        unsafe {
            let header = region.base.as_ptr() as *mut Header;
            (*header).magic = MAGIC;
            (*header).slots = layout.slots;
            (*header).ring_capacity = layout.ring_capacity;
        }
        Ok(region)
    }

    /// Maps a region the front created and checks that its layout is one this code reads.
    pub fn attach(fd: OwnedFd) -> Result<Region, HopError> {
        // SAFETY: fstat into a zeroed stat buffer.
        let mut stat: libc::stat = unsafe { std::mem::zeroed() };
        if unsafe { libc::fstat(fd.as_raw_fd(), &mut stat) } != 0 {
            return Err(io::Error::last_os_error().into());
        }
        let size = stat.st_size as usize;
        if size < HEADER_SIZE {
            return Err(HopError::Corrupt("the region is smaller than its header"));
        }
        // The plain fields of the header were written before the descriptor was passed on.
        let mut fields = [0u8; 16];
        // SAFETY: pread into a buffer of the given length.
        let read = unsafe { libc::pread(fd.as_raw_fd(), fields.as_mut_ptr() as *mut libc::c_void, fields.len(), 0) };
        if read != fields.len() as isize {
            return Err(HopError::Corrupt("the region's header cannot be read"));
        }
        let magic = u64::from_ne_bytes(fields[..8].try_into().expect("8 bytes"));
        let slots = u32::from_ne_bytes(fields[8..12].try_into().expect("4 bytes"));
        let capacity = u32::from_ne_bytes(fields[12..].try_into().expect("4 bytes"));
        if magic != MAGIC {
            return Err(HopError::Corrupt("not a headway region of this version"));
        }
        let layout = Layout { slots, ring_capacity: capacity };
        if !capacity.is_power_of_two() || !(MIN_CAPACITY..=MAX_CAPACITY).contains(&capacity) || layout.size() != size {
            return Err(HopError::Corrupt("the region's layout does not match its size"));
        }
        Ok(Region::map(fd, layout)?)
    }

    fn map(fd: OwnedFd, layout: Layout) -> io::Result<Region> {
        let len = layout.size();
        // SAFETY: a fresh shared mapping of our descriptor; the result is checked.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let base = NonNull::new(base as *mut u8).ok_or_else(|| io::Error::other("mmap returned null"))?;
        Ok(Region { base, layout, fd })
    }

    /// How the region is divided.
    pub fn layout(&self) -> Layout {
        self.layout
    }

    /// The descriptor to hand to the worker process.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    pub(crate) fn header(&self) -> &Header {
        // SAFETY: the header is at the start of the mapping, which lives as long as `self`.
        unsafe { &*(self.base.as_ptr() as *const Header) }
    }

    /// Slot `index`: its control words and the start of its request and response ring bytes.
    pub(crate) fn slot(&self, index: usize) -> (&SlotControl, NonNull<u8>, NonNull<u8>) {
        assert!(index < self.layout.slots as usize, "slot {index} of {}", self.layout.slots);
        let offset = HEADER_SIZE + index * self.layout.slot_stride();
        // SAFETY: `offset` and the ring spaces after it lie inside the mapping (checked above
        // against the layout the mapping was made for).
        unsafe {
            let block = self.base.as_ptr().add(offset);
            let control = &*(block as *const SlotControl);
            let request = NonNull::new_unchecked(block.add(SLOT_CONTROL_SIZE));
            let response = NonNull::new_unchecked(block.add(SLOT_CONTROL_SIZE + self.layout.ring_capacity as usize));
            (control, request, response)
        }
    }
}

/// One slot as either side sees it: its state word and its two rings.
pub(crate) struct SlotView<'a> {
    pub header: &'a Header,
    pub state: &'a Line,
    pub client_gone: &'a Line,
    pub request: Ring<'a>,
    pub response: Ring<'a>,
}

impl Region {
    pub(crate) fn view(&self, index: usize) -> SlotView<'_> {
        let (control, request, response) = self.slot(index);
        let capacity = self.layout.ring_capacity;
        SlotView {
            header: self.header(),
            state: &control.state,
            client_gone: &control.client_gone,
            request: Ring::new(&control.request, request, capacity),
            response: Ring::new(&control.response, response, capacity),
        }
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly what `map` mapped; no reference into it outlives `self`.
        unsafe {
            libc::munmap(self.base.as_ptr() as *mut libc::c_void, self.layout.size());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;

    #[test]
    fn a_second_mapping_sees_the_same_words() {
        let front = Region::create(Layout::new(3, 10_000)).unwrap();
        assert_eq!(front.layout().ring_capacity, 16384);
        let worker = Region::attach(front.fd().try_clone_to_owned().unwrap()).unwrap();
        assert_eq!(worker.layout(), front.layout());
        front.slot(2).0.state.0.store(PUBLISHED, Ordering::Release);
        assert_eq!(worker.slot(2).0.state.0.load(Ordering::Acquire), PUBLISHED);
        assert_eq!(worker.slot(1).0.state.0.load(Ordering::Acquire), IDLE);
    }

    #[test]
    fn a_foreign_file_is_refused() {
        let file = tempfile_with(&[7u8; 8192]);
        assert!(matches!(Region::attach(file), Err(HopError::Corrupt(_))));
    }

    fn tempfile_with(bytes: &[u8]) -> OwnedFd {
        use std::io::Write as _;
        // SAFETY: memfd_create with a valid C string; checked.
        let raw = unsafe { libc::memfd_create(c"test".as_ptr(), libc::MFD_CLOEXEC) };
        assert!(raw >= 0);
        let mut file = unsafe { std::fs::File::from_raw_fd(raw) };
        file.write_all(bytes).unwrap();
        file.into()
    }
}
