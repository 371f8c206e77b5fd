//! The WSGI objects driven from Python code, against a transport fed from memory.

use std::ffi::CString;
use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::PyDict;

use super::input::Input;
use super::response::Response;
use headway_worker_core::http::body::Body;
use headway_worker_core::http::feeder::{feeder, Feeder};
use headway_worker_core::http::reader::{ReadError, Reader};
use headway_worker_core::http::response::ResponseHead;
use headway_worker_core::http::HttpError;
use headway_worker_core::runtime::Runtime;
use headway_worker_core::transport::{Next, Transport};

/// A request body fed `step` bytes at a time; counts the calls of `body_wanted`.
struct Fed {
    reader: Reader,
    source: Feeder,
    body: Option<Body>,
    wanted: Arc<AtomicUsize>,
}

impl Transport for Fed {
    fn next_request(&mut self, _: &dyn Runtime) -> Next {
        Next::Closed
    }
    fn body_wanted(&mut self, _: &dyn Runtime) -> io::Result<()> {
        self.wanted.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
    fn read_body(&mut self, _: &dyn Runtime, limit: usize, out: &mut Vec<u8>) -> Result<usize, ReadError> {
        match &mut self.body {
            Some(body) => body.read_some(&mut self.reader, &mut self.source, limit, out),
            None => Ok(0),
        }
    }
    fn send_head(&mut self, _: &dyn Runtime, _: &ResponseHead, _: Option<u64>, _: &[u8]) -> io::Result<()> {
        Ok(())
    }
    fn send_body(&mut self, _: &dyn Runtime, _: &[u8]) -> io::Result<()> {
        Ok(())
    }
    fn send_file(&mut self, _: &dyn Runtime, _: RawFd, _: u64) -> io::Result<()> {
        Ok(())
    }
    fn end_response(&mut self, _: &dyn Runtime) -> io::Result<()> {
        Ok(())
    }
    fn send_error(&mut self, _: &dyn Runtime, _: &HttpError, _: bool) {}
    fn finish(&mut self, _: &dyn Runtime) -> bool {
        false
    }
}

fn response(py: Python<'_>, data: &[u8], step: usize, wanted: &Arc<AtomicUsize>) -> Py<Response> {
    let fed = Fed {
        reader: Reader::new(),
        source: feeder(data, step),
        body: Body::of(headway_http1::body::BodyKind::Length(data.len() as u64)),
        wanted: wanted.clone(),
    };
    Py::new(py, Response::new(Box::new(fed))).unwrap()
}

/// wsgi.input over `data` arriving `step` bytes at a time.
fn stream<'py>(py: Python<'py>, data: &[u8], step: usize) -> Bound<'py, Input> {
    let wanted = Arc::new(AtomicUsize::new(0));
    Bound::new(py, Input::new(response(py, data, step, &wanted))).unwrap()
}

