//! Ruby's global VM lock as the worker core's [`Runtime`]: a slot thread is a Ruby thread that
//! holds the GVL while the app runs and lets go of it whenever the core waits (for a request, for
//! room on the ring, for a socket), so an idle slot costs the other threads nothing.

use std::any::Any;
use std::ffi::c_void;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::ptr::null_mut;

use headway_worker_core::runtime::Runtime;

/// The GVL of the Ruby thread that serves a slot.
pub struct Gvl;

/// What crosses `rb_thread_call_without_gvl`: the wait, and a panic of it, carried back to Rust
/// code (a panic must not unwind through Ruby's C frames).
struct Call<'a> {
    wait: &'a mut (dyn FnMut() + Send),
    panic: Option<Box<dyn Any + Send>>,
}

unsafe extern "C" fn run(data: *mut c_void) -> *mut c_void {
    // SAFETY: `data` is the `Call` that `unlocked` lends for the duration of this call.
    let call = unsafe { &mut *data.cast::<Call<'_>>() };
    if let Err(panic) = catch_unwind(AssertUnwindSafe(|| (call.wait)())) {
        call.panic = Some(panic);
    }
    null_mut()
}

impl Runtime for Gvl {
    fn unlocked(&self, wait: &mut (dyn FnMut() + Send)) {
        let mut call = Call { wait, panic: None };
        // No unblocking function: every wait of the core ends by itself once the slots stop
        // (the hop's stop wakes its futex, a socket's stop pipe and shutdown wake `poll`).
        // SAFETY: `run` gets a pointer to `call`, alive until the call returns; `run` touches no
        // Ruby object.
        unsafe { rb_sys::rb_thread_call_without_gvl(Some(run), (&raw mut call).cast(), None, null_mut()) };
        if let Some(panic) = call.panic {
            resume_unwind(panic);
        }
    }

    /// Ruby's `$stderr` is unbuffered: a line written straight to fd 2 keeps its place among the
    /// app's.
    fn log(&self, message: &str) {
        eprintln!("headway worker: {message}");
    }
}
