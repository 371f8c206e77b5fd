"""The front's HTTP/1.1: what clients see on the wire, for good and bad input."""

import hashlib
import json
import os
import re
import socket
import threading
import time

import pytest

from conftest import (
    ECHO_APPS,
    SPACED_HEADER_WORKERS,
    read_response,
    request_bytes,
    send_request,
    upload_head,
    upload_queued_early,
    wait_until,
)


def exchange(server, raw, timeout=10):
    """Sends raw bytes on a new connection; returns everything the server sent until it
    closed the connection."""
    with server.connect(timeout) as sock:
        sock.sendall(raw)
        chunks = []
        while True:
            try:
                chunk = sock.recv(65536)
            except ConnectionResetError:
                break
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks)


def assert_refused(reply, status):
    head, _, body = reply.partition(b"\r\n\r\n")
    assert head.startswith(f"HTTP/1.1 {status} ".encode()), reply[:200]
    assert b"\r\nconnection: close" in head.lower()
    assert b"content-type: text/plain" in head.lower()
    length = int(next(line for line in head.lower().split(b"\r\n") if line.startswith(b"content-length:"))[15:])
    assert 0 < length < 200 and body.endswith(b"\n"), body
    assert len(body) == length, "nothing after the refusal"


@pytest.fixture
def server(serve):
    return serve("-w", "1", "-t", "2", "--max-body", "1000", "--max-header-size", "4KiB",
                 "--header-timeout", "1", "probe:app")


