//! The native core of headway's bundled Python worker; `crates/extension` makes it (with the
//! `headway` command) the Python extension `headway._native`.
//!
//! The worker's request path, in the order a request meets it: [`server`] starts T slot
//! threads; started by the headway front, each claims requests from the shared memory the
//! front passed down ([`hop`]); run on its own, each accepts a connection ([`unix`]) whose
//! HTTP/1.1 rules are in [`http`] (no I/O) and whose GIL-aware socket calls are in [`socket`].
//! Both are a [`transport`]; [`wsgi`] builds the environ, calls the app and hands the response
//! back to the transport; for an ASGI app, [`asgi`] hands the transport to the Python side, whose
//! asyncio loop runs the app. Both serve as an [`app::Application`].

pub mod app;
pub mod asgi;
pub mod hop;
pub mod http;
pub mod log;
pub mod server;
pub mod socket;
pub mod transport;
pub mod unix;
pub mod wsgi;
