//! What the server (`headway-server`) and the lab (`headway-lab`) both need, written once: the
//! lab starts `headway serve`, reads its stats and measures its processes, so it must agree with
//! the server on how a process is read from /proc, which Python runs the worker, and the shape
//! of `/stats`, and read that over the same kind of address the server listens on. The load
//! generator (`headway-load`) shares how certificates are read with the server.
//!
//! - [`procfs`]: the one parser of `/proc/PID/stat`, and the memory and CPU of a process or a
//!   process group.
//! - [`python`]: which interpreter runs the bundled Python worker ([`executable`] finds programs).
//! - [`stats`]: the JSON of the control endpoint's `/stats`, as types both sides use.
//! - [`bind`]: an address (`HOST:PORT`, `[v6]:PORT`, `unix:PATH`), and [`client`], the GET
//!   that reads one.
//! - [`pem`]: certificates and keys from PEM files, for TLS on both ends.

pub mod bind;
pub mod client;
pub mod executable;
pub mod pem;
pub mod procfs;
pub mod python;
pub mod stats;
