"""Unit tests of the worker's socket-free parts: headway.worker.http and headway.worker.wsgi."""

import os
import re
import sys

import pytest

from headway.demo import app
from headway.worker.http import (
    ChunkedBody,
    FixedBody,
    HTTPError,
    PeerClosed,
    Reader,
    chunk,
    date_line,
    error_response,
    parse_request,
)
from headway.worker.wsgi import InputStream, StartResponse


def feeder(data, step=1):
    """A recv callable handing out `data` `step` bytes at a time, then b'' (peer closed)."""
    pieces = [data[i:i + step] for i in range(0, len(data), step)]

    def recv(size):
        return pieces.pop(0) if pieces else b""
    return recv


def rest(reader):
    """Everything the reader still has, up to the peer's close."""
    parts = []
    while True:
        data = reader.read_some(100)
        if not data:
            return b"".join(parts)
        parts.append(data)


# --- parse_request ---------------------------------------------------------------------

def test_parse_request_fields():
    request = parse_request(
        b"POST /a%20b/c?x=1&y=2 HTTP/1.1\r\nHost: h:81\r\nContent-Length: 3\r\n"
        b"content-type: text/x\r\nX-A:  one \r\nX-A: two\r\nCookie: a=1\r\nCookie: b=2\r\nX_Evil: 1")
    assert (request.method, request.path, request.query, request.version) == ("POST", "/a%20b/c", "x=1&y=2", "HTTP/1.1")
    assert request.headers == {
        "HTTP_HOST": "h:81", "CONTENT_LENGTH": "3", "CONTENT_TYPE": "text/x",
        "HTTP_X_A": "one, two", "HTTP_COOKIE": "a=1; b=2",
    }
    assert request.content_length == 3
    assert (request.chunked, request.keep_alive, request.expect_continue) == (False, True, False)


@pytest.mark.parametrize("version, connection, keep_alive", [
    ("HTTP/1.1", None, True),
    ("HTTP/1.1", "close", False),
    ("HTTP/1.1", "Keep-Alive, Close", False),
    ("HTTP/1.1", "closed-captions", True),
    ("HTTP/1.0", None, False),
    ("HTTP/1.0", "keep-alive", True),
    ("HTTP/1.0", "Keep-Alive", True),
])
def test_keep_alive_rules(version, connection, keep_alive):
    head = f"GET / {version}\r\nHost: x"
    if connection:
        head += "\r\nConnection: " + connection
    assert parse_request(head.encode()).keep_alive is keep_alive


def test_chunked_and_expect():
    request = parse_request(b"PUT / HTTP/1.1\r\nTransfer-Encoding: Chunked\r\nExpect: 100-Continue")
    assert request.chunked and request.expect_continue and request.content_length is None
    assert not parse_request(b"PUT / HTTP/1.0\r\nExpect: 100-continue").expect_continue


def test_asterisk_and_absolute_targets():
    assert (parse_request(b"OPTIONS * HTTP/1.1").path, parse_request(b"OPTIONS * HTTP/1.1").query) == ("", "")
    request = parse_request(b"GET https://example.com:8443/p/q?z=9 HTTP/1.1")
    assert (request.path, request.query) == ("/p/q", "z=9")
    assert parse_request(b"GET http://example.com HTTP/1.1").path == "/"


@pytest.mark.parametrize("head, status", [
    (b"GET / HTTP/1.1 x", 400),
    (b"GET  / HTTP/1.1", 400),
    (b"G(T / HTTP/1.1", 400),
    (b"GET / HTTP/3.0", 505),
    (b"GET / HTTX/1.1", 400),
    (b"GET nothing HTTP/1.1", 400),
    (b"GET / HTTP/1.1\r\nNo-Colon", 400),
    (b"GET / HTTP/1.1\r\nBad Name: x", 400),
    (b"GET / HTTP/1.1\r\n: empty name", 400),
    (b"GET / HTTP/1.1\r\nA: b\rc", 400),
    (b"GET / HTTP/1.1\r\nA: b\x00", 400),
    (b"GET / HTTP/1.1\r\nContent-Length: 1e3", 400),
    (b"GET / HTTP/1.1\r\nContent-Length: \xb2", 400),  # a latin-1 superscript two is not a digit
    (b"GET / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2", 400),
    (b"GET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 2", 400),
    (b"GET / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked", 501),
    (b"GET / HTTP/1.1\r\nExpect: something", 417),
    (b"GET / HTTP/1.1" + b"\r\nA: b" * 101, 431),
])
def test_malformed_heads(head, status):
    with pytest.raises(HTTPError) as raised:
        parse_request(head)
    assert raised.value.status == status


