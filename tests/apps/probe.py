"""A WSGI app that lets tests observe what reaches the app.

Run with one worker (`-w 1`) so every request sees the same process state:
- /record?id=X&ms=N  appends X to the service log when it starts, sleeps N ms, answers X
- /log               the service log as JSON (does not record itself)
- /busy?ms=N         counts requests running at once, sleeps N ms; /max_busy reads the peak
- /bytes?n=N         a body of N bytes, sent in one piece (the server can give a length)
- /stream?n=N&k=K    N bytes in K pieces with no Content-Length (chunked on the wire)
- /pattern?n=N&k=K&length=L
                     N bytes of `pattern(0, N)` in K pieces, declaring a Content-Length of L (N
                     unless given): a large body whose every byte says where it belongs
- /echo              the request body, and what the environ said about it (SERVER_PROTOCOL too),
                     as JSON
- /digest            the request body's length and SHA-256, read from wsgi.input in pieces; a
                     read that fails for a client that left mid-body is put in the service log
                     ("digest cut: " and the error's class)
- /environ           every environ key with the type of its value, as JSON
- /closing?id=X&ms=N an iterable (pausing N ms between its two pieces) whose close() is
                     recorded; /closed lists the recorded ids
- /endless?id=X      a piece every 20 ms for a minute, then close() recorded as above
- /crash             raises before start_response
- /bodiless?status=S answers status S with no body and no Content-Length (204, 304, or any
                     status for HEAD, as frameworks answer HEAD: the fields, an empty body)
- /files             how many regular files the worker process holds open (sockets, pipes and
                     devices left out: their number moves with the slots' connections)
- /spaced            header values with blanks around them, as Django's WSGI handler writes
                     `Set-Cookie`: `Set-Cookie: " a=b "`, `X-Spaced: "\t1 2 \t"`
"""

import hashlib
import json
import os
import stat
import threading
import time
from urllib.parse import parse_qs

_lock = threading.Lock()
_log = []
_closed = []
_busy = 0
_max_busy = 0


def _params(environ):
    return {k: v[0] for k, v in parse_qs(environ.get("QUERY_STRING", "")).items()}


def _reply(start_response, body, status="200 OK", content_type="text/plain"):
    if isinstance(body, str):
        body = body.encode()
    start_response(status, [("Content-Type", content_type), ("Content-Length", str(len(body))),
                            ("X-Worker-Pid", str(os.getpid()))])
    return [body]


def _open_files():
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            count += stat.S_ISREG(os.stat(f"/proc/self/fd/{fd}").st_mode)
        except FileNotFoundError:
            pass  # the listing's own descriptor, closed once the listing was read
    return count


def _json(start_response, value):
    return _reply(start_response, json.dumps(value), content_type="application/json")


def record(environ, start_response):
    params = _params(environ)
    with _lock:
        _log.append(params["id"])
    time.sleep(int(params.get("ms", "0")) / 1000)
    return _reply(start_response, params["id"])


def busy(environ, start_response):
    global _busy, _max_busy
    with _lock:
        _busy += 1
        _max_busy = max(_max_busy, _busy)
    try:
        time.sleep(int(_params(environ).get("ms", "100")) / 1000)
    finally:
        with _lock:
            _busy -= 1
    return _reply(start_response, "done")


