//! The hop between headway's front and its bundled worker, in shared memory.
//!
//! The one queue stays in the front (its rules are in `headway_server::queue`); what this crate
//! replaces is the transport that carries a request to a worker process and its response back.
//! Over a unix socket that costs four system calls and two HTTP parses per request, and a
//! wake-up of a sleeping process on each side. Here the head of the queue is a [`stage`] in
//! memory every worker process maps, and each slot of a worker is a pair of single-producer
//! single-consumer byte rings in memory the front and that worker map ([`region`], [`ring`]): a
//! worker thread with a free slot takes the oldest staged request and puts its records on the
//! slot's request ring (the front writes them there itself when the request is too large for the
//! stage), then writes the response's records into the response ring ([`message`]). A side
//! sleeps only when it has nothing to do, and the other side wakes it only then ([`wake`]): a
//! worker thread waits on a futex in the shared memory, the front on an eventfd its event loop
//! watches. A loaded server makes no system call on the hop.
//!
//! Why requests come through the stage, one queue every worker takes from (NGINX Unit's
//! design), rather than the front handing each to a slot it knows is free. Measured
//! (docs/benchmarks.md, "Where the last idle share goes"): on a loaded 2-core machine a worker
//! that finished its requests waited for the front to hand over the next, and the front itself
//! could wait half a millisecond for a CPU. Requests placed in a worker ahead of its threads
//! (an experiment, not the one queue) served 7-10 % more on the Flask sqlite page, more the more
//! were placed; a queue every worker takes from, as deep as the front's, brings that within the
//! queue's rules, since no request waits behind a busy worker while another has a free slot.
//! What the per-slot design kept: the queue's order, deadlines and withdrawal are still decided in
//! the front, in safe Rust (the stage holds only what the front staged, and gives back what it withdraws);
//! a worker takes only into a slot it has free, so it never holds more requests than it has slots;
//! each slot's rings remain its transport, with one writer and one reader each, so the stage's
//! take is the only compare-and-swap between processes; and a worker that dies takes only its
//! own region with it (a new process gets a new region), failing only the requests its slots held
//! and those it took that the front had not seen yet ([`stage::StageFront::reclaim`]).
//! What it costs, measured since (docs/benchmarks.md, "The stage"): under load a worker's slots
//! are now all busy all the time, where before they ran dry while the front caught up, so a
//! GIL-bound app's T threads share the GIL more of the time: on the Flask sqlite page with 5
//! slots a worker, the p99 went from about two thirds of granian's to about granian's, at about
//! the same requests/s; the workers' idle share went from 4-6 % to 1-2 %.
//!
//! [`front`] is the front's end of one worker's region, [`worker`] the worker's. Everything read
//! from shared memory is validated: a broken or malicious worker can fail its own requests,
//! never crash the front.

pub mod front;
pub mod message;
pub mod region;
pub mod ring;
mod shm;
pub mod stage;
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
