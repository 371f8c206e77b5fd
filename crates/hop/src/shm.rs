//! A shared mapping of a `memfd`: the memory the front and its workers share.
//!
//! The front creates it (the file has no name in the file system and goes away with the last
//! process that maps it) and hands its descriptor to the workers, which map all of it. What is
//! laid out inside is [`crate::region`]'s and [`crate::stage`]'s business; this only owns the
//! mapping and unmaps it when dropped.

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::ptr::NonNull;

pub(crate) struct SharedMemory {
    base: NonNull<u8>,
    len: usize,
    fd: OwnedFd,
}

// SAFETY: the mapping is shared memory, which its users access only through atomics and through
// byte copies their protocols give to one side at a time.
unsafe impl Send for SharedMemory {}
unsafe impl Sync for SharedMemory {}

impl SharedMemory {
    /// A new zeroed mapping of `len` bytes.
    pub(crate) fn create(name: &CStr, len: usize) -> io::Result<SharedMemory> {
        // SAFETY: memfd_create with a valid C string; the result is checked.
        let raw = unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a new descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: ftruncate on our descriptor.
        if unsafe { libc::ftruncate(fd.as_raw_fd(), len as libc::off_t) } != 0 {
            return Err(io::Error::last_os_error());
        }
        SharedMemory::map(fd, len)
    }

    /// Maps the whole of a descriptor another process created.
    pub(crate) fn open(fd: OwnedFd) -> io::Result<SharedMemory> {
        // SAFETY: fstat into a zeroed stat buffer.
        let mut stat: libc::stat = unsafe { std::mem::zeroed() };
        if unsafe { libc::fstat(fd.as_raw_fd(), &mut stat) } != 0 {
            return Err(io::Error::last_os_error());
        }
        SharedMemory::map(fd, stat.st_size as usize)
    }

    fn map(fd: OwnedFd, len: usize) -> io::Result<SharedMemory> {
        if len == 0 {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "an empty shared memory file"));
        }
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
        Ok(SharedMemory { base, len, fd })
    }

    pub(crate) fn base(&self) -> NonNull<u8> {
        self.base
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl Drop for SharedMemory {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly what `map` mapped; no reference into it outlives `self`.
        unsafe {
            libc::munmap(self.base.as_ptr() as *mut libc::c_void, self.len);
        }
    }
}
