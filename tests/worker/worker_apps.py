"""WSGI apps the worker tests run (imported by the worker process as `worker_apps:app`).

One app, routed by path, so each test starts one worker and can ask it several things.
State that a test needs to inspect afterwards (close() calls, concurrency) lives in this
process and is read back with a request (/closed, /concurrency).
"""

import hashlib
import io
import json
import os
import sys
import threading
import time
from urllib.parse import parse_qs

_lock = threading.Lock()
_closed = []  # names of iterables whose close() was called, in order
_running = 0
_max_running = 0


class Recorded:
    """An iterable that records close(): yields `chunks`, or raises after `fail_after` of them."""

    def __init__(self, name, chunks, fail_after=None, pause=0.0):
        self.name = name
        self.chunks = chunks
        self.fail_after = fail_after
        self.pause = pause

    def __iter__(self):
        for number, data in enumerate(self.chunks):
            if number == self.fail_after:
                raise RuntimeError(f"failing on purpose after {number} chunks")
            if self.pause:
                time.sleep(self.pause)
            yield data

    def close(self):
        with _lock:
            _closed.append(self.name)


def _text(start_response, body, status="200 OK", extra=()):
    body = body.encode() if isinstance(body, str) else body
    start_response(status, [("Content-Type", "text/plain"), ("Content-Length", str(len(body))), *extra])
    return [body]


def _json(start_response, value):
    return _text(start_response, json.dumps(value, sort_keys=True), extra=[("X-Format", "json")])


def environ_report(environ, start_response):
    """Every environ key with its type name and (when JSON can carry it) its value."""
    report = {}
    for key, value in environ.items():
        plain = value if isinstance(value, (str, bool, int, tuple, type(None))) else None
        report[key] = [type(value).__name__, plain]
    stream = environ["wsgi.input"]
    report["_body"] = stream.read().decode("latin-1")
    report["_input_methods"] = [name for name in ("read", "readline", "readlines", "__iter__")
                                if callable(getattr(stream, name, None))]
    report["_errors_methods"] = [name for name in ("write", "writelines", "flush")
                                 if callable(getattr(environ["wsgi.errors"], name, None))]
    return _json(start_response, report)


def read_input(environ, start_response):
    """Read wsgi.input the way ?mode= says and report what arrived."""
    stream = environ["wsgi.input"]
    mode = parse_qs(environ["QUERY_STRING"])["mode"][0]
    pieces = []
    if mode == "pieces":
        while True:
            data = stream.read(1000)
            if not data:
                break
            pieces.append(data)
    elif mode == "readline":
        while True:
            line = stream.readline()
            if not line:
                break
            pieces.append(line)
    elif mode == "readline-limit":
        while True:
            line = stream.readline(7)
            if not line:
                break
            pieces.append(line)
    elif mode == "readlines":
        pieces = stream.readlines()
    elif mode == "iter":
        pieces = list(stream)
    elif mode == "all":
        pieces = [stream.read()]
    elif mode == "exact":
        pieces = [stream.read(int(environ["CONTENT_LENGTH"]))]
    body = b"".join(pieces)
    return _json(start_response, {
        "length": len(body),
        "sha256": hashlib.sha256(body).hexdigest(),
        "pieces": len(pieces),
        "longest": max((len(piece) for piece in pieces), default=0),
    })


def echo_streaming(environ, start_response):
    """Read 5 bytes, send them back at once with write(), then read and send the rest."""
    stream = environ["wsgi.input"]
    write = start_response("200 OK", [("Content-Type", "application/octet-stream")])
    write(stream.read(5))
    return [stream.read()]


def write_callable(environ, start_response):
    write = start_response("200 OK", [("Content-Type", "text/plain")])
    write(b"one ")
    write(b"")
    write(b"two ")
    return Recorded("write", [b"three ", b"four"])


def concurrency(environ, start_response):
    """Count requests running at once; ?ms= says how long each stays."""
    global _running, _max_running
    params = parse_qs(environ["QUERY_STRING"])
    if "report" in params:
        return _json(start_response, {"max": _max_running, "running": _running})
    with _lock:
        _running += 1
        _max_running = max(_max_running, _running)
    try:
        mark = params.get("mark")
        if mark:
            with open(mark[0], "w"):
                pass
        time.sleep(int(params["ms"][0]) / 1000)
    finally:
        with _lock:
            _running -= 1
    return _text(start_response, "done\n")