BAD_REQUESTS = [
    pytest.param(b"GET / HTTP/1.1\r\nHost: a\r\nBad Header: x\r\n\r\n", 400, id="malformed-header"),
    pytest.param(b"G@T / HTTP/1.1\r\nHost: a\r\n\r\n", 400, id="malformed-method"),
    pytest.param(b"GET / HTTP/1.1\r\n\r\n", 400, id="missing-host"),
    pytest.param(b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400, id="two-hosts"),
    # No request target has a fragment (RFC 9112 section 3.2); an app would be given it as data.
    pytest.param(b"GET /echo#b HTTP/1.1\r\nHost: a\r\n\r\n", 400, id="fragment"),
    pytest.param(b"GET /echo?q=1#b HTTP/1.1\r\nHost: a\r\n\r\n", 400, id="fragment-in-query"),
    pytest.param(b"GET http://a/echo#b HTTP/1.1\r\nHost: a\r\n\r\n", 400, id="fragment-absolute-form"),
    pytest.param(b"GET / HTTP/1.1\r\nHost: a\r\nX: " + b"v" * 5000 + b"\r\n\r\n", 431, id="header-too-large"),
    pytest.param(b"GET /" + b"a" * 5000 + b" HTTP/1.1\r\n", 414, id="uri-too-long"),
    pytest.param(b"POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 1001\r\n\r\n", 413, id="body-too-large"),
    pytest.param(b"POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3e9\r\n", 413,
                 id="chunked-too-large"),
    pytest.param(b"POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 501,
                 id="unknown-coding"),
    pytest.param(b"POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
                 400, id="cl-and-te"),
    pytest.param(b"POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd", 400,
                 id="conflicting-lengths"),
    pytest.param(b"POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 400, id="bad-chunk"),
    pytest.param(b"GET / HTTP/2.0\r\nHost: a\r\n\r\n", 505, id="http2-preface"),
    pytest.param(b"CONNECT a:443 HTTP/1.1\r\nHost: a\r\n\r\n", 501, id="connect"),
    pytest.param(b"POST /echo HTTP/1.1\r\nHost: a\r\nExpect: tea\r\nContent-Length: 1\r\n\r\nx", 417, id="expectation"),
]


@pytest.mark.parametrize("raw, status", BAD_REQUESTS)
def test_bad_input_gets_its_status_and_the_server_goes_on(server, raw, status):
    assert_refused(exchange(server, raw), status)
    assert server.get("/bytes?n=5")[0] == 200
    assert server.stats()["responses"][str(status)] == 1


@pytest.mark.parametrize("raw", [b"INVALID CONNECTION PREFACE\r\n\r\n", b"GARBAGE\r\n\r\n"],
                         ids=["broken-h2-preface", "garbage"])
def test_bytes_that_are_not_http_are_closed_on_without_an_answer(server, raw):
    """No HTTP version on the first line: the sender does not speak HTTP/1.x (a scanner, an HTTP/2
    client whose preface is broken), so it gets no HTTP/1.1 answer it could not read."""
    assert exchange(server, raw) == b""
    assert server.get("/bytes?n=5")[0] == 200


def test_smuggled_request_after_conflicting_framing_is_never_run(server):
    """The classic CL.TE smuggling payload: the front refuses it and closes, so the 'GET
    /record' hidden in the body never reaches the app."""
    smuggled = request_bytes("GET", "/record?id=smuggled")
    raw = (b"POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: " + str(5 + len(smuggled)).encode() +
           b"\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + smuggled)
    assert_refused(exchange(server, raw), 400)
    assert json.loads(server.get("/log")[2]) == []


def test_incomplete_head_gets_408_after_header_timeout(server):
    assert_refused(exchange(server, b"GET / HTTP/1.1\r\nHost: a\r\n"), 408)
    assert server.get("/bytes?n=1")[0] == 200


def test_silent_connection_is_closed_without_a_response(server):
    assert exchange(server, b"") == b""


def test_stalled_upload_gets_408_after_io_timeout(serve):
    server = serve("-w", "1", "-t", "1", "--io-timeout", "0.5", "probe:app")
    assert_refused(exchange(server, b"POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\nabc"), 408)


def test_slow_uploader_does_not_hold_a_slot(serve):
    """With a single slot, a client that sends half its body and stalls must not delay anyone:
    the body is read by the front before the request queues."""
    server = serve("-w", "1", "-t", "1", "probe:app")
    slow = server.connect()
    slow.sendall(b"POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\nhello")
    for _ in range(3):
        assert server.get("/record?id=fast")[0] == 200
    # (The slot is counted free a moment after its answer is sent.)
    wait_until(lambda: server.stats()["slots"]["busy"] == 0, message="the slot to be free while the upload stalls")
    slow.sendall(b"world")
    status, _, body = read_response(slow.makefile("rb"))
    assert status == 200 and json.loads(body)["body"] == "helloworld"


def test_a_fast_large_upload_is_read_by_the_app_as_it_arrives(serve):
    """A large body whose client sends it fast queues before its end: the one slot takes it while
    the rest is still on its way, and the app gets every byte in order."""
    server = serve("-w", "1", "-t", "1", "--max-body", "64MiB", "--request-buffer", "4MiB", "probe:app")
    body = os.urandom(16 << 20)
    with upload_queued_early(server, upload_head(len(body)), body[:8 << 20]) as sock:
        sock.sendall(body[8 << 20:])
        status, _, reply = read_response(sock.makefile("rb"))
    assert status == 200, reply
    assert json.loads(reply) == {"length": len(body), "sha256": hashlib.sha256(body).hexdigest()}


@pytest.mark.parametrize("how, version", [("stalls", "1.1"), ("stalls", "1.0"), ("leaves", "1.1")])
def test_a_fast_upload_that_stops_after_it_queued_frees_its_slot(serve, how, version):
    """Queued early, a body must keep coming at its client's pace: a client that stalls gets 408
    (in its own HTTP version) long before the I/O timeout (60 s), one that leaves is gone; either
    way the app hears that the body was cut short, and the slot and the worker serve on."""
    server = serve("-w", "1", "-t", "1", "--max-body", "64MiB", "--request-buffer", "1MiB", "probe:app")
    sock = upload_queued_early(server, upload_head(16 << 20, version), os.urandom(4 << 20))
    if how == "stalls":
        stream = sock.makefile("rb")
        assert stream.peek(9)[:9] == f"HTTP/{version} ".encode()
        status, _, reply = read_response(stream)
        assert status == 408 and b"request body not received in time" in reply
    sock.close()
    wait_until(lambda: server.stats()["slots"]["busy"] == 0, message="the slot to be given back")
    assert json.loads(server.get("/log")[2]) == ["digest cut: PeerClosed"]
    assert server.get("/bytes?n=5")[2] == b"bbbbb"
    assert server.stats()["workers"][0]["restarts"] == 0


def test_a_slow_large_upload_is_read_whole_before_it_queues(serve):
    """A large body whose client sends it slowly holds no slot while it trickles in: other requests
    are served meanwhile, and the body reaches the app whole once it is complete."""
    server = serve("-w", "1", "-t", "1", "--max-body", "8MiB", "--request-buffer", "64KiB", "probe:app")
    body = os.urandom(1 << 20)
    with server.connect(timeout=60) as sock:
        sock.sendall(upload_head(len(body)))
        sent = 0
        while sent < 256 << 10:  # past the request buffer, a sixteenth of it at a time
            time.sleep(0.01)
            sock.sendall(body[sent:sent + (4 << 10)])
            sent += 4 << 10
        for _ in range(3):
            assert server.get("/record?id=fast")[0] == 200
        wait_until(lambda: server.stats()["slots"]["busy"] == 0, message="the slot free while the upload trickles")
        sock.sendall(body[sent:])
        status, _, reply = read_response(sock.makefile("rb"))
    assert status == 200, reply
    assert json.loads(reply) == {"length": len(body), "sha256": hashlib.sha256(body).hexdigest()}


def patterned(size):
    """What the probe's /pattern sends: 0..250 over and over."""
    return (bytes(range(251)) * (size // 251 + 1))[:size]


@pytest.mark.parametrize("path, framing", [("/stream", "chunked"), ("/pattern", "length")])
def test_slow_reader_of_a_large_response_does_not_hold_a_slot(serve, path, framing):
    """A client that asks for 48 MiB (more than loopback socket buffers hold) and reads
    nothing: the slot must be free as soon as the worker is done (the body waits in the
    front's spool), and the client still gets every byte in its place when it reads. A body with
    a length is one the slot writes to the client's socket itself while the client keeps up."""
    server = serve("-w", "1", "-t", "1", "--response-buffer", "64KiB", "probe:app")
    size = 48 << 20
    reader = server.connect(timeout=60)
    send_request(reader, "GET", f"{path}?n={size}&k=96")
    wait_until(lambda: server.stats()["workers"][0]["requests"] == 1 and server.stats()["slots"]["busy"] == 0,
               timeout=60, message="the slot to be released while the client is not reading")
    assert server.get("/record?id=next")[0] == 200
    status, headers, body = read_response(reader.makefile("rb"))
    assert status == 200
    if framing == "chunked":
        assert headers["transfer-encoding"] == "chunked" and len(body) == size and body.count(b"x") == size
    else:
        assert headers["content-length"] == str(size) and body == patterned(size)


def test_a_client_reading_a_large_response_in_small_sips_gets_it_exactly(serve):
    """A client with a small receive buffer that reads a little at a time: the socket takes part
    of what the slot offers, the spool the rest; the bytes still arrive in order, and the
    connection serves the next request."""
    server = serve("-w", "1", "-t", "1", "--response-buffer", "256KiB", "probe:app")
    size = (8 << 20) + 13
    sock = server.connect(timeout=60)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 32 << 10)
    stream = sock.makefile("rb")
    send_request(sock, "GET", f"/pattern?n={size}&k=7")
    status_line = stream.readline()
    while stream.readline() != b"\r\n":
        pass
    body = bytearray()
    while len(body) < size:
        body += stream.read1(min(48 << 10, size - len(body)))
        if len(body) < (1 << 20):
            time.sleep(0.001)  # slow at first: the slot finds the socket full
    assert status_line.split()[1] == b"200" and bytes(body) == patterned(size)
    send_request(sock, "GET", "/record?id=after")
    assert read_response(stream)[2] == b"after"


def test_a_large_body_longer_than_its_length_is_cut_at_the_length(serve):
    """A worker that streams more than its Content-Length: the client gets exactly the length,
    and nothing stray reaches the connection's next response."""
    server = serve("-w", "1", "-t", "1", "--response-buffer", "64KiB", "probe:app")
    size, length = 16 << 20, (8 << 20) + 7
    sock = server.connect(timeout=60)
    stream = sock.makefile("rb")
    send_request(sock, "GET", f"/pattern?n={size}&k=64&length={length}")
    status, headers, body = read_response(stream)
    assert status == 200 and headers["content-length"] == str(length) and body == patterned(length)
    send_request(sock, "GET", "/record?id=after")
    assert read_response(stream)[2] == b"after"


def test_a_large_body_shorter_than_its_length_ends_the_connection(serve):
    server = serve("-w", "1", "-t", "1", "probe:app")
    size = 2 << 20
    sock = server.connect(timeout=60)
    send_request(sock, "GET", f"/pattern?n={size}&k=8&length={size + 100}")
    stream = sock.makefile("rb")
    while stream.readline() != b"\r\n":
        pass
    assert stream.read() == patterned(size), "the body as far as it went, then the close"


def test_clients_that_never_read_a_large_response_cost_bounded_disk_and_hold_their_slots(serve):
    """Four clients ask for 1 GiB each and read nothing: each response's temporary file stops at
    --max-temp-file-size, all of them together at --max-temp-disk; past that the slots stop reading
    the worker (back-pressure) instead of spooling on. When the clients go, so does the disk."""
    server = serve("-w", "1", "-t", "5", "--response-buffer", "64KiB", "--max-temp-file-size", "8MiB",
                   "--max-temp-disk", "20MiB", "probe:app")
    stalled = []
    for _ in range(4):
        sock = server.connect(timeout=60)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 << 10)
        send_request(sock, "GET", f"/stream?n={1 << 30}&k={1 << 14}")
        stalled.append(sock)
    temp_files = lambda: server.stats()["temp_files"]  # noqa: E731
    wait_until(lambda: temp_files()["held_back"] >= 4 and server.stats()["slots"]["busy"] == 4, timeout=60,
               message="all four held back, each holding its slot")
    # Held: what the files hold stays within the budget, however long the clients stay.
    for _ in range(5):
        assert 16 << 20 <= temp_files()["bytes"] <= 20 << 20, temp_files()
        time.sleep(0.2)
    assert temp_files()["limit"] == 20 << 20
    assert server.get("/record?id=fifth")[0] == 200, "the fifth slot serves others meanwhile"
    for sock in stalled:
        sock.close()
    wait_until(lambda: temp_files()["bytes"] == 0 and server.stats()["slots"]["busy"] == 0, timeout=60,
               message="the disk and the slots back once the clients left")


def test_an_upload_the_disk_budget_has_no_room_for_gets_503(serve):
    server = serve("-w", "1", "-t", "1", "--request-buffer", "64KiB", "--max-temp-disk", "1MiB", "probe:app")
    body = b"x" * (2 << 20)
    with server.connect() as sock:
        send_request(sock, "POST", "/digest", body=body)
        status, _, reply = read_response(sock.makefile("rb"))
    assert status == 503 and b"no room to buffer the request body" in reply
    with server.connect() as sock:
        send_request(sock, "POST", "/digest", body=body[: 1 << 20])
        status, _, reply = read_response(sock.makefile("rb"))
    assert status == 200 and json.loads(reply)["length"] == 1 << 20
    assert server.stats()["temp_files"]["bytes"] == 0


def test_chunked_request_body_reaches_the_app_whole(server):
    raw = (b"POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
           b"5\r\nhello\r\n1;ext=1\r\n \r\n5\r\nworld\r\n0\r\nX-Trailer: t\r\n\r\n")
    with server.connect() as sock:
        sock.sendall(raw)
        status, _, body = read_response(sock.makefile("rb"))
    echoed = json.loads(body)
    assert status == 200
    assert echoed["body"] == "hello world"
    assert echoed["content_length"] == "11"
    assert "HTTP_TRANSFER_ENCODING" not in echoed["headers"]


def test_response_without_length_is_chunked_for_http11_and_close_delimited_for_http10(server):
    with server.connect() as sock:
        send_request(sock, "GET", "/stream?n=300000&k=30")
        status, headers, body = read_response(sock.makefile("rb"))
        assert (status, headers["transfer-encoding"], len(body)) == (200, "chunked", 300000)
    reply = exchange(server, b"GET /stream?n=300000&k=30 HTTP/1.0\r\n\r\n")
    head, _, body = reply.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.0 200")
    assert b"transfer-encoding" not in head.lower() and b"connection: close" in head.lower()
    assert len(body) == 300000


@pytest.mark.parametrize("worker", SPACED_HEADER_WORKERS.values(), ids=SPACED_HEADER_WORKERS.keys())
def test_header_values_go_out_without_the_blanks_around_them(serve, worker):
    server = serve("-w", "1", "-t", "1", *worker)
    reply = exchange(server, b"GET /spaced HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
    head = reply.partition(b"\r\n\r\n")[0].lower()
    assert head.startswith(b"http/1.1 200 "), reply
    assert b"\r\nset-cookie: a=b\r\n" in head and b"\r\nx-spaced: 1 2\r\n" in head, head


def test_expect_100_continue(server):
    with server.connect() as sock:
        sock.sendall(b"POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n")
        assert sock.recv(100) == b"HTTP/1.1 100 Continue\r\n\r\n"
        sock.sendall(b"hello")
        status, _, body = read_response(sock.makefile("rb"))
        assert status == 200 and json.loads(body)["body"] == "hello"
        assert "HTTP_EXPECT" not in json.loads(body)["headers"]


def test_body_over_limit_is_refused_before_100_continue(server):
    raw = b"POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 5000\r\nExpect: 100-continue\r\n\r\n"
    reply = exchange(server, raw)
    assert b"100 Continue" not in reply
    assert_refused(reply, 413)


def test_http10_closes_unless_keep_alive_is_asked(server):
    reply = exchange(server, b"GET /bytes?n=3 HTTP/1.0\r\n\r\n")
    assert reply.startswith(b"HTTP/1.0 200 OK\r\n") and reply.endswith(b"\r\n\r\nbbb")
    with server.connect() as sock:
        stream = sock.makefile("rb")
        for _ in range(2):
            sock.sendall(b"GET /bytes?n=3 HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
            status, headers, body = read_response(stream)
            assert (status, headers["connection"], body) == (200, "keep-alive", b"bbb")


def test_head_request_has_length_but_no_body(server):
    with server.connect() as sock:
        stream = sock.makefile("rb")
        send_request(sock, "HEAD", "/bytes?n=1234")
        status, headers, body = read_response(stream, method="HEAD")
        assert (status, headers["content-length"], body) == (200, "1234", b"")
        send_request(sock, "GET", "/bytes?n=2")
        assert read_response(stream)[2] == b"bb", "the connection is still in step"


@pytest.mark.parametrize("method, status", [("GET", "204 No Content"), ("GET", "304 Not Modified"),
                                            ("HEAD", "200 OK")])
def test_a_response_without_a_body_claims_no_length_the_app_did_not_give(server, method, status):
    """A 204 or 304 must not carry a Content-Length that says the resource is empty (RFC 9110
    8.6), and a HEAD response's length, when given, is the GET's: an app that sent none (a
    framework's empty HEAD body) gets none added."""
    with server.connect() as sock:
        stream = sock.makefile("rb")
        send_request(sock, method, "/bodiless?status=" + status.replace(" ", "+"))
        code, headers, body = read_response(stream, method="HEAD" if method == "HEAD" else "GET")
        assert (code, body) == (int(status[:3]), b"")
        assert "content-length" not in headers and "transfer-encoding" not in headers, headers
        send_request(sock, "GET", "/bytes?n=2")
        assert read_response(stream)[2] == b"bb", "the connection is still in step"


def test_pipelined_requests_are_answered_in_order(server):
    paths = [f"/record?id=p{n}&ms={(5 - n) * 20}" for n in range(6)]
    with server.connect() as sock:
        sock.sendall(b"".join(request_bytes("GET", path) for path in paths))
        stream = sock.makefile("rb")
        assert [read_response(stream)[2] for _ in paths] == [f"p{n}".encode() for n in range(6)]


def test_pipelined_flood_is_read_with_bounded_buffering(serve):
    """A client that pipelines far more than it reads: the server reads one head's worth
    ahead, answers in order, and does not grow without bound; everything is answered."""
    server = serve("-w", "1", "-t", "1", "--max-header-size", "4KiB", "probe:app")
    count = 2000
    with server.connect(timeout=60) as sock:
        sender = threading.Thread(target=lambda: sock.sendall(request_bytes("GET", "/bytes?n=1") * count))
        sender.start()
        stream = sock.makefile("rb")
        bodies = [read_response(stream)[2] for _ in range(count)]
        sender.join(timeout=60)
    assert bodies == [b"b"] * count
    assert server.stats()["front"]["rss_bytes"] < 200 * 1024 * 1024


def test_keep_alive_connection_serves_many_requests(server):
    with server.connect() as sock:
        stream = sock.makefile("rb")
        for n in range(50):
            send_request(sock, "GET", f"/bytes?n={n}")
            status, headers, body = read_response(stream)
            assert status == 200 and len(body) == n and "connection" not in headers
    assert server.stats()["connections"]["accepted"] == 1


def test_no_keep_alive_closes_after_each_response(serve):
    server = serve("-w", "1", "--no-keep-alive", "probe:app")
    reply = exchange(server, request_bytes("GET", "/bytes?n=2") * 2)
    assert reply.count(b"HTTP/1.1 200") == 1 and b"connection: close" in reply.lower()


def test_max_requests_per_connection(serve):
    server = serve("-w", "1", "--max-requests-per-connection", "3", "probe:app")
    reply = exchange(server, request_bytes("GET", "/bytes?n=2") * 5)
    assert reply.count(b"HTTP/1.1 200") == 3
    assert reply.lower().count(b"connection: close") == 1


def test_idle_keep_alive_connection_is_closed_after_the_timeout(serve):
    server = serve("-w", "1", "--keep-alive-timeout", "0.5", "probe:app")
    with server.connect() as sock:
        send_request(sock, "GET", "/bytes?n=1")
        read_response(sock.makefile("rb"))
        wait_until(lambda: server.stats()["connections"]["idle"] == 1, message="the connection to be idle")
        started = time.monotonic()
        assert sock.recv(10) == b""
        assert time.monotonic() - started < 20


def test_app_error_is_500_and_the_connection_goes_on(server):
    with server.connect() as sock:
        stream = sock.makefile("rb")
        send_request(sock, "GET", "/crash")
        assert read_response(stream)[0] == 500
        send_request(sock, "GET", "/bytes?n=1")
        assert read_response(stream)[0] == 200


def test_forwarding_headers(server):
    status, _, body = server.get("/echo", headers={"X-Forwarded-For": "203.0.113.9", "Connection": "keep-alive, X-Hop",
                                                   "X-Hop": "secret"})
    headers = json.loads(body)["headers"]
    assert status == 200
    assert headers["HTTP_X_FORWARDED_FOR"] == "203.0.113.9, 127.0.0.1"
    # 127.0.0.1 is a trusted proxy by default, so the client is the one it names.
    assert json.loads(body)["remote_addr"] == "203.0.113.9"
    assert headers["HTTP_X_FORWARDED_PROTO"] == "http"
    assert headers["HTTP_X_REQUEST_START"].startswith("t=")
    assert "HTTP_X_HOP" not in headers and "HTTP_CONNECTION" not in headers


def test_absolute_form_target(server):
    with server.connect() as sock:
        sock.sendall(b"GET http://example.test/echo?x=1 HTTP/1.1\r\nHost: other\r\n\r\n")
        echoed = json.loads(read_response(sock.makefile("rb"))[2])
    assert (echoed["path"], echoed["query"], echoed["headers"]["HTTP_HOST"]) == ("/echo", "x=1", "example.test")


def test_absolute_form_with_an_empty_path_asks_for_the_root(serve, tmp_path):
    """`http://host?x` is `/?x` in origin form (RFC 9112 section 3.2.2), `Host` from its authority."""
    server = serve("-w", "1", "-t", "1", "echo_wsgi:app", cwd=ECHO_APPS, env={"ECHO_LOG": str(tmp_path / "echo.log")})
    for target, query in [(b"http://example.test?x", "x"), (b"http://example.test", "")]:
        with server.connect() as sock:
            sock.sendall(b"GET " + target + b" HTTP/1.1\r\nHost: other\r\nConnection: close\r\n\r\n")
            status, _, body = read_response(sock.makefile("rb"))
        assert status == 200, (target, body)
        seen = json.loads(body)
        assert (seen["path"], seen["query"], dict(seen["headers"])["host"]) == ("/", query, "example.test")


def test_a_target_a_uri_cannot_hold_as_sent_reaches_the_app_as_the_log_shows_it(serve, tmp_path):
    """`<`, `>`, `"` and a backtick pass the request line but not `http::Uri`: percent-encoded, the
    app decodes the same path, and the log agrees."""
    log = tmp_path / "access.log"
    server = serve("-w", "1", "-t", "1", "--access-log", str(log), "echo_wsgi:app", cwd=ECHO_APPS,
                   env={"ECHO_LOG": str(tmp_path / "echo.log")})
    raw = b'POST /api/pay<x>?a="1"&b=`2` HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello'
    with server.connect() as sock:
        sock.sendall(raw)
        status, _, body = read_response(sock.makefile("rb"))
    seen = json.loads(body)
    assert status == 200
    assert (seen["method"], seen["path"], seen["query"]) == ("POST", "/api/pay<x>", "a=%221%22&b=%602%60")
    line = wait_until(lambda: log.exists() and log.read_text(), message="an access log line")
    assert '"POST /api/pay%3Cx%3E?a=%221%22&b=%602%60 HTTP/1.1" 200' in line, line


def test_access_log_has_a_line_per_response_with_queue_and_service_times(serve, tmp_path):
    log = tmp_path / "access.log"
    server = serve("-w", "1", "-t", "1", "--access-log", str(log), "probe:app")
    server.get("/bytes?n=7", headers={"User-Agent": "probe/1", "Referer": "http://r.example/"})
    server.get("/nothing-here")
    def two_lines():
        text = log.read_text() if log.exists() else ""
        return text if text.count("\n") == 2 else None

    lines = wait_until(two_lines, message="two access log lines").splitlines()
    assert re.fullmatch(r'127\.0\.0\.1 - - \[\d\d/\w{3}/\d{4}:\d\d:\d\d:\d\d \+0000\] '
                        r'"GET /bytes\?n=7 HTTP/1\.1" 200 7 '
                        r'"http://r\.example/" "probe/1" queue=\d+\.\d{3}ms service=\d+\.\d{3}ms '
                        r'lane="fast"', lines[0]), lines[0]
    assert '"GET /nothing-here HTTP/1.1" 404 9 "-" "-"' in lines[1]
