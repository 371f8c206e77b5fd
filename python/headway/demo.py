"""The demo app that headway serves when no app is named (WSGI callable `app`).

Its endpoints are the workloads of the seed experiments: /fixed (a 200 ms endpoint, seed
000), /fake_work (CPU then I/O wait then a body of a given size, seed 001), /random (a
random wait, seed 002), plus /hello and /sleep/<ms>. Every response carries X-Worker-Pid
so the lab can count each worker's share of the requests.

The routes only decide what to do (a Reply); the WSGI app here and the ASGI twin in
twins/demo_asgi.py do it, with a blocking or an awaited sleep.
"""

import os
import random
import time
from pathlib import Path
from urllib.parse import parse_qs

MAX_MS = 600_000
MAX_BYTES = 10 * 1024 * 1024
CONTENT_TYPE = "text/plain; charset=utf-8"

# The index page, shared with the twins (they read the same file).
INDEX = (Path(__file__).parent / "demo_index.txt").read_bytes()


class Reply:
    """What a route asks for: burn `cpu_ms` of CPU, wait `wait_ms`, then answer."""

    __slots__ = ("code", "status", "body", "cpu_ms", "wait_ms")

    def __init__(self, code, status, body, cpu_ms=0, wait_ms=0):
        self.code = code
        self.status = status
        self.body = body
        self.cpu_ms = cpu_ms
        self.wait_ms = wait_ms


class BadParameter(Exception):
    """A parameter that is not an integer in its range; the message is the 400 body."""


def ok(body, cpu_ms=0, wait_ms=0):
    return Reply(200, "200 OK", body, cpu_ms, wait_ms)


def integer(name, text, maximum):
    """Parse a decimal integer 0..maximum (ASCII digits only) or raise BadParameter."""
    if not (text.isascii() and text.isdigit()) or len(text) > 9 or int(text) > maximum:
        raise BadParameter(f"bad {name}: expected an integer from 0 to {maximum}")
    return int(text)


def parameter(params, name, default, maximum):
    values = params.get(name)
    return default if values is None else integer(name, values[0], maximum)


def index(params):
    return ok(INDEX)


HELLO = ok(b"Hello, world!\n")


def hello(params):
    return HELLO


def fixed(params):
    return ok(b"OK\n", wait_ms=200)


def slept(ms):
    return ok(b"slept %d ms\n" % ms, wait_ms=ms)


def fake_work(params):
    cpu_ms = parameter(params, "cpu_ms", 50, MAX_MS)
    iowait_ms = parameter(params, "iowait_ms", 250, MAX_MS)
    size = parameter(params, "bytes", 20000, MAX_BYTES)
    return ok(b"x" * size, cpu_ms=cpu_ms, wait_ms=iowait_ms)


def random_wait(params):
    return slept(random.randint(0, parameter(params, "max_ms", 1000, MAX_MS)))


ROUTES = {"/": index, "/hello": hello, "/fixed": fixed, "/fake_work": fake_work, "/random": random_wait}


def route(path, query):
    """The Reply for a request path and query string."""
    try:
        handler = ROUTES.get(path)
        if handler is not None:
            return handler(parse_qs(query, keep_blank_values=True) if query else {})
        if path.startswith("/sleep/"):
            return slept(integer("ms", path[7:], MAX_MS))
    except BadParameter as error:
        return Reply(400, "400 Bad Request", str(error).encode() + b"\n")
    return Reply(404, "404 Not Found", b"Not Found\n")


def _remember_pid():
    global _pid
    _pid = str(os.getpid())


_remember_pid()
os.register_at_fork(after_in_child=_remember_pid)  # a forked worker names itself, not its parent


def headers(reply):
    return [
        ("Content-Type", CONTENT_TYPE),
        ("Content-Length", str(len(reply.body))),
        ("X-Worker-Pid", _pid),
    ]


def burn_cpu(ms):
    """Spin until this thread has used `ms` of CPU time: under GIL contention that takes
    longer on the wall clock, as real CPU work would."""
    end = time.thread_time() + ms / 1000
    while time.thread_time() < end:
        pass


def app(environ, start_response):
    reply = route(environ["PATH_INFO"], environ["QUERY_STRING"])
    if reply.cpu_ms:
        burn_cpu(reply.cpu_ms)
    if reply.wait_ms:
        time.sleep(reply.wait_ms / 1000)
    start_response(reply.status, headers(reply))
    return [reply.body]
