"""The differential desync suite: ambiguous requests sent through headway to six kinds of worker
(the bundled one running WSGI and ASGI, and as --cmd workers Node, uvicorn with h11 and with
httptools, and Puma, each running an echo app that logs what it gets), and malformed responses
from a worker that sends them byte for byte.

For every request case and every backend: each response the client gets is well-framed (read by
a strict parser, strict.py), one per request the front answered, a refusal only last; the backend
saw exactly the requests whose echoes the client got, with the same bodies, in order, and nothing
else (a smuggled request would show as a record nobody was answered for); and every backend saw the
same requests as the others. For every response case: the client gets the worker's response
re-framed whole or a 502, never a message that swallows or spills into the next, and the next
request on the connection gets its own answer.

The corpus is in corpus.py; the echo apps and the malformed worker in apps/.
"""

import base64
import contextlib
import json
import shutil
import socket
import sys
import time
import uuid
from pathlib import Path

import pytest

from conftest import Server, require
from corpus import END, ODD, REQUESTS, RESPONSES
from strict import Cut, Malformed, Stream, read_response

HERE = Path(__file__).resolve().parent

APPS = HERE / "apps"
# How long a client waits for the rest of a response: far longer than any answer takes here, and
# than the front waits for a silent worker (--timeout), so that running out of it means the front
# is waiting for bytes that will not come.
TIMEOUT = 6
# One slot, so that everything a case makes the backend do happens on one connection before the
# next case; short timeouts, so that a case that leaves the front waiting for bytes ends in a 408.
FRONT = ["-w", "1", "-t", "1", "--header-timeout", "2", "--io-timeout", "2", "--timeout", "2", "--max-body", "64KiB",
         "--graceful-timeout", "1"]
UVICORN = f"{sys.executable} -m uvicorn --uds {{socket}} --no-access-log --log-level warning --http"
BACKENDS = {
    "wsgi": (["--interface", "wsgi", "echo_wsgi:app"], None),
    "asgi": (["--interface", "asgi", "echo_asgi:app"], None),
    "node": (["--cmd", "node echo.js"], "node"),
    "uvicorn-h11": (["--cmd", f"{UVICORN} h11 echo_asgi:app"], None),
    "uvicorn-httptools": (["--cmd", f"{UVICORN} httptools echo_asgi:app"], None),
    "puma": (["--cmd", "puma -t 1:1 -b unix://{socket} echo.ru"], "puma"),
}

# Request cases the backends still disagree on, for what the front's request parser lets through.
# Nothing is expected to fail: a case that did would be marked here with the finding that fixes it.
REQUEST_XFAIL = {}
ODD_XFAIL = {}
RESPONSE_XFAIL = {}


def xfail_if(reason):
    return [pytest.mark.xfail(strict=True, reason=reason)] if reason else []


class Backend:
    """headway in front of one echo app, and the app's log of what it got."""

    def __init__(self, name, args, directory):
        self.name = name
        self.log = directory / f"{name}.log"
        self.log.touch()
        self.server = Server(FRONT + args, cwd=APPS, env={"ECHO_LOG": str(self.log)})

    def exchange(self, raw, head=False):
        """Sends `raw` on a new connection; returns every response until the connection ends,
        and whatever was left that is not a response (a `Malformed` raises)."""
        responses = []
        with socket.create_connection(("127.0.0.1", self.server.port), timeout=TIMEOUT) as sock:
            try:
                sock.sendall(raw)
            except OSError:
                pass  # refused before all of it was read: the answer says so
            stream = Stream(sock)
            while not stream.at_end():
                responses.append(read_response(stream, "HEAD" if head and not responses else "GET"))
        return responses

    def records(self, raw, head=False):
        """The responses to `raw` and what the app got meanwhile (up to a sentinel request, which
        a single slot serves only after everything before it)."""
        offset = self.log.stat().st_size
        responses = self.exchange(raw, head)
        sentinel = f"/sentinel-{uuid.uuid4().hex}"
        answered = self.exchange(f"GET {sentinel} HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n".encode())
        assert [response.status for response in answered] == [200], answered
        deadline = time.monotonic() + 15
        while True:
            with open(self.log, "rb") as log:
                log.seek(offset)
                seen = [json.loads(line) for line in log.read().splitlines()]
            paths = [record["path"] for record in seen]
            if sentinel in paths:
                return responses, seen[: paths.index(sentinel)]
            assert time.monotonic() < deadline, f"{self.name}: the sentinel never reached the app"
            time.sleep(0.01)


@pytest.fixture(scope="module")
def backends(tmp_path_factory):
    directory = tmp_path_factory.mktemp("desync")
    started = {}
    try:
        for name, (args, needs) in BACKENDS.items():
            if needs is None or shutil.which(needs):
                started[name] = Backend(name, args, directory)
        yield started
    finally:
        for backend in started.values():
            backend.server.stop()


