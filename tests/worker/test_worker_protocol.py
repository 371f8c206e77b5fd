"""The worker as an HTTP/1.1 server: demo routes, keep-alive, HTTP/1.0, request bodies,
100-continue, response framing and malformed requests, all over its unix socket."""

import json
import time

import pytest

from worker_client import Client

HELLO = b"Hello, world!\n"


def test_demo_routes(start_worker):
    worker = start_worker(None, 2)  # no APP: the demo app
    client = worker.client()
    expected = {
        "/hello": (200, HELLO),
        "/fixed": (200, b"OK\n"),
        "/sleep/30": (200, b"slept 30 ms\n"),
        "/sleep/%33%30": (200, b"slept 30 ms\n"),  # PATH_INFO is percent-decoded
        "/fake_work?cpu_ms=5&iowait_ms=5&bytes=1234": (200, b"x" * 1234),
        "/fake_work?cpu_ms=5&iowait_ms=5&bytes=0": (200, b""),
        "/sleep/600001": (400, b"bad ms: expected an integer from 0 to 600000\n"),
        "/sleep/-1": (400, b"bad ms: expected an integer from 0 to 600000\n"),
        "/fake_work?cpu_ms=abc": (400, b"bad cpu_ms: expected an integer from 0 to 600000\n"),
        "/random?max_ms=x": (400, b"bad max_ms: expected an integer from 0 to 600000\n"),
        "/nowhere": (404, b"Not Found\n"),
    }
    for target, (status, body) in expected.items():
        response = client.request("GET", target)
        assert (response.status, response.body) == (status, body), target
        assert response.header("Content-Type") == "text/plain; charset=utf-8"
        assert response.header("X-Worker-Pid") == str(worker.pid)
        assert response.header("Content-Length") == str(len(body))
        assert response.header("Date") is not None

    index = client.request("GET", "/")
    for route in (b"/hello", b"/fixed", b"/sleep/<ms>", b"/fake_work?", b"/random?"):
        assert route in index.body

    for _ in range(5):
        slept = client.request("GET", "/random?max_ms=20").body
        assert slept.startswith(b"slept ") and slept.endswith(b" ms\n")
        assert 0 <= int(slept.split()[1]) <= 20


def test_demo_waits_at_least_as_long_as_asked(start_worker):
    client = start_worker(None, 1).client()
    # A lower bound only: a slow machine makes these longer, never shorter.
    for target, seconds in (("/fixed", 0.2), ("/sleep/150", 0.15),
                            ("/fake_work?cpu_ms=40&iowait_ms=60&bytes=10", 0.1)):
        started = time.monotonic()
        assert client.request("GET", target).status == 200
        assert time.monotonic() - started >= seconds * 0.99, target


