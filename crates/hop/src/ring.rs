//! One direction of a slot: a single-producer single-consumer ring of records in shared memory.
//!
//! A record is an 8-byte header (payload length, kind) and its payload, written at the
//! producer's `tail` and made visible all at once by advancing `tail` (release); the consumer
//! reads at its `head` and frees the space by advancing `head`. Positions are wrapping byte
//! counts; the capacity is a power of two, so a position's place in the ring is a mask away, and
//! a record may wrap around the end (it is copied in two pieces).
//!
//! The other side may be broken or hostile, so every position and length read from the shared
//! words is checked before it is used: at worst the exchange fails with
//! [`HopError::Corrupt`].

use std::io::IoSlice;
use std::ptr::NonNull;
use std::sync::atomic::Ordering;

use crate::error::HopError;
use crate::line::Line;

/// The control words of one direction of a slot.
#[repr(C)]
#[derive(Default)]
pub(crate) struct RingControl {
    /// Bytes written so far (a wrapping count), advanced by the producer only.
    pub tail: Line,
    /// Bytes read so far, advanced by the consumer only; the futex word a producer waiting for
    /// space sleeps on.
    pub head: Line,
    /// Set by a producer that waits for space, cleared by the consumer that wakes it: how to
    /// wake it ([`crate::region::WAITS_ON_FUTEX`] or [`crate::region::WAITS_ON_BELL`]).
    pub producer_waiting: Line,
    /// Set by a consumer that waits for bytes, cleared by the producer that wakes it, as above.
    pub consumer_waiting: Line,
}

/// Bytes before each record's payload: its length (u32) and its kind (u32, of which one byte
/// is used).
pub const RECORD_HEADER: usize = 8;

/// The most records [`Ring::try_pop_through`] shows at once: a ring's worth of a body's records
/// ([`Ring::body_record`]), and more.
pub const MAX_RUN: usize = 16;

/// A view of one ring, from either side.
#[derive(Clone, Copy)]
pub struct Ring<'a> {
    pub(crate) control: &'a RingControl,
    data: NonNull<u8>,
    capacity: u32,
}

// SAFETY: a ring is a view of memory that another process changes concurrently anyway: its
// words are atomics, and its bytes are copied only as the ring protocol allows (one producer and
// one consumer at a time), which holds between threads as it does between processes.
unsafe impl Send for Ring<'_> {}
unsafe impl Sync for Ring<'_> {}

