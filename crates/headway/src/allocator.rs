//! The process's allocator: mimalloc, for the standalone binary and the Python extension (front
//! and native worker) alike. Every request allocates and frees a few dozen small objects (its
//! header map, job, channels, read buffer), and glibc's malloc spends much of that time freeing
//! and consolidating; mimalloc serves them from per-thread free lists (granian's wheels link
//! jemalloc for the same reason).
//!
//! The `mimalloc` crate hands every allocation to `mi_malloc_aligned`, whose alignment handling
//! costs as much again as the allocation itself (callgrind, a request through the front: 1.8k
//! instructions in the allocator that way, 0.86k through `mi_malloc`). A Rust allocation names its
//! alignment, and nearly all ask for a word or less, which every mimalloc block has (its size
//! classes are whole words); those go to `mi_malloc` and its kin, the rest (tokio's cache-aligned
//! tasks) to the aligned entries.

use std::alloc::{GlobalAlloc, Layout};

use libmimalloc_sys::{mi_collect, mi_malloc, mi_realloc, mi_zalloc};
use mimalloc::MiMalloc;

/// The alignment every mimalloc block has: its size classes are whole words, and a page's first
/// block is aligned to more.
const BLOCK_ALIGN: usize = std::mem::size_of::<usize>();

/// mimalloc, through its plain entries wherever the alignment asked is one every block has.
pub struct Allocator;

// SAFETY: every path is mimalloc's: blocks from `mi_malloc`, `mi_zalloc` and `mi_realloc` are
// aligned to `BLOCK_ALIGN`, which is all they are used for; the others go to `MiMalloc`; and
// `mi_free` (`MiMalloc::dealloc`) frees a block from either.
unsafe impl GlobalAlloc for Allocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if layout.align() <= BLOCK_ALIGN {
            // SAFETY: a plain allocation of a size the caller vouches is not zero.
            unsafe { mi_malloc(layout.size()).cast() }
        } else {
            // SAFETY: the caller's guarantees, passed on.
            unsafe { MiMalloc.alloc(layout) }
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if layout.align() <= BLOCK_ALIGN {
            // SAFETY: as for `alloc`.
            unsafe { mi_zalloc(layout.size()).cast() }
        } else {
            // SAFETY: the caller's guarantees, passed on.
            unsafe { MiMalloc.alloc_zeroed(layout) }
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` is a block of this allocator, which `mi_free` frees whichever entry made it.
        unsafe { MiMalloc.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if layout.align() <= BLOCK_ALIGN {
            // SAFETY: `ptr` is a block of this allocator; the new block is word-aligned as well.
            unsafe { mi_realloc(ptr.cast(), new_size).cast() }
        } else {
            // SAFETY: the caller's guarantees, passed on.
            unsafe { MiMalloc.realloc(ptr, layout, new_size) }
        }
    }
}

/// Has mimalloc return to the system the memory it has held free longer than its purge delay
/// (a second). It does so by itself only when the allocating thread is next busy; the front calls
/// this now and then, so memory a burst of connections took comes back once they close.
pub fn give_back_memory() {
    // SAFETY: mi_collect takes no pointers; `false` asks only for what is due, without stalls.
    unsafe { mi_collect(false) }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every alignment and a spread of sizes, through each entry: blocks come back aligned as
    /// asked, zeroed where asked, and keep their bytes through a reallocation.
    #[test]
    fn blocks_are_aligned_as_asked_and_keep_their_bytes() {
        let allocator = Allocator;
        for align in [1, 2, 4, 8, 16, 32, 64, 128, 4096] {
            for size in [1, 7, 8, 9, 16, 24, 40, 48, 100, 1000, 5000, 70_000] {
                let layout = Layout::from_size_align(size, align).unwrap();
                // SAFETY: non-zero sizes; each block is freed once, with its layout.
                unsafe {
                    let zeroed = allocator.alloc_zeroed(layout);
                    assert_eq!(zeroed as usize % align, 0, "zeroed {size} aligned to {align}");
                    assert!(std::slice::from_raw_parts(zeroed, size).iter().all(|&b| b == 0));
                    allocator.dealloc(zeroed, layout);
                    let block = allocator.alloc(layout);
                    assert_eq!(block as usize % align, 0, "{size} aligned to {align}");
                    std::ptr::write_bytes(block, 0xa5, size);
                    let grown = allocator.realloc(block, layout, size * 3);
                    assert_eq!(grown as usize % align, 0, "{size} grown, aligned to {align}");
                    assert!(std::slice::from_raw_parts(grown, size).iter().all(|&b| b == 0xa5));
                    allocator.dealloc(grown, Layout::from_size_align(size * 3, align).unwrap());
                }
            }
        }
    }
}