def test_many_requests_on_one_keep_alive_connection(start_worker):
    client = start_worker(None, 1).client()
    for _ in range(300):
        response = client.request("GET", "/hello")
        assert response.status == 200 and response.body == HELLO
        assert response.header("Connection") is None
    client.send(b"GET /hello HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    response = client.read_response()
    assert response.header("Connection") == "close"
    assert client.is_closed()


def test_pipelined_requests_are_answered_in_order(start_worker):
    client = start_worker(None, 1).client()
    client.send(b"".join(b"GET /sleep/%d HTTP/1.1\r\nHost: x\r\n\r\n" % ms for ms in (30, 0, 10)))
    assert [client.read_response().body for _ in range(3)] == [b"slept 30 ms\n", b"slept 0 ms\n", b"slept 10 ms\n"]


def test_http_1_0_closes_unless_keep_alive_is_asked(start_worker):
    worker = start_worker(None, 1)
    client = worker.client()
    response = client.request("GET", "/hello", version="HTTP/1.0", host=None)
    assert response.status == 200 and response.body == HELLO
    assert response.header("Connection") == "close"
    assert client.is_closed()

    client = worker.client()
    for _ in range(3):
        response = client.request("GET", "/hello", [("Connection", "keep-alive")], version="HTTP/1.0")
        assert response.body == HELLO
        assert response.header("Connection") == "keep-alive"


def test_http_1_0_streamed_response_is_delimited_by_close(apps_worker):
    client = apps_worker.client()
    response = client.request("GET", "/framing/generator", [("Connection", "keep-alive")], version="HTTP/1.0")
    assert response.body == b"a" * 10 + b"b" * 20  # read until the worker closed
    assert response.header("Transfer-Encoding") is None and response.header("Content-Length") is None
    assert response.header("Connection") == "close"


def test_chunked_request_body(apps_worker):
    client = apps_worker.client()
    client.send(b"POST /environ HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                b"5;ext=1\r\nhello\r\n1\r\n \r\n6\r\nworld!\r\n0\r\nTrailer: x\r\n\r\n")
    report = json.loads(client.read_response().body)
    assert report["_body"] == "hello world!"
    assert "CONTENT_LENGTH" not in report
    assert report["HTTP_TRANSFER_ENCODING"] == ["str", "chunked"]
    assert client.request("GET", "/closed").status == 200  # same connection still in sync


def test_expect_100_continue_is_sent_when_the_app_reads(apps_worker):
    client = apps_worker.client()
    client.send(b"POST /environ HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n")
    assert client.read_head()[1] == 100  # sent before the body: the app is waiting for it
    client.send(b"hello")
    response = client.read_response()
    assert response.status == 200 and json.loads(response.body)["_body"] == "hello"
    assert client.request("GET", "/closed").status == 200  # the connection is still usable


def test_expect_100_continue_not_sent_when_the_app_does_not_read(start_worker):
    client = start_worker(None, 1).client()
    client.send(b"POST /hello HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n")
    response = client.read_response()
    assert response.interim == [] and response.body == HELLO
    # The body may or may not follow: the worker cannot reuse the connection.
    assert response.header("Connection") == "close"
    assert client.is_closed()


def test_unread_body_is_drained_and_connection_kept(start_worker):
    client = start_worker(None, 1).client()
    for _ in range(3):
        response = client.request("POST", "/hello", body=b"x" * 200_000)
        assert response.body == HELLO and response.header("Connection") is None


def test_large_unread_body_closes_the_connection(start_worker):
    client = start_worker(None, 1).client()
    client.send(b"POST /hello HTTP/1.1\r\nHost: x\r\nContent-Length: 5000000\r\n\r\n")
    response = client.read_response()
    assert response.body == HELLO and response.header("Connection") == "close"
    assert client.is_closed()


def test_head_has_no_body_but_the_length_a_get_would_have(start_worker):
    client = start_worker(None, 1).client()
    response = client.request("HEAD", "/hello")
    assert response.status == 200 and response.header("Content-Length") == str(len(HELLO))
    assert client.request("GET", "/hello").body == HELLO  # nothing stray was sent after the HEAD


def test_streamed_response_is_chunked(apps_worker):
    client = apps_worker.client()
    response = client.request("GET", "/framing/generator")
    assert response.header("Transfer-Encoding") == "chunked"
    assert response.body == b"a" * 10 + b"b" * 20
    assert client.chunked_raw == b"a\r\n" + b"a" * 10 + b"\r\n14\r\n" + b"b" * 20 + b"\r\n0\r\n\r\n"


def test_empty_list_gets_content_length_zero(apps_worker):
    response = apps_worker.get("/framing/empty")
    assert response.status == 200 and response.header("Content-Length") == "0" and response.body == b""


def test_no_content_response_has_no_body(apps_worker):
    client = apps_worker.client()
    response = client.request("GET", "/framing/no-content")
    assert response.status == 204
    assert response.header("Content-Length") is None and response.header("Transfer-Encoding") is None
    assert client.request("GET", "/closed").status == 200  # nothing stray was sent


def test_body_shorter_than_content_length_closes_the_connection(apps_worker):
    client = apps_worker.client()
    client.send(b"GET /framing/short HTTP/1.1\r\nHost: x\r\n\r\n")
    version, status, reason, headers = client.read_head()
    assert status == 200 and ("Content-Length", "100") in headers
    assert client.read_until_close() == b"only ten.."
    assert "fewer than its Content-Length" in apps_worker.stderr()


def test_body_longer_than_content_length_is_cut(apps_worker):
    client = apps_worker.client()
    assert client.request("GET", "/framing/long").body == b"12345"
    assert client.request("GET", "/closed").status == 200  # no extra bytes desynchronised it
    assert "more bytes than its Content-Length" in apps_worker.stderr()


@pytest.mark.parametrize("raw, status", [
    (b"GARBAGE\r\n\r\n", 400),
    (b"GET /hello HTTP/1.1 extra\r\nHost: x\r\n\r\n", 400),
    (b"GET /hello HTTP/2.0\r\nHost: x\r\n\r\n", 505),
    (b"GET /hello HTTP/1.1\r\nHost x\r\n\r\n", 400),
    (b"GET /hello HTTP/1.1\r\nHost : x\r\n\r\n", 400),
    (b"GET /hello HTTP/1.1\r\nHost: x\r\n folded\r\n\r\n", 400),
    (b"GET /hello HTTP/1.1\r\nHost: a\nb\r\n\r\n", 400),
    (b"POST /hello HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd", 400),
    (b"POST /hello HTTP/1.1\r\nContent-Length: -3\r\n\r\n", 400),
    (b"POST /hello HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400),
    (b"POST /hello HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", 501),
    (b"GET /hello HTTP/1.1\r\nX: " + b"a" * 70000 + b"\r\n\r\n", 431),
])
def test_malformed_request_gets_an_error_and_close(start_worker, raw, status):
    worker = start_worker(None, 1)
    client = worker.client()
    client.send(raw)
    response = client.read_response()
    assert response.status == status
    assert response.header("Connection") == "close"
    assert client.is_closed()
    assert worker.get("/hello").body == HELLO  # the worker is fine


def test_malformed_chunked_body_met_by_the_app_gets_400(apps_worker):
    client = apps_worker.client()
    client.send(b"POST /environ HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n")
    response = client.read_response()
    assert response.status == 400 and response.body == b"bad chunk size\n"
    assert client.is_closed()


def test_absolute_form_target(start_worker):
    client = start_worker(None, 1).client()
    assert client.request("GET", "http://example.com/sleep/5?x=1").body == b"slept 5 ms\n"


def test_peer_closing_mid_request_does_not_hurt_the_worker(start_worker):
    worker = start_worker(None, 1)
    client = worker.client()
    client.send(b"POST /hello HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nabc")
    client.close()
    half = Client(worker.socket_path)
    half.send(b"GET /hel")
    half.close()
    assert worker.get("/hello").body == HELLO
    assert "Traceback" not in worker.stderr()
