"""The demo app that headway serves when no app is named (WSGI callable `app`).

Its endpoints are the workloads of the seed experiments: /fixed (a 200 ms endpoint, seed
000), /fake_work (CPU then I/O wait then a body of a given size, seed 001), /random (a
random wait, seed 002), plus /hello and /sleep/<ms>; and for the lab's throughput scenario
TechEmpower's "json" (/json: a small object serialized per request) and "fortunes"
(/fortunes: a sqlite query, sorted, rendered through a template, HTML-escaped). Every
response carries X-Worker-Pid so the lab can count each worker's share of the requests.

The routes only decide what to do (a Reply); the WSGI app here and the ASGI twin in
twins/demo_asgi.py do it, with a blocking or an awaited sleep.
"""

import json
import os
import random
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any, Callable
from urllib.parse import parse_qs

MAX_MS = 600_000
MAX_BYTES = 10 * 1024 * 1024
CONTENT_TYPE = "text/plain; charset=utf-8"
JSON_TYPE = "application/json"
HTML_TYPE = "text/html; charset=utf-8"

# The index page and TechEmpower's fortunes (one a line, the id is the line number), shared
# with the twins (they read the same files).
INDEX = (Path(__file__).parent / "demo_index.txt").read_bytes()
FORTUNES = (Path(__file__).parent / "demo_fortunes.txt").read_text(encoding="utf-8").splitlines()

# A request's query, as parse_qs gives it.
Params = dict[str, list[str]]


class Reply:
    """What a route asks for: burn `cpu_ms` of CPU, wait `wait_ms`, then answer."""

    __slots__ = ("code", "status", "body", "cpu_ms", "wait_ms", "content_type")

    def __init__(self, code: int, status: str, body: bytes, cpu_ms: int = 0, wait_ms: int = 0,
                 content_type: str = CONTENT_TYPE) -> None:
        self.code = code
        self.status = status
        self.body = body
        self.cpu_ms = cpu_ms
        self.wait_ms = wait_ms
        self.content_type = content_type


class BadParameter(Exception):
    """A parameter that is not an integer in its range; the message is the 400 body."""


def ok(body: bytes, cpu_ms: int = 0, wait_ms: int = 0, content_type: str = CONTENT_TYPE) -> Reply:
    return Reply(200, "200 OK", body, cpu_ms, wait_ms, content_type)


def integer(name: str, text: str, maximum: int) -> int:
    """Parse a decimal integer 0..maximum (ASCII digits only) or raise BadParameter."""
    if not (text.isascii() and text.isdigit()) or len(text) > 9 or int(text) > maximum:
        raise BadParameter(f"bad {name}: expected an integer from 0 to {maximum}")
    return int(text)


def parameter(params: Params, name: str, default: int, maximum: int) -> int:
    values = params.get(name)
    return default if values is None else integer(name, values[0], maximum)


def index(params: Params) -> Reply:
    return ok(INDEX)


HELLO = ok(b"Hello, world!\n")


def hello(params: Params) -> Reply:
    return HELLO


def fixed(params: Params) -> Reply:
    return ok(b"OK\n", wait_ms=200)


def slept(ms: int) -> Reply:
    return ok(b"slept %d ms\n" % ms, wait_ms=ms)


def fake_work(params: Params) -> Reply:
    cpu_ms = parameter(params, "cpu_ms", 50, MAX_MS)
    iowait_ms = parameter(params, "iowait_ms", 250, MAX_MS)
    size = parameter(params, "bytes", 20000, MAX_BYTES)
    return ok(b"x" * size, cpu_ms=cpu_ms, wait_ms=iowait_ms)


def random_wait(params: Params) -> Reply:
    return slept(random.randint(0, parameter(params, "max_ms", 1000, MAX_MS)))


def json_message(params: Params) -> Reply:
    # Compact, with a final newline: the bytes Flask's jsonify and the twins' serializers give.
    return ok(json.dumps({"message": "Hello, World!"}, separators=(",", ":")).encode() + b"\n", content_type=JSON_TYPE)


def _open_fortunes() -> None:
    """The fortunes database: in memory, one connection shared by the threads of this process (a
    lock keeps one query at a time on it). Made at import, and again in a child forked after it
    (a server that preloads the app): SQLite forbids using a connection across fork."""
    global _database, _database_lock
    _database = sqlite3.connect(":memory:", check_same_thread=False)
    _database.execute("CREATE TABLE fortune (id INTEGER PRIMARY KEY, message TEXT NOT NULL)")
    _database.executemany("INSERT INTO fortune VALUES (?, ?)", enumerate(FORTUNES, 1))
    _database_lock = threading.Lock()


_open_fortunes()
os.register_at_fork(after_in_child=_open_fortunes)


def fortune_rows() -> list[tuple[int, str]]:
    """(id, message) of every fortune in the database and one added at request time, sorted by
    message: TechEmpower's fortunes test up to the template."""
    with _database_lock:
        rows = _database.execute("SELECT id, message FROM fortune").fetchall()
    rows.append((0, "Additional fortune added at request time."))
    rows.sort(key=lambda row: row[1])
    return rows


# What Jinja (MarkupSafe) escapes, spelt as it spells it: the demo, its twins and the Flask app
# render the same bytes.
HTML_ESCAPES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&#34;", "'": "&#39;"})
FORTUNES_PAGE = (
    "<!DOCTYPE html><html><head><title>Fortunes</title></head><body>"
    "<table><tr><th>id</th><th>message</th></tr>{rows}</table></body></html>"
)
FORTUNE_ROW = "<tr><td>{id}</td><td>{message}</td></tr>"


def fortunes(params: Params) -> Reply:
    rows = "".join(
        FORTUNE_ROW.format(id=fortune_id, message=message.translate(HTML_ESCAPES))
        for fortune_id, message in fortune_rows()
    )
    return ok(FORTUNES_PAGE.format(rows=rows).encode(), content_type=HTML_TYPE)


ROUTES = {
    "/": index,
    "/hello": hello,
    "/fixed": fixed,
    "/fake_work": fake_work,
    "/random": random_wait,
    "/json": json_message,
    "/fortunes": fortunes,
}


def route(path: str, query: str) -> Reply:
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


def _remember_pid() -> None:
    global _pid
    _pid = str(os.getpid())


_remember_pid()
os.register_at_fork(after_in_child=_remember_pid)  # a forked worker names itself, not its parent


def headers(reply: Reply) -> list[tuple[str, str]]:
    return [
        ("Content-Type", reply.content_type),
        ("Content-Length", str(len(reply.body))),
        ("X-Worker-Pid", _pid),
    ]


def burn_cpu(ms: float) -> None:
    """Spin until this thread has used `ms` of CPU time: under GIL contention that takes
    longer on the wall clock, as real CPU work would."""
    end = time.thread_time() + ms / 1000
    while time.thread_time() < end:
        pass


def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
    reply = route(environ["PATH_INFO"], environ["QUERY_STRING"])
    if reply.cpu_ms:
        burn_cpu(reply.cpu_ms)
    if reply.wait_ms:
        time.sleep(reply.wait_ms / 1000)
    start_response(reply.status, headers(reply))
    return [reply.body]
