"""The worker as an ASGI 3 server, run on its own on a unix socket and seen through asgi_apps: the
http scope, request bodies in pieces, streamed responses, what the client gets when the app fails,
and how an app is told from a WSGI one."""

import json

from headway.worker.asgi import is_asgi
from worker_client import worker_can_import


def test_the_http_scope(start_worker):
    worker = start_worker("asgi_apps:app", 1)
    response = worker.get("/scope?x=%20y", headers=[("X-Custom", "v"), ("X-Forwarded-For", "10.0.0.1, 203.0.113.9"),
                                                    ("X-Forwarded-Proto", "https")])
    assert response.status == 200
    scope = json.loads(response.body)
    assert scope["type"] == "http"
    assert scope["asgi"] == {"version": "3.0", "spec_version": "2.4"}
    assert (scope["method"], scope["http_version"], scope["scheme"]) == ("GET", "1.1", "https")
    assert (scope["path"], scope["raw_path"], scope["query_string"]) == ("/scope", "/scope", "x=%20y")
    assert ["x-custom", "v"] in scope["headers"] and ["host", "localhost"] in scope["headers"]
    assert scope["client"] == ["203.0.113.9", 0], "the last address the proxy added"
    assert scope["root_path"] == "" and scope["state"] == {}


def test_the_path_is_percent_decoded_and_the_raw_path_is_not(start_worker):
    worker = start_worker("asgi_apps:app", 1)
    scope = json.loads(worker.get("/scope%2Fcaf%C3%A9").body)
    assert scope["path"] == "/scope/café"
    assert scope["raw_path"] == "/scope%2Fcaf%C3%A9"


def test_a_chunked_upload_arrives_whole_in_pieces(start_worker):
    worker = start_worker("asgi_apps:app", 1)
    chunks = [bytes([n]) * 100_000 for n in range(3)]
    body = b"".join(b"%x\r\n%s\r\n" % (len(chunk), chunk) for chunk in chunks) + b"0\r\n\r\n"
    client = worker.client()
    try:
        response = client.request("POST", "/echo", [("Transfer-Encoding", "chunked")], body)
    finally:
        client.close()
    assert response.status == 200
    assert response.body == b"".join(chunks)
    assert int(response.header("X-Messages")) > 1, "the body is handed over as it comes, not gathered"


def test_a_response_of_unknown_length_is_chunked_in_order(start_worker):
    worker = start_worker("asgi_apps:app", 1)
    response = worker.get("/stream")
    assert response.header("Transfer-Encoding") == "chunked"
    assert response.body == b"one two three"


def test_response_headers_may_be_lists_of_two_but_not_of_three(start_worker):
    worker = start_worker("asgi_apps:app", 1)
    response = worker.get("/list-headers")
    assert (response.status, response.body) == (200, b"ok")
    assert response.header("Content-Type") == "text/plain"
    assert worker.get("/bad-pair").status == 500


def test_head_gets_the_length_and_no_body(start_worker):
    worker = start_worker("asgi_apps:app", 1)
    client = worker.client()
    try:
        response = client.request("HEAD", "/head")
        assert (response.status, response.header("Content-Length"), response.body) == (200, "3", b"")
        assert client.request("GET", "/head").body == b"abc", "the connection carries on after HEAD"
    finally:
        client.close()


def test_an_app_that_fails_before_its_response_gets_a_500_and_the_worker_goes_on(start_worker):
    worker = start_worker("asgi_apps:app", 1)
    for path in ("/fail-before", "/no-response", "/bad-status"):
        response = worker.get(path)
        assert response.status == 500, path
    assert worker.get("/head").body == b"abc"
    stderr = worker.stderr()
    assert "RuntimeError: failed before the response" in stderr
    assert "returned without completing its response" in stderr
    assert "bad status '42 '" in stderr


def test_an_app_that_fails_mid_response_has_it_cut(start_worker):
    worker = start_worker("asgi_apps:app", 1)
    client = worker.client()
    try:
        client.send(b"GET /fail-after HTTP/1.1\r\nHost: localhost\r\n\r\n")
        _, status, _, headers = client.read_head()
        assert status == 200 and ("Transfer-Encoding", "chunked") in headers
        rest = client.read_until_close()
    finally:
        client.close()
    assert b"partial" in rest and not rest.endswith(b"0\r\n\r\n"), "no last chunk: the client sees the cut"


def test_receive_after_the_response_says_disconnect(start_worker):
    worker = start_worker("asgi_apps:app", 1)
    assert worker.get("/after").body == b"done"
    assert json.loads(worker.get("/seen").body) == ["http.disconnect"]


def test_an_app_that_raises_on_lifespan_is_served_without_it(start_worker):
    worker = start_worker("asgi_apps:app", 1)  # accepting: the lifespan step is behind it
    assert "does not support the lifespan protocol" in worker.stderr()


def test_asgi_is_told_from_wsgi_as_uvicorn_does():
    async def coroutine_app(scope, receive, send):
        pass

    class AsyncCallable:
        async def __call__(self, scope, receive, send):
            pass

    class SyncCallable:
        def __call__(self, environ, start_response):
            pass

    def wsgi_app(environ, start_response):
        pass

    assert is_asgi(coroutine_app) and is_asgi(AsyncCallable())
    assert not is_asgi(wsgi_app) and not is_asgi(SyncCallable())
    assert not is_asgi(AsyncCallable), "a class is an ASGI 2 double callable, not served"


def test_the_loop_is_uvloop_when_it_is_installed_and_asyncios_own_otherwise(start_worker):
    """CPython 3.9's test packages (tests/requirements-py39.txt) have no uvloop: both ends run."""
    expected = b"uvloop" if worker_can_import("uvloop") else b"asyncio"
    worker = start_worker("asgi_apps:app", 1)
    assert worker.get("/loop").body.startswith(expected)
