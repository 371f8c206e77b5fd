//! The worker pool: W workers, each with T slots ([`slots_per_worker`]), and what keeps them
//! running.
//!
//! A [`worker::Worker`] is one place in the pool; its process is started as
//! [`launch::Launch`] says and watched as a [`process::Process`] (forked from a preloaded parent
//! by [`zygote`] with `--preload`), and the bundled worker's process shares a [`region`] of
//! memory with the front. Each of a worker's T [`slot`]s carries one request at a time from the
//! queue to the process. The [`supervisor`] starts the processes, replaces one that dies, hangs
//! or is due ([`lifetime`], [`recycle`]), reloads them one at a time ([`reload`]) and stops them;
//! [`affinity`] says which CPU each runs on, and [`output`] carries what each prints into the log.

pub mod affinity;
pub mod launch;
pub mod lifetime;
pub mod output;
pub mod process;
pub mod recycle;
pub mod region;
pub mod reload;
pub mod slot;
pub mod slots_per_worker;
pub mod supervisor;
pub mod worker;
pub mod zygote;
