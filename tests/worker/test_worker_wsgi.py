"""The worker as a PEP 3333 server: environ, wsgi.input, write(), close(), file_wrapper,
start_response checks and app exceptions, seen through worker_apps over the socket."""

import hashlib
import json
import time

import pytest

from worker_client import TIMEOUT


def environ_of(worker, target="/environ", headers=(), body=b"", method="POST"):
    client = worker.client()
    try:
        return json.loads(client.request(method, target, headers, body).body)
    finally:
        client.close()


def test_every_pep_3333_environ_key(start_worker):
    worker = start_worker("worker_apps:app", 3, "--workers", "2")
    environ = environ_of(worker, "/environ?a=1&b=%20", [
        ("Content-Type", "text/plain"),
        ("X-Dup", "one"), ("X-Dup", "two"),
        ("Cookie", "a=1"), ("Cookie", "b=2"),
        ("X-Forwarded-For", "1.2.3.4, 10.0.0.7"),
        ("X-Forwarded-Proto", "https"),
        ("X_Forwarded_For", "6.6.6.6"),
    ], b"body!")
    assert environ["REQUEST_METHOD"] == ["str", "POST"]
    assert environ["SCRIPT_NAME"] == ["str", ""]
    assert environ["PATH_INFO"] == ["str", "/environ"]
    assert environ["QUERY_STRING"] == ["str", "a=1&b=%20"]
    assert environ["CONTENT_TYPE"] == ["str", "text/plain"]
    assert environ["CONTENT_LENGTH"] == ["str", "5"]
    assert environ["SERVER_NAME"] == ["str", "localhost"]
    assert environ["SERVER_PORT"] == ["str", "443"]  # X-Forwarded-Proto https, no port in Host
    assert environ["SERVER_PROTOCOL"] == ["str", "HTTP/1.1"]
    assert environ["REMOTE_ADDR"] == ["str", "10.0.0.7"]  # the last entry: the one the front added
    assert environ["HTTP_HOST"] == ["str", "localhost"]
    assert environ["HTTP_X_DUP"] == ["str", "one, two"]
    assert environ["HTTP_COOKIE"] == ["str", "a=1; b=2"]
    assert environ["HTTP_X_FORWARDED_FOR"] == ["str", "1.2.3.4, 10.0.0.7"]  # underscored name dropped
    assert "HTTP_CONTENT_TYPE" not in environ and "HTTP_CONTENT_LENGTH" not in environ
    assert environ["wsgi.version"] == ["tuple", [1, 0]]
    assert environ["wsgi.url_scheme"] == ["str", "https"]
    assert environ["wsgi.multithread"] == ["bool", True]
    assert environ["wsgi.multiprocess"] == ["bool", True]
    assert environ["wsgi.run_once"] == ["bool", False]
    assert environ["wsgi.input_terminated"] == ["bool", True]
    assert environ["wsgi.file_wrapper"][0] == "type"
    assert environ["wsgi.errors"][0] == "TextIOWrapper"
    assert environ["_errors_methods"] == ["write", "writelines", "flush"]
    assert environ["_input_methods"] == ["read", "readline", "readlines", "__iter__"]
    assert environ["_body"] == "body!"


def test_environ_defaults_and_host_parsing(start_worker):
    worker = start_worker("worker_apps:app", 1)
    environ = environ_of(worker, method="GET")
    assert environ["wsgi.multithread"] == ["bool", False]
    assert environ["wsgi.multiprocess"] == ["bool", False]
    assert environ["wsgi.url_scheme"] == ["str", "http"]
    assert environ["REMOTE_ADDR"] == ["str", ""]  # a direct client: no address to report
    assert "CONTENT_LENGTH" not in environ and "CONTENT_TYPE" not in environ
    assert (environ["SERVER_NAME"], environ["SERVER_PORT"]) == (["str", "localhost"], ["str", "80"])
    for host, name, port in (("example.com:8080", "example.com", "8080"),
                             ("[::1]:9000", "::1", "9000"), ("example.org", "example.org", "80")):
        client = worker.client()
        environ = json.loads(client.request("GET", "/environ", host=host).body)
        assert (environ["SERVER_NAME"][1], environ["SERVER_PORT"][1]) == (name, port)


def test_path_info_is_percent_decoded_as_latin_1(start_worker):
    worker = start_worker("worker_apps:app", 1)
    environ = environ_of(worker, "/envir%6Fn?q=%C3%A9", method="GET")
    assert environ["PATH_INFO"] == ["str", "/environ"]
    assert environ["QUERY_STRING"] == ["str", "q=%C3%A9"]
    client = worker.client()
    response = client.request("GET", "/caf%C3%A9")
    assert response.status == 404  # routed on "/cafÃ©", the latin-1 reading of the UTF-8 bytes


BODY = b"".join(b"line %06d of the request body\n" % number for number in range(40_000))  # ~1.2 MB


@pytest.mark.parametrize("mode", ["pieces", "readline", "readline-limit", "readlines", "iter", "all", "exact"])
def test_wsgi_input_modes_on_a_body_larger_than_socket_buffers(apps_worker, mode):
    client = apps_worker.client()
    report = json.loads(client.request("POST", "/input?mode=" + mode, body=BODY).body)
    assert report["length"] == len(BODY)
    assert report["sha256"] == hashlib.sha256(BODY).hexdigest()
    lines = BODY.count(b"\n")
    expected_pieces = {
        "pieces": (len(BODY) + 999) // 1000, "readline": lines, "readlines": lines, "iter": lines,
        "readline-limit": lines * 5, "all": 1, "exact": 1,  # each 36-byte line read as 7+7+7+7+7+1
    }[mode]
    assert report["pieces"] == expected_pieces
    assert report["longest"] <= {"pieces": 1000, "readline-limit": 7}.get(mode, len(BODY))


