//! A word both processes change, alone on its cache line, so that the front and a worker writing
//! words next to each other do not slow each other down.

use std::sync::atomic::AtomicU32;

/// A word on a cache line of its own.
#[repr(C, align(64))]
#[derive(Default)]
pub(crate) struct Line(pub AtomicU32);
