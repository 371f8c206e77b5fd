//! The ASGI `http` and `websocket` scopes, built natively from a request head, whichever way it
//! came: from the hop as the front encoded it (a request the event loop serves itself), or parsed
//! from HTTP/1.1 (a request on the worker's own socket, a WebSocket handshake). One place for the
//! keys every scope has, so that the ways of serving cannot disagree on them.
//!
//! What the app gets: `raw_path` and `query_string` as the target's bytes, `path` those of the
//! path percent-decoded and read as UTF-8 (ASGI 3); `headers` with names lowercased, in the order
//! first seen, a repeated field joined to the first (`; ` for cookies, as the WSGI environ has
//! them), and a field whose name has `_` dropped (Django's ASGI handler, as every CGI-style
//! reader, would take `X_Forwarded_Host` for `X-Forwarded-Host`); `scheme` from the last
//! `X-Forwarded-Proto` (the front sets it); `client` the address the front judged. With
//! `--root-path`, `root_path` is the prefix and `path` the full path, prefix included, whether
//! the router kept it in the request or took it off (as uvicorn gives it).

use std::borrow::Cow;

use headway_hop::message::{RequestHead, Version};
use headway_http1::fields::trim_blanks;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString, PyTuple};

use headway_http1::request::{parse_head, Limits};
use headway_worker_core::http::cgi::{bytes_of_latin1, percent_decoded};
use headway_worker_core::http::request::{self, Request};
use pyo3::exceptions::PyValueError;

/// ASGI's version and the spec version of the scopes built here (the lifespan scope's too).
pub const ASGI_VERSION: &str = "3.0";
pub const SPEC_VERSION: &str = "2.4";

/// A header field's name and value, borrowed from the head or made for the scope.
pub type Field<'a> = (Cow<'a, [u8]>, Cow<'a, [u8]>);

/// What a scope is made of.
pub struct Head<'a> {
    pub method: Cow<'a, [u8]>,
    /// The path as sent (still percent-encoded); empty for `*`.
    pub raw_path: Cow<'a, [u8]>,
    pub query: Cow<'a, [u8]>,
    pub http_version: &'static str,
    /// Lowercased names, joined as the module says.
    pub headers: Vec<Field<'a>>,
    pub https: bool,
    pub client: Option<Cow<'a, str>>,
}

