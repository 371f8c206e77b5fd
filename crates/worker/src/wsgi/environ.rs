//! The WSGI environ: a base dict made once per worker with the keys that never change, copied
//! for each request and completed from the request head. Keys are interned strings made once.
//!
//! With `--root-path` (the app mounted under a prefix) SCRIPT_NAME is the prefix and PATH_INFO
//! the rest of the path when the path starts with it; a path without it (a router that took it
//! off) is PATH_INFO whole.

use std::cell::RefCell;
use std::collections::HashMap;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString, PyTuple};
use pyo3::{intern, Py};

use super::file_wrapper::FileWrapper;
use super::input::Input;
use headway_worker_core::http::cgi::{below, path_info, server_of_host};
use headway_worker_core::http::request::Request;

/// Header keys kept interned per slot thread; a peer sending endless new names cannot grow it
/// past this.
const CACHE_ENTRIES: usize = 512;

/// The environ keys that are the same for every request of this worker.
pub fn base<'py>(py: Python<'py>, threads: usize, workers: usize, root_path: &str) -> PyResult<Bound<'py, PyDict>> {
    let environ = PyDict::new(py);
    environ.set_item(intern!(py, "SCRIPT_NAME"), root_path)?;
    environ.set_item(intern!(py, "SERVER_NAME"), "localhost")?;
    environ.set_item(intern!(py, "SERVER_PORT"), "80")?;
    environ.set_item(intern!(py, "SERVER_SOFTWARE"), "headway")?;
    environ.set_item(intern!(py, "REMOTE_ADDR"), "")?;
    environ.set_item(intern!(py, "wsgi.version"), PyTuple::new(py, [1, 0])?)?;
    environ.set_item(intern!(py, "wsgi.url_scheme"), "http")?;
    environ.set_item(intern!(py, "wsgi.errors"), py.import("sys")?.getattr("stderr")?)?;
    environ.set_item(intern!(py, "wsgi.multithread"), threads > 1)?;
    environ.set_item(intern!(py, "wsgi.multiprocess"), workers > 1)?;
    environ.set_item(intern!(py, "wsgi.run_once"), false)?;
    environ.set_item(intern!(py, "wsgi.input_terminated"), true)?;
    environ.set_item(intern!(py, "wsgi.file_wrapper"), py.get_type::<FileWrapper>())?;
    Ok(environ)
}

thread_local! {
    static KEYS: RefCell<HashMap<String, Py<PyString>>> = RefCell::new(HashMap::new());
}

/// The interned str of an environ key: those of the fields nearly every request has without a
/// lookup, the others from a cache per thread.
fn key<'py>(py: Python<'py>, name: &str) -> Bound<'py, PyString> {
    let common = match name {
        "HTTP_HOST" => intern!(py, "HTTP_HOST"),
        "HTTP_X_FORWARDED_FOR" => intern!(py, "HTTP_X_FORWARDED_FOR"),
        "HTTP_X_FORWARDED_PROTO" => intern!(py, "HTTP_X_FORWARDED_PROTO"),
        "HTTP_X_REQUEST_START" => intern!(py, "HTTP_X_REQUEST_START"),
        "HTTP_USER_AGENT" => intern!(py, "HTTP_USER_AGENT"),
        "HTTP_ACCEPT" => intern!(py, "HTTP_ACCEPT"),
        "CONTENT_TYPE" => intern!(py, "CONTENT_TYPE"),
        "CONTENT_LENGTH" => intern!(py, "CONTENT_LENGTH"),
        _ => return cached_key(py, name),
    };
    common.clone()
}

fn cached_key<'py>(py: Python<'py>, name: &str) -> Bound<'py, PyString> {
    KEYS.with(|keys| {
        if let Some(key) = keys.borrow().get(name) {
            return key.bind(py).clone();
        }
        let key = PyString::intern(py, name);
        let mut keys = keys.borrow_mut();
        if keys.len() < CACHE_ENTRIES {
            keys.insert(name.to_owned(), key.clone().unbind());
        }
        key
    })
}

/// The environ of one request: `base` plus what the request head says.
pub fn build<'py>(
    py: Python<'py>,
    base: &Bound<'py, PyDict>,
    root_path: &str,
    request: &Request,
    input: Py<Input>,
) -> PyResult<Bound<'py, PyDict>> {
    let environ = base.copy()?;
    for (name, value) in &request.headers {
        environ.set_item(key(py, name), value)?;
    }
    environ.set_item(intern!(py, "REQUEST_METHOD"), &request.method)?;
    let path = path_info(&request.path);
    environ.set_item(intern!(py, "PATH_INFO"), below(&path, root_path))?;
    environ.set_item(intern!(py, "QUERY_STRING"), &request.query)?;
    environ.set_item(intern!(py, "SERVER_PROTOCOL"), request.protocol())?;
    environ.set_item(intern!(py, "wsgi.input"), input)?;

    if let Some(client) = request.client() {
        environ.set_item(intern!(py, "REMOTE_ADDR"), client)?;
    }
    if request.is_https() {
        environ.set_item(intern!(py, "wsgi.url_scheme"), "https")?;
        environ.set_item(intern!(py, "SERVER_PORT"), "443")?;
    }
    if let Some(host) = request.header("HTTP_HOST").filter(|host| !host.is_empty()) {
        let (name, port) = server_of_host(host);
        if !name.is_empty() {
            environ.set_item(intern!(py, "SERVER_NAME"), name)?;
        }
        if !port.is_empty() {
            environ.set_item(intern!(py, "SERVER_PORT"), port)?;
        }
    }
    Ok(environ)
}