impl<'a> Ring<'a> {
    pub(crate) fn new(control: &'a RingControl, data: NonNull<u8>, capacity: u32) -> Ring<'a> {
        Ring { control, data, capacity }
    }

    /// The largest payload one record can carry.
    pub fn max_payload(&self) -> usize {
        self.capacity as usize - RECORD_HEADER
    }

    /// The payload of a body's records: a quarter of the ring, so that the producer writes the
    /// next records while the consumer copies out the last. (A record the size of the ring
    /// would make the two take turns, each waiting for the other's copy.)
    pub fn body_record(&self) -> usize {
        self.capacity as usize / 4 - RECORD_HEADER
    }

    /// Bytes written and not yet read.
    fn used(&self, tail: u32, head: u32) -> Result<u32, HopError> {
        let used = tail.wrapping_sub(head);
        if used > self.capacity {
            return Err(HopError::Corrupt("ring positions out of range"));
        }
        Ok(used)
    }

    /// Producer: writes a record made of `parts` if it fits now. `Ok(false)`: not enough space
    /// yet (the consumer has not read enough); see [`Ring::fits`].
    pub fn try_push(&self, kind: u8, parts: &[&[u8]]) -> Result<bool, HopError> {
        let len: usize = parts.iter().map(|part| part.len()).sum();
        if !self.fits(len)? {
            return Ok(false);
        }
        let tail = self.control.tail.0.load(Ordering::Relaxed);
        let mut header = [0u8; RECORD_HEADER];
        header[..4].copy_from_slice(&(len as u32).to_le_bytes());
        header[4] = kind;
        let mut at = tail;
        self.write_at(at, &header);
        at = at.wrapping_add(RECORD_HEADER as u32);
        for part in parts {
            self.write_at(at, part);
            at = at.wrapping_add(part.len() as u32);
        }
        self.control.tail.0.store(at, Ordering::Release);
        Ok(true)
    }

    /// Producer: whether a record of `len` payload bytes fits now (and so until the producer
    /// itself writes: the consumer only frees space). A payload larger than
    /// [`Ring::max_payload`] is a bug of the caller and panics.
    pub(crate) fn fits(&self, len: usize) -> Result<bool, HopError> {
        assert!(len <= self.max_payload(), "a record of {len} bytes does not fit a ring of {}", self.capacity);
        let tail = self.control.tail.0.load(Ordering::Relaxed);
        let head = self.control.head.0.load(Ordering::Acquire);
        let free = self.capacity - self.used(tail, head)?;
        Ok((RECORD_HEADER + len) as u32 <= free)
    }

    /// Consumer: takes the next record if there is one, its payload replacing `payload`'s
    /// contents (copied once, straight into the vector's spare capacity: zeroing a record first,
    /// as a safe copy needs, would cost as much again). Returns its kind.
    pub fn try_pop(&self, payload: &mut Vec<u8>) -> Result<Option<u8>, HopError> {
        self.try_pop_through(payload, None, |_| 0)
    }

    /// Like [`Ring::try_pop`], but when the next record is of the kind `run_of` names, it is
    /// shown where it lies to `through`, with the records of that kind right behind it (a run, of
    /// up to [`MAX_RUN`]): their payloads as slices, two for one that wraps. `through` says how
    /// many of the run's first bytes it used (a body written to a socket from here is never
    /// copied).
    /// Records it used whole are taken; so is the record its use ended in (or the first, if it
    /// used nothing), whose unused rest is copied into `payload`; the records after stay.
    /// Returns the kind of the records taken.
    pub fn try_pop_through(
        &self,
        payload: &mut Vec<u8>,
        run_of: Option<u8>,
        through: impl FnOnce(&[IoSlice<'_>]) -> usize,
    ) -> Result<Option<u8>, HopError> {
        let head = self.control.head.0.load(Ordering::Relaxed);
        let tail = self.control.tail.0.load(Ordering::Acquire);
        self.used(tail, head)?;
        // Where each record of the run starts, and its length; on the stack, as this is every
        // record's path.
        let mut run = [(0u32, 0usize); MAX_RUN];
        let mut records = 0;
        let mut kind = None;
        let mut at = head;
        while at != tail && records < MAX_RUN {
            let (this, len) = self.record_at(at, tail)?;
            if kind.is_some_and(|kind| kind != this) {
                break;
            }
            kind = Some(this);
            let start = at.wrapping_add(RECORD_HEADER as u32);
            run[records] = (start, len);
            records += 1;
            at = start.wrapping_add(len as u32);
            if Some(this) != run_of {
                break;
            }
        }
        let Some(kind) = kind else { return Ok(None) };
        let run = &run[..records];
        let mut left = if Some(kind) == run_of {
            let mut slices = [IoSlice::new(&[]); 2 * MAX_RUN];
            for (pair, &(start, len)) in slices.chunks_exact_mut(2).zip(run) {
                pair.copy_from_slice(&self.published(start, len));
            }
            through(&slices[..2 * records])
        } else {
            0
        };
        payload.clear();
        let mut next_head = head;
        for &(start, len) in run {
            let used = left.min(len);
            left -= used;
            next_head = start.wrapping_add(len as u32);
            if used < len {
                let rest = len - used;
                payload.reserve(rest);
                // SAFETY: `rest` bytes were reserved and published; once copied, they are
                // initialised.
                unsafe {
                    self.read_at(start.wrapping_add(used as u32), payload.as_mut_ptr(), rest);
                    payload.set_len(rest);
                }
                break;
            }
            if left == 0 {
                break;
            }
        }
        self.control.head.0.store(next_head, Ordering::Release);
        Ok(Some(kind))
    }

    /// The kind and payload length of the record published at `at`, checked against `tail`.
    fn record_at(&self, at: u32, tail: u32) -> Result<(u8, usize), HopError> {
        let published = tail.wrapping_sub(at) as usize;
        if published < RECORD_HEADER {
            return Err(HopError::Corrupt("a partial record header"));
        }
        let mut header = [0u8; RECORD_HEADER];
        // SAFETY: the header's 8 bytes, published (checked just above).
        unsafe { self.read_at(at, header.as_mut_ptr(), RECORD_HEADER) };
        let len = u32::from_le_bytes(header[..4].try_into().expect("4 bytes")) as usize;
        if len > published - RECORD_HEADER {
            return Err(HopError::Corrupt("a record longer than what was written"));
        }
        Ok((header[4], len))
    }

    /// Whether at least half the ring is free: a consumer wakes a producer waiting for space only
    /// then, so that a body streaming through wakes it once every few records, not for each.
    /// (A ring read to its end is always half free, so a producer is never left waiting.)
    pub(crate) fn half_free(&self) -> bool {
        let used =
            self.control.tail.0.load(Ordering::Acquire).wrapping_sub(self.control.head.0.load(Ordering::Relaxed));
        used <= self.capacity / 2
    }

    /// Whether a record waits for the consumer.
    pub fn has_data(&self) -> bool {
        self.control.tail.0.load(Ordering::Acquire) != self.control.head.0.load(Ordering::Relaxed)
    }

    /// The producer's position (what a consumer waiting for bytes sleeps on).
    pub(crate) fn tail(&self) -> u32 {
        self.control.tail.0.load(Ordering::Acquire)
    }

    /// The consumer's position (what a producer waiting for space sleeps on).
    pub(crate) fn head(&self) -> u32 {
        self.control.head.0.load(Ordering::Acquire)
    }

    fn write_at(&self, position: u32, bytes: &[u8]) {
        let offset = (position & (self.capacity - 1)) as usize;
        let first = bytes.len().min(self.capacity as usize - offset);
        // SAFETY: `offset + first <= capacity` and `bytes.len() - first < capacity`: both copies
        // land inside the ring, in space the consumer has released (checked by the caller).
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.data.as_ptr().add(offset), first);
            std::ptr::copy_nonoverlapping(bytes.as_ptr().add(first), self.data.as_ptr(), bytes.len() - first);
        }
    }

    /// The `len` bytes published at `position`, where they lie: one slice, or two when they wrap.
    fn published(&self, position: u32, len: usize) -> [IoSlice<'_>; 2] {
        let offset = (position & (self.capacity - 1)) as usize;
        let first = len.min(self.capacity as usize - offset);
        // SAFETY: both ranges lie inside the ring, in bytes the producer has published and will
        // not touch until the consumer moves `head` past them (after the slices are gone). A
        // hostile producer writing them anyway changes what is sent, as it could by writing
        // other bytes in the first place; the memory stays mapped while the ring is borrowed.
        unsafe {
            [
                IoSlice::new(std::slice::from_raw_parts(self.data.as_ptr().add(offset), first)),
                IoSlice::new(std::slice::from_raw_parts(self.data.as_ptr(), len - first)),
            ]
        }
    }

    /// Copies the `len` bytes published at `position` to `out`.
    ///
    /// # Safety
    /// `out` must be valid for writes of `len` bytes, and `len` at most the capacity.
    unsafe fn read_at(&self, position: u32, out: *mut u8, len: usize) {
        let offset = (position & (self.capacity - 1)) as usize;
        let first = len.min(self.capacity as usize - offset);
        // SAFETY: as in `write_at`, both copies come from inside the ring; `out` has room.
        unsafe {
            std::ptr::copy_nonoverlapping(self.data.as_ptr().add(offset), out, first);
            std::ptr::copy_nonoverlapping(self.data.as_ptr(), out.add(first), len - first);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::cell::UnsafeCell;
    use std::ptr::NonNull;

    use super::{Ring, RingControl};

    /// A ring's control words and 4096 bytes in this process's memory, as a region holds them.
    struct Memory {
        control: RingControl,
        data: Box<UnsafeCell<[u64; 512]>>,
    }

    impl Memory {
        fn new() -> Memory {
            Memory { control: RingControl::default(), data: Box::new(UnsafeCell::new([0; 512])) }
        }

        fn ring(&self) -> Ring<'_> {
            Ring::new(&self.control, NonNull::new(self.data.get().cast::<u8>()).unwrap(), 4096)
        }
    }

    #[test]
    fn records_come_out_whole_and_in_order_across_the_wrap() {
        let memory = Memory::new();
        let ring = memory.ring();
        let mut payload = Vec::new();
        // 3000-byte records: the second and later ones wrap around the 4096-byte ring.
        for round in 0..10u8 {
            let body = vec![round; 2000];
            assert!(ring.try_push(round, &[&body, &[round; 1000]]).unwrap());
            assert!(!ring.try_push(99, &[&[0; 2000]]).unwrap(), "no room for a second one");
            assert_eq!(ring.try_pop(&mut payload).unwrap(), Some(round));
            assert_eq!(payload.len(), 3000);
            assert!(payload.iter().all(|&b| b == round));
        }
        assert_eq!(ring.try_pop(&mut payload).unwrap(), None);
        assert!(!ring.has_data());
    }

    #[test]
    fn a_run_of_records_is_shown_in_place_and_only_what_was_not_used_is_copied() {
        const BODY: u8 = 1;
        let memory = Memory::new();
        let ring = memory.ring();
        let mut payload = Vec::new();
        // Each case: how much of a run of three 900-byte records is used, what is copied out, and
        // how many of the run stay on the ring.
        let cases = [(0, 0..900, 2), (900, 0..0, 2), (1300, 400..900, 1), (2700, 0..0, 0), (5000, 0..0, 0)];
        for (round, (used, copied, staying)) in cases.into_iter().enumerate() {
            // Records of 0..250 counting on from where the last ended: runs wrap the ring.
            let run: Vec<u8> = (0..2700u32).map(|i| ((i + round as u32 * 7) % 251) as u8).collect();
            for record in run.chunks(900) {
                assert!(ring.try_push(BODY, &[record]).unwrap());
            }
            assert!(ring.try_push(2, &[b"after the run"]).unwrap());
            let kind = ring
                .try_pop_through(&mut payload, Some(BODY), |parts| {
                    let shown: Vec<u8> = parts.iter().flat_map(|part| part.iter().copied()).collect();
                    assert_eq!(shown, run, "the run as it lies, in order across the wrap");
                    used
                })
                .unwrap();
            assert_eq!(kind, Some(BODY));
            let first_taken = used.min(2700) / 900 * 900;
            let copied_at = if used == 0 { 0 } else { first_taken };
            assert_eq!(payload, run[copied_at..][copied], "{used}: only the rest of the last record taken");
            for stays in run.chunks(900).skip(3 - staying) {
                assert_eq!(ring.try_pop(&mut payload).unwrap(), Some(BODY));
                assert_eq!(payload, stays, "{used}: the records after it stay");
            }
            assert_eq!(ring.try_pop_through(&mut payload, Some(BODY), |_| unreachable!()).unwrap(), Some(2));
            assert_eq!(payload, b"after the run");
        }
        assert!(!ring.has_data());
    }

    #[test]
    fn garbage_positions_are_refused() {
        let memory = Memory::new();
        let ring = memory.ring();
        memory.control.tail.0.store(1_000_000, std::sync::atomic::Ordering::Release);
        assert!(ring.try_pop(&mut Vec::new()).is_err());
        assert!(ring.try_push(1, &[b"x"]).is_err());
    }

    #[test]
    fn a_length_beyond_what_was_written_is_refused() {
        let memory = Memory::new();
        let ring = memory.ring();
        assert!(ring.try_push(1, &[b"hello"]).unwrap());
        // The producer's header claims more bytes than it published.
        ring.write_at(0, &100u32.to_le_bytes());
        assert!(ring.try_pop(&mut Vec::new()).is_err());
    }
}