/// Runs Python `code` with `names` bound; returns the value of `result` it leaves.
fn run<'py>(py: Python<'py>, code: &str, names: &[(&str, &Bound<'py, PyAny>)]) -> PyResult<Bound<'py, PyAny>> {
    let scope = PyDict::new(py);
    scope.set_item("sys", py.import("sys")?)?;
    for (name, value) in names {
        scope.set_item(name, value)?;
    }
    py.run(&CString::new(code).unwrap(), Some(&scope), None)?;
    Ok(scope.get_item("result")?.unwrap_or_else(|| py.None().into_bound(py)))
}

fn with_python(test: impl FnOnce(Python<'_>)) {
    Python::initialize();
    Python::attach(test);
}

#[test]
fn input_read_sizes_are_exact_until_the_end() {
    with_python(|py| {
        let body = stream(py, b"abcdefghij", 3);
        let code = "result = [body.read(0), body.read(4), body.readline(), body.read(4), body.read()]";
        let result = run(py, code, &[("body", body.as_any())]).unwrap();
        assert_eq!(result.extract::<Vec<Vec<u8>>>().unwrap(), [&b""[..], b"abcd", b"efghij", b"", b""]);
    });
}

#[test]
fn input_readline_with_limits_and_iteration() {
    with_python(|py| {
        let data = b"one\ntwo\n\nlong line here\nlast";
        let code = "result = [body.readline(2), body.readline(100), body.readline(None), list(body), \
                    other.readlines(), third.readlines(5)]";
        let (body, other, third) = (stream(py, data, 3), stream(py, data, 3), stream(py, data, 3));
        let result =
            run(py, code, &[("body", body.as_any()), ("other", other.as_any()), ("third", third.as_any())]).unwrap();
        let expected = "[b'on', b'e\\n', b'two\\n', [b'\\n', b'long line here\\n', b'last'], \
                        [b'one\\n', b'two\\n', b'\\n', b'long line here\\n', b'last'], [b'one\\n', b'two\\n']]";
        assert_eq!(result.repr().unwrap().to_string(), expected);
    });
}

#[test]
fn input_read_all_after_partial_reads() {
    with_python(|py| {
        let body = stream(py, b"head\nrest of it", 2);
        let result = run(py, "result = [body.readline(), body.read(-1)]", &[("body", body.as_any())]).unwrap();
        assert_eq!(result.extract::<Vec<Vec<u8>>>().unwrap(), [&b"head\n"[..], b"rest of it"]);
    });
}

#[test]
fn input_hook_runs_once_before_the_first_read() {
    with_python(|py| {
        let wanted = Arc::new(AtomicUsize::new(0));
        let body = Bound::new(py, Input::new(response(py, b"abc", 3, &wanted))).unwrap();
        assert_eq!(wanted.load(Ordering::SeqCst), 0);
        run(py, "body.read(0)", &[("body", body.as_any())]).unwrap();
        assert_eq!(wanted.load(Ordering::SeqCst), 0); // reading nothing needs no bytes from the client
        run(py, "body.read(1); body.read()", &[("body", body.as_any())]).unwrap();
        assert_eq!(wanted.load(Ordering::SeqCst), 1);
    });
}

fn start_response(py: Python<'_>) -> Bound<'_, Response> {
    response(py, b"", 1, &Arc::new(AtomicUsize::new(0))).into_bound(py)
}

#[test]
fn start_response_records_and_returns_write() {
    with_python(|py| {
        let response = start_response(py);
        let code = "result = start_response('201 Created', [('Content-Length', '7'), ('Date', 'x'), ('X-A', 'é')]) \
                    == start_response.write";
        assert!(run(py, code, &[("start_response", response.as_any())]).unwrap().is_truthy().unwrap());
        let head = response.borrow().current_head().unwrap();
        assert_eq!((head.code.as_u16(), head.content_length, head.has_date), (201, Some(7), true));
        assert_eq!(head.header_block, b"Content-Length: 7\r\nDate: x\r\nX-A: \xe9\r\n");
    });
}

#[test]
fn start_response_rejects() {
    let cases = [
        ("b'200 OK'", "[]", "TypeError"),
        ("'200'", "[]", "ValueError"),
        ("'20 OK'", "[]", "ValueError"),
        ("'200 OK\\r\\nX: y'", "[]", "ValueError"),
        ("'200 ✓'", "[]", "UnicodeEncodeError"),
        ("'200 OK'", "(('A', 'b'),)", "TypeError"),
        ("'200 OK'", "[['A', 'b']]", "TypeError"),
        ("'200 OK'", "[('A', 'b', 'c')]", "TypeError"),
        ("'200 OK'", "[(b'A', 'b')]", "TypeError"),
        ("'200 OK'", "[('A', b'b')]", "TypeError"),
        ("'200 OK'", "[('A', 1)]", "TypeError"),
        ("'200 OK'", "[('A B', 'c')]", "ValueError"),
        ("'200 OK'", "[('A', 'b\\r\\nSet-Cookie: evil')]", "ValueError"),
        ("'200 OK'", "[('A', 'b\\nc')]", "ValueError"),
        ("'200 OK'", "[('A', '✓')]", "ValueError"),
        ("'200 OK'", "[('Content-Length', '-1')]", "ValueError"),
        ("'200 OK'", "[('Content-Length', '1'), ('Content-Length', '2')]", "ValueError"),
        ("'200 OK'", "[('Connection', 'close')]", "ValueError"),
        ("'200 OK'", "[('transfer-encoding', 'chunked')]", "ValueError"),
        ("'200 OK'", "[('Keep-Alive', 'timeout=5')]", "ValueError"),
        ("'200 OK'", "[('Upgrade', 'h2c')]", "ValueError"),
    ];
    with_python(|py| {
        for (status, headers, error) in cases {
            let response = start_response(py);
            let code = format!(
                "try:\n    start_response({status}, {headers})\n    result = None\n\
                 except Exception as error:\n    result = type(error).__name__"
            );
            let result = run(py, &code, &[("start_response", response.as_any())]).unwrap();
            assert_eq!(result.extract::<Option<String>>().unwrap().as_deref(), Some(error), "{status}, {headers}");
        }
    });
}

#[test]
fn start_response_twice_needs_exc_info() {
    with_python(|py| {
        let response = start_response(py);
        let names = [("start_response", response.as_any())];
        run(py, "start_response('200 OK', [])", &names).unwrap();
        let error = run(py, "start_response('500 Oops', [])", &names).unwrap_err();
        assert!(error.is_instance_of::<pyo3::exceptions::PyRuntimeError>(py));
        let code =
            "try:\n    raise KeyError('boom')\nexcept KeyError:\n    start_response('500 Oops', [], sys.exc_info())";
        run(py, code, &names).unwrap();
        assert_eq!(response.borrow().current_head().unwrap().code, 500);
        response.borrow_mut().mark_headers_sent();
        let code =
            "try:\n    raise KeyError('boom')\nexcept KeyError:\n    start_response('502 Late', [], sys.exc_info())";
        let error = run(py, code, &names).unwrap_err();
        assert!(error.is_instance_of::<pyo3::exceptions::PyKeyError>(py) && error.to_string().contains("boom"));
        assert_eq!(response.borrow().current_head().unwrap().code, 500);
    });
}
