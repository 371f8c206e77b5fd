//! The worker pool: W workers, each with T slots ([`slots_per_worker`]), and what keeps them
//! running.
//!
//! A [`worker::Worker`] is one place in the pool; its process is started as
//! [`launch::Launch`] says and watched as a [`process::Process`] (forked from a preloaded parent
//! by [`zygote`] with `--preload`), and the bundled worker's process shares a region of memory
//! with the front, its [`hop_link`]. Each of a worker's T [`slot`]s carries one request at a time
//! from the queue to the process. The [`supervisor`] starts the processes, replaces them (below)
//! and stops them; [`affinity`] says which CPU each runs on, and [`output`] carries what each
//! prints into the log.
//!
//! Replacing a worker's process has these words, in the code, the logs, the stats and the docs:
//! - **replace**: the mechanism. A new process starts on a socket of its own while the old one
//!   serves; once it serves it takes the new requests, and the old one finishes what it runs and
//!   stops ([`supervisor`]). Each replacement has a cause ([`replacement`]).
//! - **restart**: a replacement because the process failed: it exited, or got stuck (a request
//!   outlived `--timeout`). Counted in the stats' `restarts`; one that fails again soon after it
//!   starts is started again after growing pauses.
//! - **reload**: every worker replaced in turn, for new code: on SIGHUP, or when `--reload` sees a
//!   file change ([`file_watch`]).
//! - **recycle**: a healthy worker replaced once it is due: `--max-requests`, `--max-worker-memory`
//!   ([`recycle`]).
//!
//! The stats' `recycles` counts every replacement by its cause, restarts and reloads included;
//! its name is kept for those who read it.

pub mod affinity;
pub mod file_watch;
pub mod hop_link;
pub mod launch;
pub mod output;
pub mod process;
pub mod recycle;
pub mod replacement;
pub mod scaling;
pub mod slot;
pub mod slots_per_worker;
pub mod supervisor;
pub mod worker;
pub mod zygote;