def test_same_content_length_twice_is_accepted():
    assert parse_request(b"GET / HTTP/1.1\r\nContent-Length: 2\r\nContent-Length: 2").content_length == 2


# --- Reader ----------------------------------------------------------------------------

def test_read_head_byte_by_byte_with_pipelining():
    reader = Reader(feeder(b"\r\nGET /1 HTTP/1.1\r\nA: b\r\n\r\n\r\nGET /2 HTTP/1.1\r\n\r\nrest"))
    assert reader.read_head() == b"GET /1 HTTP/1.1\r\nA: b"
    assert reader.read_head() == b"GET /2 HTTP/1.1"
    assert rest(reader) == b"rest"
    assert reader.read_head() is None


@pytest.mark.parametrize("step", [1, 1000])
def test_read_head_skips_empty_lines_between_requests(step):
    reader = Reader(feeder(b"GET /1 HTTP/1.1\r\n\r\n\r\n\r\n\r\nGET /2 HTTP/1.1\r\n\r\n\r\n", step))
    heads = [reader.read_head() for _ in range(3)]
    assert heads == [b"GET /1 HTTP/1.1", b"GET /2 HTTP/1.1", None]


def test_read_head_peer_closed_mid_head():
    with pytest.raises(PeerClosed):
        Reader(feeder(b"GET / HTTP/1.1\r\n")).read_head()


def test_read_head_too_large():
    with pytest.raises(HTTPError) as raised:
        Reader(feeder(b"GET / HTTP/1.1\r\nA: " + b"x" * 70000, 4096)).read_head()
    assert raised.value.status == 431


# --- bodies ----------------------------------------------------------------------------

def read_all(body, limit=3):
    parts = []
    while True:
        data = body.read_some(limit)
        if not data:
            return b"".join(parts)
        assert len(data) <= limit
        parts.append(data)


def test_fixed_body_stops_at_its_length():
    reader = Reader(feeder(b"0123456789NEXT", 4))
    assert read_all(FixedBody(reader, 10)) == b"0123456789"
    assert rest(reader) == b"NEXT"


def test_fixed_body_cut_short():
    with pytest.raises(PeerClosed):
        read_all(FixedBody(Reader(feeder(b"abc")), 10))


@pytest.mark.parametrize("step", [1, 2, 7, 1000])
def test_chunked_body_in_any_pieces(step):
    wire = b"4;name=value\r\nWiki\r\n5\r\npedia\r\nE\r\n in\r\n\r\nchunks.\r\n0\r\nA: b\r\nC: d\r\n\r\nNEXT"
    reader = Reader(feeder(wire, step))
    assert read_all(ChunkedBody(reader)) == b"Wikipedia in\r\n\r\nchunks."
    assert rest(reader) == b"NEXT"


@pytest.mark.parametrize("wire", [
    b"g\r\n", b"-1\r\n", b"\r\n", b"1234567890123456\r\n", b"3\r\nabcd\r\n",
])
def test_chunked_body_errors(wire):
    with pytest.raises(HTTPError):
        read_all(ChunkedBody(Reader(feeder(wire + b"0\r\n\r\n"))))


def test_chunked_body_cut_short():
    with pytest.raises(PeerClosed):
        read_all(ChunkedBody(Reader(feeder(b"5\r\nab"))))


def test_drain_respects_its_limit():
    assert FixedBody(Reader(feeder(b"x" * 10)), 10).drain(10)
    assert not FixedBody(Reader(feeder(b"x" * 11)), 11).drain(10)
    assert ChunkedBody(Reader(feeder(b"5\r\nxxxxx\r\n0\r\n\r\n"))).drain(10)
    assert not ChunkedBody(Reader(feeder(b"9\r\nxxxxxxxxx\r\n9\r\nxxxxxxxxx\r\n0\r\n\r\n"))).drain(10)


# --- InputStream -----------------------------------------------------------------------

def stream(data, step=3, hook=None):
    return InputStream(FixedBody(Reader(feeder(data, step)), len(data)), hook)


def test_input_read_sizes_are_exact_until_the_end():
    body = stream(b"abcdefghij")
    assert body.read(0) == b""
    assert body.read(4) == b"abcd"  # more than one recv of 3 bytes
    assert body.readline() == b"efghij"
    assert body.read(4) == b""
    assert body.read() == b""


def test_input_readline_with_limits_and_iteration():
    data = b"one\ntwo\n\nlong line here\nlast"
    body = stream(data)
    assert body.readline(2) == b"on"
    assert body.readline(100) == b"e\n"
    assert body.readline(None) == b"two\n"
    assert list(body) == [b"\n", b"long line here\n", b"last"]
    assert stream(data).readlines() == data.splitlines(keepends=True)
    assert stream(data).readlines(5) == [b"one\n", b"two\n"]


