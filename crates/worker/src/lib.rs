//! The Python binding of headway's worker core (`headway-worker-core`); `crates/extension` makes
//! it (with the `headway` command) the Python extension `headway._native`.
//!
//! The core carries requests to the slot threads and responses back (the hop, a unix socket,
//! HTTP/1.1 framing, files); this crate is what is Python about it: [`server`] starts T Python
//! slot threads over the core's slots, [`log::Gil`] lets the core release the GIL while it waits
//! and log through `sys.stderr`; [`wsgi`] builds the environ, calls the app and hands the
//! response back to the transport; for an ASGI app, [`asgi`] hands the transport to the Python
//! side, whose asyncio loop runs the app. Both serve as an [`app::Application`].

pub mod app;
pub mod asgi;
pub mod log;
pub mod server;
pub mod wsgi;