def test_wsgi_input_chunked_request_read_line_by_line(apps_worker):
    client = apps_worker.client()
    chunks = [BODY[i:i + 70_001] for i in range(0, len(BODY), 70_001)]
    client.send(b"POST /input?mode=readline HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                + b"".join(b"%x\r\n%s\r\n" % (len(chunk), chunk) for chunk in chunks) + b"0\r\n\r\n")
    report = json.loads(client.read_response().body)
    assert report["sha256"] == hashlib.sha256(BODY).hexdigest()
    assert report["pieces"] == BODY.count(b"\n")


def test_wsgi_input_is_read_lazily_from_the_socket(apps_worker):
    client = apps_worker.client()
    client.send(b"POST /echo-streaming HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\n\r\nfirst")
    # The app answers the first 5 bytes before the rest of the body exists.
    version, status, reason, headers = client.read_head()
    assert status == 200 and ("Transfer-Encoding", "chunked") in headers
    while b"first\r\n" not in client.buffer:
        client._fill()
    client.send(b" later")
    while not client.buffer.endswith(b"0\r\n\r\n"):
        client._fill()
    assert client.buffer == b"5\r\nfirst\r\n6\r\n later\r\n0\r\n\r\n"


def test_write_callable_then_iterable(apps_worker):
    client = apps_worker.client()
    response = client.request("GET", "/write")
    assert response.body == b"one two three four"
    assert response.header("Transfer-Encoding") == "chunked"
    assert client.chunked_raw.count(b"\r\n") == 2 * 4 + 2  # four chunks (write(b"") sends none) + end
    assert json.loads(client.request("GET", "/closed").body) == ["write"]


def closed_names(worker, *expected):
    """The names recorded by close(), once all of `expected` are among them (bounded wait:
    close() runs after the response is sent, so the client may be a little ahead of it)."""
    deadline = time.monotonic() + TIMEOUT
    while True:
        names = json.loads(worker.get("/closed").body)
        if set(expected) <= set(names) or time.monotonic() > deadline:
            return names
        time.sleep(0.05)


def test_close_is_called_on_success_and_on_app_errors(apps_worker):
    client = apps_worker.client()
    assert client.request("GET", "/framing/generator").status == 200
    response = apps_worker.client().request("GET", "/errors/before-body")
    assert response.status == 500
    client = apps_worker.client()
    client.send(b"GET /errors/after-body HTTP/1.1\r\nHost: x\r\n\r\n")
    assert client.read_head()[1] == 200
    assert client.read_until_close() == b"b\r\nfirst part\n\r\n"  # cut: no last chunk
    names = closed_names(apps_worker, "generator", "before-body", "after-body")
    assert sorted(names) == ["after-body", "before-body", "generator"]


def test_close_is_called_when_the_client_vanishes_mid_response(apps_worker):
    client = apps_worker.client()
    client.send(b"GET /forever HTTP/1.1\r\nHost: x\r\n\r\n")
    assert client.read_head()[1] == 200
    client._fill()
    client.close()
    assert "forever" in closed_names(apps_worker, "forever")
    assert "Traceback" not in apps_worker.stderr()


def test_file_wrapper_with_sendfile(apps_worker, tmp_path):
    data = bytes(range(256)) * 4000 + b"tail"
    path = tmp_path / "data.bin"
    path.write_bytes(data)
    client = apps_worker.client()
    response = client.request("GET", f"/files?kind=sendfile&path={path}")
    assert response.body == data and response.header("Content-Length") == str(len(data))
    response = client.request("GET", f"/files?kind=sendfile&offset=1000&path={path}")
    assert response.body == data[1000:]


def test_file_wrapper_without_fileno(apps_worker):
    data = bytes(range(256)) * 1000
    client = apps_worker.client()
    response = client.request("GET", "/files?kind=nofileno")
    assert response.body == data and response.header("Transfer-Encoding") == "chunked"
    assert client.chunked_raw.startswith(b"2710\r\n")  # blocks of the wrapper's 10000 bytes
    response = client.request("GET", "/files?kind=nofileno-length")
    assert response.body == data and response.header("Content-Length") == str(len(data))


@pytest.mark.parametrize("case", ["before-start", "before-body", "hop-by-hop", "bad-status"])
def test_app_errors_before_the_head_give_500(apps_worker, case):
    client = apps_worker.client()
    response = client.request("GET", "/errors/" + case)
    assert response.status == 500 and response.body == b"Internal Server Error\n"
    assert response.header("Connection") == "close"
    assert client.is_closed()
    assert "Traceback" in apps_worker.stderr()
    assert apps_worker.get("/closed").status == 200  # the slot serves on


def test_exc_info_replaces_the_response_before_the_head_is_sent(apps_worker):
    response = apps_worker.get("/errors/exc-info")
    assert response.status == 503 and response.body == b"replaced\n"


def test_exc_info_after_the_head_reraises_and_closes(apps_worker):
    client = apps_worker.client()
    client.send(b"GET /errors/exc-info-late HTTP/1.1\r\nHost: x\r\n\r\n")
    assert client.read_head()[1] == 200
    assert client.read_until_close() == b"5\r\nsent\n\r\n"
    assert "ValueError: failing on purpose after headers" in apps_worker.stderr()
