//! `headway._native`: the native core of headway's bundled Python worker, and the `headway`
//! command for pip installs.
//!
//! The worker's request path, in the order a request meets it: [`server`] starts T slot
//! threads; started by the headway front, each claims requests from the shared memory the
//! front passed down ([`hop`]); run on its own, each accepts a connection ([`unix`]) whose
//! HTTP/1.1 rules are in [`http`] (no I/O) and whose GIL-aware socket calls are in [`socket`].
//! Both are a [`transport`]; [`wsgi`] builds the environ, calls the app and hands the response
//! back to the transport; for an ASGI app, [`asgi`] hands the transport to the Python side, whose
//! asyncio loop runs the app. [`cli`] is the `headway` command (the front; it runs no Python).

pub mod asgi;
pub mod cli;
pub mod hop;
pub mod http;
pub mod log;
pub mod server;
pub mod socket;
pub mod transport;
pub mod unix;
pub mod wsgi;

use pyo3::prelude::*;

#[pymodule]
#[pyo3(name = "_native")]
fn native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add_function(wrap_pyfunction!(cli::main, m)?)?;
    m.add_function(wrap_pyfunction!(server::serve, m)?)?;
    m.add_function(wrap_pyfunction!(server::serve_asgi, m)?)?;
    m.add("StartupError", py.get_type::<server::StartupError>())?;
    m.add("PeerClosed", py.get_type::<wsgi::input::PeerClosed>())?;
    m.add("HttpBodyError", py.get_type::<wsgi::input::HttpBodyError>())?;
    m.add_class::<wsgi::file_wrapper::FileWrapper>()?;
    m.add_class::<asgi::channel::Channel>()?;
    m.add_class::<asgi::websocket::WebSocketCodec>()?;
    m.add_class::<asgi::ClientWatcher>()?;
    m.add_class::<asgi::claims::Claims>()?;
    m.add_function(wrap_pyfunction!(asgi::channel::parse_head, m)?)?;
    m.add_function(wrap_pyfunction!(asgi::websocket::websocket_accept, m)?)?;
    Ok(())
}