impl<'a> Head<'a> {
    /// A head from the hop (the front checked it already).
    pub fn from_hop(head: &RequestHead<'a>) -> Head<'a> {
        let target = if head.target == b"*" { &b""[..] } else { head.target };
        let (raw_path, query) = match memchr::memchr(b'?', target) {
            Some(mark) => (&target[..mark], &target[mark + 1..]),
            None => (target, &b""[..]),
        };
        let headers = joined_fields(head.headers.iter().copied());
        let https = headers
            .iter()
            .find(|(name, _)| &name[..] == b"x-forwarded-proto")
            .is_some_and(|(_, proto)| &proto[..] != b"http" && last_item(proto).eq_ignore_ascii_case(b"https"));
        Head {
            method: Cow::Borrowed(head.method),
            raw_path: Cow::Borrowed(raw_path),
            query: Cow::Borrowed(query),
            http_version: match head.version {
                Version::Http10 => "1.0",
                Version::Http11 => "1.1",
                Version::Http2 => "2",
            },
            headers,
            https,
            client: (!head.client.is_empty()).then(|| String::from_utf8_lossy(head.client)),
        }
    }

    /// A head parsed from HTTP/1.1 on the worker's socket.
    pub fn from_request(request: &'a Request) -> Head<'a> {
        let headers = request
            .headers
            .iter()
            .map(|(key, value)| (Cow::Owned(header_name(key)), Cow::Owned(bytes_of_latin1(value))))
            .collect();
        Head {
            method: Cow::Owned(bytes_of_latin1(&request.method)),
            raw_path: Cow::Owned(bytes_of_latin1(&request.path)),
            query: Cow::Owned(bytes_of_latin1(&request.query)),
            http_version: request.protocol().trim_start_matches("HTTP/"),
            headers,
            https: request.is_https(),
            client: request.client().map(Cow::Borrowed),
        }
    }
}

/// Fields as ASGI gets them here: names with `_` dropped, blanks around values trimmed, a repeated
/// field joined to the first (`; ` for cookies), a repeated `Content-Length` (the same, or the
/// front would have refused it) kept once.
fn joined_fields<'a>(fields: impl Iterator<Item = (&'a [u8], &'a [u8])>) -> Vec<Field<'a>> {
    let mut joined: Vec<Field<'a>> = Vec::with_capacity(fields.size_hint().0);
    for (name, value) in fields {
        if name.contains(&b'_') {
            continue;
        }
        let value = trim_blanks(value);
        match joined.iter_mut().find(|(seen, _)| seen.eq_ignore_ascii_case(name)) {
            Some(_) if name.eq_ignore_ascii_case(b"content-length") => {}
            Some((_, first)) => {
                let first = first.to_mut();
                first.extend_from_slice(if name.eq_ignore_ascii_case(b"cookie") { b"; " } else { b", " });
                first.extend_from_slice(value);
            }
            None if name.iter().any(u8::is_ascii_uppercase) => {
                joined.push((Cow::Owned(name.to_ascii_lowercase()), Cow::Borrowed(value)))
            }
            // The front sends names lowercased already.
            None => joined.push((Cow::Borrowed(name), Cow::Borrowed(value))),
        }
    }
    joined
}

/// The last item of a comma-separated value, blanks trimmed.
fn last_item(list: &[u8]) -> &[u8] {
    trim_blanks(list.rsplit(|&b| b == b',').next().unwrap_or(list))
}

/// A header's own name (lowercased) from its CGI environ key.
fn header_name(key: &str) -> Vec<u8> {
    let name = key.strip_prefix("HTTP_").unwrap_or(key);
    name.bytes().map(|b| if b == b'_' { b'-' } else { b.to_ascii_lowercase() }).collect()
}

/// Makes the scopes of one kind for one app: what every scope of it has in common (its type, the
/// ASGI versions, the root path) is made once, in a template each scope starts as a copy of.
pub struct ScopeMaker {
    template: Py<PyDict>,
    websocket: bool,
    /// The lifespan state, shallow-copied into every scope.
    state: Py<PyDict>,
    root_path: String,
}

impl ScopeMaker {
    /// Scopes of type `http`, or `websocket`, with a copy of the lifespan `state`, under
    /// `root_path` (`--root-path`, "" for none).
    pub fn new(py: Python<'_>, websocket: bool, state: Py<PyDict>, root_path: String) -> PyResult<ScopeMaker> {
        let asgi = PyDict::new(py);
        asgi.set_item(intern!(py, "version"), ASGI_VERSION)?;
        asgi.set_item(intern!(py, "spec_version"), SPEC_VERSION)?;
        let template = PyDict::new(py);
        template.set_item(intern!(py, "type"), if websocket { "websocket" } else { "http" })?;
        template.set_item(intern!(py, "asgi"), asgi)?;
        template.set_item(intern!(py, "http_version"), "1.1")?;
        template.set_item(intern!(py, "root_path"), &root_path)?;
        template.set_item(intern!(py, "server"), py.None())?;
        // The keys each scope sets, there already: a copy then has room for them, and setting one
        // replaces a value rather than growing the table.
        for key in [
            intern!(py, "method"),
            intern!(py, "scheme"),
            intern!(py, "path"),
            intern!(py, "raw_path"),
            intern!(py, "query_string"),
            intern!(py, "headers"),
            intern!(py, "client"),
            intern!(py, "state"),
        ] {
            template.set_item(key, py.None())?;
        }
        if !websocket {
            template.set_item(intern!(py, "extensions"), py.None())?;
        }
        Ok(ScopeMaker { template: template.unbind(), websocket, state, root_path })
    }

    /// The scope of `head`.
    pub fn make<'py>(&self, py: Python<'py>, head: &Head<'_>) -> PyResult<Bound<'py, PyDict>> {
        let root_path = self.root_path.as_str();
        let path = String::from_utf8_lossy(&percent_decoded(&head.raw_path)).into_owned();
        let below_root = root_path.is_empty()
            || path == root_path
            || path.strip_prefix(root_path).is_some_and(|rest| rest.starts_with('/'));
        let (path, raw_path) = if below_root {
            (path, PyBytes::new(py, &head.raw_path))
        } else {
            let raw_path = [root_path.as_bytes(), &head.raw_path].concat();
            (format!("{root_path}{path}"), PyBytes::new(py, &raw_path))
        };
        let headers = PyList::empty(py);
        for (name, value) in &head.headers {
            headers.append(PyTuple::new(py, [field_name(py, name), PyBytes::new(py, value)])?)?;
        }
        let scheme = match (self.websocket, head.https) {
            (false, false) => intern!(py, "http"),
            (false, true) => intern!(py, "https"),
            (true, false) => intern!(py, "ws"),
            (true, true) => intern!(py, "wss"),
        };
        let scope = self.template.bind(py).copy()?;
        if head.http_version != "1.1" {
            scope.set_item(intern!(py, "http_version"), head.http_version)?;
        }
        // A websocket scope has none: the WebSocket side checks it is GET, then takes it out.
        scope.set_item(intern!(py, "method"), method(py, &head.method))?;
        scope.set_item(intern!(py, "scheme"), scheme)?;
        scope.set_item(intern!(py, "path"), path)?;
        scope.set_item(intern!(py, "raw_path"), raw_path)?;
        scope.set_item(intern!(py, "query_string"), PyBytes::new(py, &head.query))?;
        scope.set_item(intern!(py, "headers"), headers)?;
        match &head.client {
            Some(client) => scope.set_item(intern!(py, "client"), (client.as_ref(), 0))?,
            None => scope.set_item(intern!(py, "client"), py.None())?,
        }
        scope.set_item(intern!(py, "state"), self.state.bind(py).copy()?)?;
        if !self.websocket {
            let extensions = PyDict::new(py);
            extensions.set_item(intern!(py, "http.response.pathsend"), PyDict::new(py))?;
            scope.set_item(intern!(py, "extensions"), extensions)?;
        }
        Ok(scope)
    }
}

/// A header name as bytes; the names every request has are made once.
fn field_name<'py>(py: Python<'py>, name: &[u8]) -> Bound<'py, PyBytes> {
    macro_rules! once {
        ($name:literal) => {{
            static NAME: pyo3::sync::PyOnceLock<Py<PyBytes>> = pyo3::sync::PyOnceLock::new();
            NAME.get_or_init(py, || PyBytes::new(py, $name).unbind()).bind(py).clone()
        }};
    }
    match name {
        b"host" => once!(b"host"),
        b"x-forwarded-for" => once!(b"x-forwarded-for"),
        b"x-forwarded-proto" => once!(b"x-forwarded-proto"),
        b"x-request-start" => once!(b"x-request-start"),
        b"user-agent" => once!(b"user-agent"),
        b"accept" => once!(b"accept"),
        b"accept-encoding" => once!(b"accept-encoding"),
        b"content-type" => once!(b"content-type"),
        b"content-length" => once!(b"content-length"),
        b"cookie" => once!(b"cookie"),
        other => PyBytes::new(py, other),
    }
}

