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
//!
//! One request and its response, both ends in this process (a worker process attaches with
//! [`worker::WorkerEnd::from_env`] instead, and its threads wait rather than poll):
//!
//! ```
//! use headway_hop::front::FrontEnd;
//! use headway_hop::message::{self, Version, END, REQUEST_HEAD, RESPONSE_HEAD};
//! use headway_hop::worker::WorkerEnd;
//! use headway_hop::Layout;
//!
//! # fn main() -> Result<(), headway_hop::HopError> {
//! let front = FrontEnd::new(Layout::new(1, 4096))?;
//! let worker = WorkerEnd::beside(&front)?;
//!
//! // The front writes a request's head into a free slot and hands it to the worker.
//! let mut head = Vec::new();
//! message::encode_request_head(&mut head, 0, Version::Http11, b"GET", b"/hello", b"", []);
//! assert!(front.slot(0).push(REQUEST_HEAD, &[&head])?, "a head fits an empty ring");
//! front.slot(0).publish();
//!
//! // A worker thread claims it, reads it and answers.
//! let index = worker.try_claim().expect("a published request");
//! let slot = worker.slot(index);
//! let mut record = Vec::new();
//! assert_eq!(slot.pop(&mut record)?, Some(REQUEST_HEAD));
//! assert_eq!(message::decode_request_head(&record)?.target, b"/hello");
//! let mut head = Vec::new();
//! message::encode_response_head(&mut head, 204, []);
//! assert!(slot.push(RESPONSE_HEAD, &[&head])?);
//! slot.release();
//! assert!(slot.push(END, &[])?);
//! slot.pushed();
//!
//! // The front reads the response; the slot is free for the next request.
//! assert_eq!(front.slot(0).pop(&mut record)?, Some(RESPONSE_HEAD));
//! assert_eq!(message::decode_response_head(&record)?.status, 204);
//! assert_eq!(front.slot(0).pop(&mut record)?, Some(END));
//! assert!(front.slot(0).is_idle());
//! # Ok(())
//! # }
//! ```

#![warn(missing_docs)]

mod descriptors;
mod error;
pub mod files;
pub mod front;
mod line;
pub mod message;
pub mod region;
pub mod ring;
mod waits;
pub mod wake;
pub mod worker;

pub use descriptors::DESCRIPTORS;
pub use error::HopError;
pub use region::Layout;