def test_input_read_all_after_partial_reads():
    body = stream(b"head\nrest of it", 2)
    assert body.readline() == b"head\n"
    assert body.read(-1) == b"rest of it"


def test_input_hook_runs_once_before_the_first_read():
    calls = []
    body = stream(b"abc", hook=lambda: calls.append("continue"))
    assert calls == []
    body.read(0)
    assert calls == []  # reading nothing needs no bytes from the client
    body.read(1)
    body.read()
    assert calls == ["continue"]


# --- StartResponse ---------------------------------------------------------------------

class Recorder(StartResponse):
    def write(self, data):
        raise AssertionError("not called in these tests")


def test_start_response_records_and_returns_write():
    response = Recorder()
    write = response.start_response("201 Created", [("Content-Length", "7"), ("Date", "x"), ("X-A", "é")])
    assert write == response.write
    assert (response.code, response.content_length, response.has_date) == (201, 7, True)
    assert response.header_block == "Content-Length: 7\r\nDate: x\r\nX-A: é\r\n".encode("latin-1")


@pytest.mark.parametrize("status, headers, error", [
    (b"200 OK", [], TypeError),
    ("200", [], ValueError),
    ("20 OK", [], ValueError),
    ("200 OK\r\nX: y", [], ValueError),
    ("200 ✓", [], UnicodeEncodeError),
    ("200 OK", (("A", "b"),), TypeError),
    ("200 OK", [["A", "b"]], TypeError),
    ("200 OK", [("A", "b", "c")], TypeError),
    ("200 OK", [(b"A", "b")], TypeError),
    ("200 OK", [("A", b"b")], TypeError),
    ("200 OK", [("A", 1)], TypeError),
    ("200 OK", [("A B", "c")], ValueError),
    ("200 OK", [("A", "b\r\nSet-Cookie: evil")], ValueError),
    ("200 OK", [("A", "b\nc")], ValueError),
    ("200 OK", [("A", "✓")], ValueError),
    ("200 OK", [("Content-Length", "-1")], ValueError),
    ("200 OK", [("Content-Length", "1"), ("Content-Length", "2")], ValueError),
    ("200 OK", [("Connection", "close")], ValueError),
    ("200 OK", [("transfer-encoding", "chunked")], ValueError),
    ("200 OK", [("Keep-Alive", "timeout=5")], ValueError),
    ("200 OK", [("Upgrade", "h2c")], ValueError),
])
def test_start_response_rejects(status, headers, error):
    with pytest.raises(error):
        Recorder().start_response(status, headers)


def test_start_response_twice_needs_exc_info():
    response = Recorder()
    response.start_response("200 OK", [])
    with pytest.raises(RuntimeError):
        response.start_response("500 Oops", [])
    try:
        raise KeyError("boom")
    except KeyError:
        response.start_response("500 Oops", [], sys.exc_info())
    assert response.code == 500
    response.headers_sent = True
    with pytest.raises(KeyError, match="boom"):
        try:
            raise KeyError("boom")
        except KeyError:
            response.start_response("502 Late", [], sys.exc_info())
    assert response.code == 500


# --- framing helpers -------------------------------------------------------------------

def test_framing_helpers():
    assert chunk(b"x" * 26) == b"1a\r\n" + b"x" * 26 + b"\r\n"
    assert re.fullmatch(rb"Date: \w{3}, \d\d \w{3} \d{4} \d\d:\d\d:\d\d GMT\r\n", date_line())
    response = error_response(400, "bad request line")
    assert response.startswith(b"HTTP/1.1 400 Bad Request\r\n")
    assert response.endswith(b"Content-Length: 17\r\nConnection: close\r\n\r\nbad request line\n")
    assert error_response(500, "oops", with_body=False).endswith(b"\r\n\r\n")


# --- the demo app ----------------------------------------------------------------------

def test_demo_names_the_process_it_runs_in_even_after_fork():

    def pid_header(environ):
        seen = {}
        app(environ, lambda status, headers: seen.update(headers))
        return seen["X-Worker-Pid"]

    environ = {"PATH_INFO": "/hello", "QUERY_STRING": ""}
    assert pid_header(environ) == str(os.getpid())
    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:  # the child reports what the demo says its pid is, then leaves at once
        os.write(write_end, pid_header(environ).encode())
        os._exit(0)
    os.close(write_end)
    reported = os.read(read_end, 64).decode()
    os.close(read_end)
    os.waitpid(child, 0)
    assert reported == str(child)
