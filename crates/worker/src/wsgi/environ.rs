//! The WSGI environ: a base dict made once per worker with the keys that never change, copied
//! for each request and completed from the request head. Keys are interned strings made once.
//!
//! With `--root-path` (the app mounted under a prefix) SCRIPT_NAME is the prefix and PATH_INFO
//! the rest of the path when the path starts with it; a path without it (a router that took it
//! off) is PATH_INFO whole.

use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::HashMap;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString, PyTuple};
use pyo3::{intern, Py};

use super::file_wrapper::FileWrapper;
use super::input::Input;
use crate::http::request::{latin1, Request};

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

/// PATH_INFO: the path percent-decoded, the bytes read as latin-1 (PEP 3333).
pub fn path_info(path: &str) -> String {
    if !path.contains('%') {
        return path.to_owned();
    }
    // The path's bytes as sent (it was read as latin-1), percent-escapes decoded.
    latin1(&percent_decoded(&bytes_of_latin1(path)))
}

/// `bytes` with each `%` and two hex digits replaced by the byte they name (what is not such an
/// escape stays as it is, as Python's `unquote_to_bytes` has it).
pub fn percent_decoded(bytes: &[u8]) -> Cow<'_, [u8]> {
    if !bytes.contains(&b'%') {
        return Cow::Borrowed(bytes);
    }
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut rest = bytes;
    while let Some((&byte, tail)) = rest.split_first() {
        let hex = |b: u8| (b as char).to_digit(16);
        match tail {
            [high, low, after @ ..] if byte == b'%' && hex(*high).is_some() && hex(*low).is_some() => {
                decoded.push((hex(*high).unwrap_or(0) * 16 + hex(*low).unwrap_or(0)) as u8);
                rest = after;
            }
            _ => {
                decoded.push(byte);
                rest = tail;
            }
        }
    }
    Cow::Owned(decoded)
}

/// The bytes a head's text was read from (as latin-1: one character a byte).
pub fn bytes_of_latin1(text: &str) -> Vec<u8> {
    text.chars().map(|c| c as u32 as u8).collect()
}

/// The part of `path` below `root_path`: all of it if it is not there.
pub fn below<'a>(path: &'a str, root_path: &str) -> &'a str {
    match path.strip_prefix(root_path) {
        Some(rest) if !root_path.is_empty() && (rest.is_empty() || rest.starts_with('/')) => rest,
        _ => path,
    }
}

/// (SERVER_NAME, SERVER_PORT) from a Host header; either may be empty.
pub fn server_of_host(host: &str) -> (&str, &str) {
    let (name, port) = match host.strip_prefix('[') {
        Some(bracketed) => {
            let (name, rest) = bracketed.split_once(']').unwrap_or((bracketed, ""));
            (name, rest.strip_prefix(':').unwrap_or(""))
        }
        None => host.split_once(':').unwrap_or((host, "")),
    };
    let port = if !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) { port } else { "" };
    (name, port)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_info_is_percent_decoded_as_latin_1() {
        assert_eq!(path_info("/plain"), "/plain");
        assert_eq!(path_info("/envir%6Fn"), "/environ");
        assert_eq!(path_info("/caf%C3%A9"), "/caf\u{c3}\u{a9}");
        assert_eq!(path_info("/100%/%zz/%4"), "/100%/%zz/%4");
        // Raw bytes beside an escape stay the bytes they were (the path is read as latin-1).
        assert_eq!(path_info("/caf\u{c3}\u{a9}%20"), "/caf\u{c3}\u{a9} ");
    }

    #[test]
    fn the_root_path_is_taken_off_where_it_is() {
        assert_eq!(below("/api/users", "/api"), "/users");
        assert_eq!(below("/api", "/api"), "");
        assert_eq!(below("/users", "/api"), "/users", "a router took it off");
        assert_eq!(below("/apiary", "/api"), "/apiary", "a prefix of a segment is not the root");
        assert_eq!(below("/users", ""), "/users");
    }

    #[test]
    fn host_gives_server_name_and_port() {
        assert_eq!(server_of_host("example.com:8080"), ("example.com", "8080"));
        assert_eq!(server_of_host("[::1]:9000"), ("::1", "9000"));
        assert_eq!(server_of_host("example.org"), ("example.org", ""));
        assert_eq!(server_of_host("h:port"), ("h", ""));
    }
}
