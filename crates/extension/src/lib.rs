//! `headway._native`, the Python extension of a pip install: the bundled worker's native core
//! (`headway_worker`) and the `headway` command ([`cli`]), in one extension because a wheel
//! carries one kind of artifact (PyO3/maturin#368). Nothing but the registration lives here.

mod cli;

use headway_worker::{asgi, server, wsgi};
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
    m.add_class::<asgi::claims::Claims>()?;
    m.add_class::<asgi::cycle::HttpCycle>()?;
    m.add_class::<asgi::ready::Ready>()?;
    m.add_function(wrap_pyfunction!(asgi::scope::parse_scope, m)?)?;
    m.add("ASGI_VERSION", (asgi::scope::ASGI_VERSION, asgi::scope::SPEC_VERSION))?;
    m.add_function(wrap_pyfunction!(asgi::websocket::websocket_accept, m)?)?;
    Ok(())
}