/// The method as a str; the common ones are not made again for every request.
fn method<'py>(py: Python<'py>, method: &[u8]) -> Bound<'py, PyString> {
    match method {
        b"GET" => intern!(py, "GET").clone(),
        b"POST" => intern!(py, "POST").clone(),
        b"HEAD" => intern!(py, "HEAD").clone(),
        b"PUT" => intern!(py, "PUT").clone(),
        b"DELETE" => intern!(py, "DELETE").clone(),
        other => PyString::new(py, &String::from_utf8_lossy(other)),
    }
}

/// The scope of `kind` (`http` or `websocket`) for a request head parsed from HTTP/1.1 (a
/// WebSocket handshake on the worker's socket), up to and without the blank line that ends it,
/// with a copy of the lifespan `state`, under `root_path`; a malformed head raises ValueError
/// with what is wrong.
#[pyfunction]
pub fn parse_scope<'py>(
    py: Python<'py>,
    kind: &str,
    head: &[u8],
    state: Py<PyDict>,
    root_path: String,
) -> PyResult<Bound<'py, PyDict>> {
    let head = [head, b"\r\n\r\n"].concat();
    let limits = Limits { max_head: head.len(), max_body: u64::MAX };
    let request = match parse_head(&head, &limits) {
        Ok(Some((head, _))) => request::from_head(head),
        Ok(None) => return Err(PyValueError::new_err("an incomplete request head")),
        Err(error) => return Err(PyValueError::new_err(error.reason)),
    };
    ScopeMaker::new(py, kind == "websocket", state, root_path)?.make(py, &Head::from_request(&request))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names_and_values<'a>(fields: &[(&'a [u8], &'a [u8])]) -> Vec<(String, String)> {
        joined_fields(fields.iter().copied())
            .into_iter()
            .map(|(name, value)| (String::from_utf8_lossy(&name).into(), String::from_utf8_lossy(&value).into()))
            .collect()
    }

    #[test]
    fn repeated_fields_join_the_first_and_underscores_are_dropped() {
        let fields: [(&[u8], &[u8]); 6] = [
            (b"accept", b"text/html"),
            (b"cookie", b"a=1"),
            (b"x_forwarded_host", b"evil.example"),
            (b"accept", b" */* "),
            (b"cookie", b"b=2"),
            (b"content-length", b"5"),
        ];
        let pairs =
            |list: &[(&str, &str)]| list.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect::<Vec<_>>();
        assert_eq!(
            names_and_values(&fields),
            pairs(&[("accept", "text/html, */*"), ("cookie", "a=1; b=2"), ("content-length", "5")])
        );
    }

    #[test]
    fn the_last_forwarded_proto_says_the_scheme() {
        assert_eq!(last_item(b"http, https"), b"https");
        assert_eq!(last_item(b" https "), b"https");
    }
}