def echoed(response):
    """The request an echo app saw, from its answer; None for an answer the front (or the
    backend's own server) made. An answer to HEAD has no body: only its method is known."""
    if response.status != 200 or response.header("content-type") != "application/json":
        return None
    return json.loads(response.body) if response.body else {"method": "HEAD"}


@contextlib.contextmanager
def asked(server, target):
    """A connection that asked `server` for `target`: the socket, its stream, the response, and
    the `Cut` if the connection ended inside it (then the response is None)."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=TIMEOUT) as sock:
        stream = Stream(sock)
        sock.sendall(f"GET {target} HTTP/1.1\r\nHost: a\r\n\r\n".encode())
        try:
            first, cut = read_response(stream), None
        except Cut as error:
            first, cut = None, error
        yield sock, stream, first, cut


def assert_cut_in_the_body(cut, stream):
    """A response cut short the way a client can tell: its head arrived whole, promising a body
    longer than came before the connection ended; no answer at all, or a cut head, is not that."""
    assert cut.head is not None, f"the connection ended before a response's head: {cut}"
    assert stream.ended, "the connection ended"
    assert cut.head.header("content-length") or cut.head.header("transfer-encoding"), cut.head


def seen_as(record, known=("method", "path", "query", "body")):
    return {key: record[key] for key in known}


@pytest.mark.parametrize(
    "raw", [pytest.param(raw, marks=xfail_if(REQUEST_XFAIL.get(case)), id=case) for case, raw in REQUESTS.items()]
)
def test_every_backend_sees_exactly_the_requests_the_front_answered(backends, raw):
    signatures = {}
    for name, backend in backends.items():
        try:
            responses, records = backend.records(raw + END, head=raw.startswith(b"HEAD"))
        except Malformed as error:
            pytest.fail(f"{name}: not a well-framed response: {error}")
        echoes = [echoed(response) for response in responses]
        assert responses, f"{name}: no answer at all"
        # One answer per request, the last END's or a refusal that ends the connection (a
        # backend's own refusal of a request may come before).
        if echoes[-1] is None or echoes[-1].get("path") != "/end":
            assert responses[-1].closes, f"{name}: the last answer is not END's and did not close: {responses[-1]}"
        answered = [seen_as(echo, echo.keys() & {"method", "path", "query", "body"}) for echo in echoes if echo]
        seen = [seen_as(record, answer.keys()) for record, answer in zip(records, answered)]
        assert len(records) == len(answered) and seen == answered, f"{name}: the app saw other requests: {records}"
        signatures[name] = [(response.status, echo and (echo["method"], base64.b64decode(echo.get("body", ""))))
                            for response, echo in zip(responses, echoes)]
    first = next(iter(signatures.values()))
    different = {name: signature for name, signature in signatures.items() if signature != first}
    assert not different, f"backends disagree: {signatures}"


def odd_cases():
    return [
        pytest.param(backend, case, marks=xfail_if(ODD_XFAIL.get((backend, case))), id=f"{backend}-{case}")
        for backend in BACKENDS
        for case in ODD
    ]


@pytest.mark.parametrize("backend, case", odd_cases())
def test_an_app_answering_against_its_own_framing_breaks_no_other_response(backends, backend, case):
    if backend not in backends:
        require(BACKENDS[backend][1], "scripts/setup --test installs it")
    with asked(backends[backend].server, f"/odd/{case}") as (sock, stream, first, cut):
        if first is None:
            assert_cut_in_the_body(cut, stream)
            return
        if first.closes:
            assert stream.at_end()
            return
        sock.sendall(END)
        last = read_response(stream)
        # Its own answer, or a clean 502: a server may close its connection after a response it
        # broke, and a request the front sent on it meanwhile fails.
        assert last.status == 502 or (echoed(last) or {}).get("path") == "/end", (first, last)
        assert stream.at_end()


def response_cases():
    return [
        pytest.param(case, expected, marks=xfail_if(RESPONSE_XFAIL.get(case)), id=case)
        for case, (_, _, expected) in RESPONSES.items()
    ]


@pytest.fixture(scope="module")
def raw_worker():
    server = Server(FRONT + ["--cmd", f"{sys.executable} raw_worker.py {{socket}}"], cwd=APPS)
    yield server
    server.stop()


@pytest.mark.parametrize("case, expected", response_cases())
def test_a_malformed_worker_response_is_a_502_or_whole_and_never_spills(raw_worker, case, expected):
    with asked(raw_worker, f"/raw/{case}") as (sock, stream, first, cut):
        if first is None:
            assert "cut" in expected, f"the connection was cut: {cut}"
            assert_cut_in_the_body(cut, stream)
            return
        outcome = first.status if first.status != 200 else first.body
        assert outcome in expected, first
        if first.closes:
            assert stream.at_end()
            return
        # The connection goes on: the next request gets its own answer, nothing of the last.
        sock.sendall(b"GET /ok HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
        try:
            after = read_response(stream)
        except Malformed as error:
            pytest.fail(f"the next response is not well-framed: {error}")
        assert (after.status, after.body) == (200, b"ok"), after
        assert stream.at_end(), "bytes after the last response"
