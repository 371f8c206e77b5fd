//! What the core asks of the language that runs the app: the one trait a binding implements.
//!
//! A slot thread belongs to the interpreter (a Python thread holding the GIL, a Ruby thread
//! holding the GVL) and runs the app with its lock held. Whenever the core has to wait (for a
//! request, for room on the ring, for a socket), it lets go of that lock through
//! [`Runtime::unlocked`], so the other slot threads run the app meanwhile and an idle slot costs
//! nothing; and its own lines go to the log the binding keeps in order with the app's output.

/// The interpreter a slot thread runs in, as the core sees it.
pub trait Runtime {
    /// Runs `wait` (a blocking call that touches no interpreter object) with the interpreter's
    /// lock let go, and takes the lock back before returning.
    fn unlocked(&self, wait: &mut (dyn FnMut() + Send));

    /// Writes one line of the worker's own to the log: `headway worker: MESSAGE`.
    fn log(&self, message: &str);
}

/// Runs `call` with the interpreter's lock let go ([`Runtime::unlocked`]) and returns its result.
pub fn unlocked<T: Send>(runtime: &dyn Runtime, call: impl FnOnce() -> T + Send) -> T {
    let (mut call, mut result) = (Some(call), None);
    runtime.unlocked(&mut || result = call.take().map(|call| call()));
    result.expect("Runtime::unlocked runs the call it is given")
}
