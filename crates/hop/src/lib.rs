//! The hop between headway's front and its bundled worker, in shared memory.
//!
//! The one queue stays in the front (its rules are in `headway_server::queue`); what this crate
//! replaces is only the transport a slot uses to carry a request to a worker process and its
//! response back. Over a unix socket that costs four system calls and two HTTP parses per
//! request, and a wake-up of a sleeping process on each side. Here a slot is a pair of
//! single-producer single-consumer byte rings in memory both processes map
//! ([`region`], [`ring`]): the front writes a request's records into the slot's request ring,
//! a worker thread writes the response's records into its response ring ([`message`]). A side
//! sleeps only when it has nothing to do, and the other side wakes it only then ([`wake`]): a
//! worker thread waits on a futex in the shared memory, the front on an eventfd its event loop
//! watches. A loaded server makes no system call on the hop.
//!
//! Why per-slot rings rather than one shared queue that workers take from (NGINX Unit's
//! design): the front already knows which slots are free, so the FIFO, its deadline and
//! withdrawal stay in one place in safe Rust; each ring has one writer and one reader, so no
//! compare-and-swap races between processes; and a worker that dies takes only its own region
//! with it (a new process gets a new region), failing only the requests its slots held.
//! What that costs on a loaded 2-core machine: a worker that finishes its requests waits for the
//! front to publish the next, and the front itself may wait for a CPU. A queue in shared memory
//! that every worker takes from, with every rule of the queue kept, takes that idle share away
//! but not the gap: a worker whose slots never run dry runs all its requests at once, and they
//! wait for the GIL instead of in the FIFO; and workers that never sleep keep the front off the
//! CPUs. These rings stay until a shared queue measures better; what was built and measured, and
//! what a shared queue would need first: docs/design/hop.md.
//!
//! The rest of a request body that waits in the front's temporary file does not go through the
//! ring: the worker is handed the file itself, and reads it from the page cache ([`files`]).
//!
//! [`front`] is the front's end of one worker's region, [`worker`] the worker's. Everything read
//! from shared memory is validated: a broken or malicious worker can fail its own requests,
//! never crash the front.

pub mod files;
pub mod front;
pub mod message;
pub mod region;
pub mod ring;
pub mod wake;
pub mod worker;

pub use region::Layout;

/// Why an exchange over the hop failed.
#[derive(Debug, thiserror::Error)]
pub enum HopError {
    /// The other side wrote something that is not a valid record: it is broken, and nothing more
    /// it writes can be trusted.
    #[error("the shared memory holds an invalid record: {0}")]
    Corrupt(&'static str),
    #[error(transparent)]
    Io(#[from] std::io::Error),
}