def files(environ, start_response):
    params = parse_qs(environ["QUERY_STRING"])
    kind = params["kind"][0]
    if kind == "sendfile":
        path = params["path"][0]
        handle = open(path, "rb")
        handle.seek(int(params.get("offset", ["0"])[0]))
        size = os.path.getsize(path) - handle.tell()
        start_response("200 OK", [("Content-Length", str(size))])
        return environ["wsgi.file_wrapper"](handle, 4096)
    data = bytes(range(256)) * 1000
    headers = [("Content-Length", str(len(data)))] if kind == "nofileno-length" else []
    start_response("200 OK", headers)
    return environ["wsgi.file_wrapper"](io.BytesIO(data), 10000)


def errors(environ, start_response):
    where = environ["PATH_INFO"].rsplit("/", 1)[1]
    if where == "before-start":
        raise RuntimeError("failing on purpose before start_response")
    if where == "hop-by-hop":
        start_response("200 OK", [("Connection", "close")])
        return [b"unreachable"]
    if where == "bad-status":
        start_response("OK", [])
        return [b"unreachable"]
    if where == "exc-info":
        start_response("200 OK", [("Content-Type", "text/plain")])
        try:
            raise ValueError("failing on purpose")
        except ValueError:
            start_response("503 Service Unavailable", [("Content-Type", "text/plain")], sys.exc_info())
        return [b"replaced\n"]
    if where == "exc-info-late":
        return _exc_info_after_headers(start_response)
    start_response("200 OK", [("Content-Type", "text/plain")])
    if where == "before-body":
        return Recorded("before-body", [b"never"], fail_after=0)
    return Recorded("after-body", [b"first part\n", b"never"], fail_after=1)


def _exc_info_after_headers(start_response):
    write = start_response("200 OK", [("Content-Type", "text/plain")])
    write(b"sent\n")
    try:
        raise ValueError("failing on purpose after headers")
    except ValueError:
        start_response("500 Internal Server Error", [], sys.exc_info())  # must re-raise
    return [b"unreachable"]


def framing(environ, start_response):
    name = environ["PATH_INFO"].rsplit("/", 1)[1]
    if name == "generator":
        start_response("200 OK", [("Content-Type", "text/plain")])
        return Recorded("generator", [b"a" * 10, b"", b"b" * 20])
    if name == "short":  # promises more than it sends
        start_response("200 OK", [("Content-Length", "100")])
        return Recorded("short", [b"only ten.."])
    if name == "long":  # sends more than it promises
        start_response("200 OK", [("Content-Length", "5")])
        return Recorded("long", [b"12345", b"6789"])
    if name == "no-content":
        start_response("204 No Content", [])
        return Recorded("no-content", [b""])
    if name == "empty":
        start_response("200 OK", [])
        return []
    return _text(start_response, "unknown framing case\n", "404 Not Found")


def stream_forever(environ, start_response):
    """Up to ~64 MiB in 64 KiB chunks, slowly: a client is expected to vanish meanwhile."""
    start_response("200 OK", [("Content-Type", "application/octet-stream")])
    return Recorded("forever", [b"z" * 65536] * 1024, pause=0.005)


def closed(environ, start_response):
    with _lock:
        names = list(_closed)
    return _json(start_response, names)


ROUTES = {
    "/environ": environ_report,
    "/input": read_input,
    "/echo-streaming": echo_streaming,
    "/write": write_callable,
    "/concurrency": concurrency,
    "/files": files,
    "/forever": stream_forever,
    "/closed": closed,
}


def app(environ, start_response):
    path = environ["PATH_INFO"]
    handler = ROUTES.get(path)
    if handler is None:
        prefix = path.rsplit("/", 1)[0]
        handler = {"/errors": errors, "/framing": framing}.get(prefix)
    if handler is None:
        return _text(start_response, "no such test route\n", "404 Not Found")
    return handler(environ, start_response)


def make_app():
    """A factory, for the `module:factory()` form of APP."""
    return app
