//! The servers the lab compares: which there are and how each is found ([`peers`]), what it is
//! started with ([`config`], [`environment`]) and its command line ([`command`]); then, for all
//! of them alike, starting one ([`start`]), when a started one is ready and how to stop it
//! ([`running`]).

mod command;
mod config;
mod environment;
mod peers;
mod running;
mod start;

pub use config::ServerConfig;
pub use environment::{Environment, HeadwayBinary};
pub use peers::{detect, Peer, ServerKind, Skipped};
pub use running::{forget_live, stop_all_live, watch_live, RunningServer};
pub use start::free_port;