def stream(environ, start_response):
    params = _params(environ)
    total, pieces = int(params["n"]), int(params.get("k", "4"))
    size = max(1, total // pieces)
    start_response("200 OK", [("Content-Type", "application/octet-stream")])

    def body():
        sent = 0
        while sent < total:
            piece = min(size, total - sent)
            yield b"x" * piece
            sent += piece
            time.sleep(0.001)  # make the pieces leave the worker separately

    return body()


def pattern(start, length):
    """The bytes at `start`..`start + length` of an endless run of 0..250: any byte out of place
    shows."""
    run = bytes(range(251))
    first = start % 251
    return (run * ((first + length) // 251 + 1))[first:first + length]


def patterned(environ, start_response):
    params = _params(environ)
    total, pieces = int(params["n"]), int(params.get("k", "4"))
    size = max(1, total // pieces)
    length = params.get("length", str(total))
    start_response("200 OK", [("Content-Type", "application/octet-stream"), ("Content-Length", length)])
    return (pattern(at, min(size, total - at)) for at in range(0, total, size))


def echo(environ, start_response):
    data = environ["wsgi.input"].read()
    return _json(start_response, {
        "body": data.decode("latin-1"),
        "content_length": environ.get("CONTENT_LENGTH", ""),
        "method": environ["REQUEST_METHOD"],
        "protocol": environ["SERVER_PROTOCOL"],
        "path": environ["PATH_INFO"],
        "script_name": environ["SCRIPT_NAME"],
        "query": environ["QUERY_STRING"],
        "remote_addr": environ.get("REMOTE_ADDR", ""),
        "url_scheme": environ["wsgi.url_scheme"],
        "server": [environ.get("SERVER_NAME", ""), environ.get("SERVER_PORT", "")],
        "headers": {k: v for k, v in environ.items() if k.startswith("HTTP_")},
    })


def digest(environ, start_response):
    """The body's length and digest, read in pieces of `piece` bytes (all at once: -1)."""
    sha, length, stream = hashlib.sha256(), 0, environ["wsgi.input"]
    size = int(_params(environ).get("piece", 65536))
    try:
        while True:
            piece = stream.read(size)
            if not piece:
                break
            sha.update(piece)
            length += len(piece)
            if size < 0:
                break
    except ConnectionError as error:
        with _lock:
            _log.append(f"digest cut: {type(error).__name__}")
        raise
    return _json(start_response, {"length": length, "sha256": sha.hexdigest()})


def environ_types(environ, start_response):
    return _json(start_response, {k: type(v).__name__ for k, v in environ.items()})


class _Closing:
    def __init__(self, ident, pause):
        self.ident = ident
        self.pause = pause

    def __iter__(self):
        yield b"closing "
        time.sleep(self.pause)
        yield self.ident.encode()

    def close(self):
        with _lock:
            _closed.append(self.ident)


class _Endless(_Closing):
    def __iter__(self):
        for _ in range(3000):
            yield b"piece\n"
            time.sleep(0.02)


def endless(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain")])
    return _Endless(_params(environ)["id"], 0)


def closing(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain")])
    params = _params(environ)
    return _Closing(params["id"], int(params.get("ms", "0")) / 1000)


def bodiless(environ, start_response):
    start_response(_params(environ)["status"], [("Content-Type", "text/plain")])
    return []


def spaced(environ, start_response):
    start_response("200 OK", [("Content-Length", "0"), ("Set-Cookie", " a=b "), ("X-Spaced", "\t1 2 \t")])
    return []


def crash(environ, start_response):
    raise RuntimeError("probe crash")


ROUTES = {
    "/record": record,
    "/log": lambda env, sr: _json(sr, list(_log)),
    "/busy": busy,
    "/max_busy": lambda env, sr: _json(sr, _max_busy),
    "/bytes": lambda env, sr: _reply(sr, b"b" * int(_params(env)["n"]), content_type="application/octet-stream"),
    "/stream": stream,
    "/pattern": patterned,
    "/echo": echo,
    "/digest": digest,
    "/environ": environ_types,
    "/closing": closing,
    "/closed": lambda env, sr: _json(sr, list(_closed)),
    "/endless": endless,
    "/crash": crash,
    "/files": lambda env, sr: _json(sr, _open_files()),
    "/bodiless": bodiless,
    "/spaced": spaced,
}


def app(environ, start_response):
    handler = ROUTES.get(environ["PATH_INFO"])
    if handler is None:
        return _reply(start_response, "not found", status="404 Not Found")
    return handler(environ, start_response)
