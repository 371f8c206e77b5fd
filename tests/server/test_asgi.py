"""ASGI apps on the bundled worker, through the front: FastAPI and Starlette apps unmodified (JSON,
a streamed response, a form upload, lifespan startup and shutdown, a failed startup), an app that
does not support lifespan, slots that keep their meaning (T slots: at most T requests in the
app at once, as the app itself counts them), the loop's slow paths over the hop: uploads and
responses many rings long, and clients that leave mid-response; and that 100,000 requests, some
left or cancelled, leave no object behind in the worker."""

import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from urllib.parse import quote

import pytest

from conftest import APPS, REPO, headway_binary, parallel_gets, read_response, require_module, send_request, wait_until

FRAMEWORKS = {"fastapi": "fastapi_site:app", "starlette": "starlette_site:app"}


@pytest.fixture(params=FRAMEWORKS)
def framework_app(request):
    require_module(request.param)
    return FRAMEWORKS[request.param]


def lifespan_events(log):
    return [line.split()[0] for line in log.read_text().splitlines()] if log.exists() else []


def test_json_with_state_from_startup(serve, framework_app, tmp_path):
    server = serve("-w", "1", "-t", "2", framework_app, env={"LIFESPAN_LOG": str(tmp_path / "lifespan")})
    status, headers, body = server.get("/items/42?q=caf%C3%A9")
    assert status == 200, body
    assert headers["content-type"] == "application/json"
    assert json.loads(body) == {"item_id": 42, "q": "café", "greeting": "hello from startup"}
    assert server.get("/no-such-page")[0] == 404


def test_streamed_response_arrives_whole_and_in_order(serve, framework_app):
    server = serve("-w", "1", "-t", "2", framework_app)
    status, headers, body = server.get("/stream")
    assert status == 200
    assert headers["content-type"].startswith("text/plain")
    assert body == b"".join(f"line {number}\n".encode() for number in range(10))


def test_form_upload(serve, framework_app):
    require_module("multipart")
    server = serve("-w", "1", "-t", "2", framework_app)
    payload = bytes(range(256)) * 4096  # 1 MiB, over several hop records
    boundary = "headwayboundary"
    body = (
        f"--{boundary}\r\nContent-Disposition: form-data; name=\"name\"\r\n\r\nreport\r\n"
        f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"data.bin\"\r\n"
        "Content-Type: application/octet-stream\r\n\r\n"
    ).encode() + payload + f"\r\n--{boundary}--\r\n".encode()
    with server.connect() as sock:
        send_request(sock, "POST", "/upload", body=body, close=True,
                     headers={"Content-Type": f"multipart/form-data; boundary={boundary}"})
        status, _, answer = read_response(sock.makefile("rb"))
    assert status == 200, answer
    assert json.loads(answer) == {"name": "report", "filename": "data.bin", "size": len(payload),
                                  "sha256": hashlib.sha256(payload).hexdigest()}


def test_a_raw_utf8_target_reaches_the_app_decoded_once(serve):
    """A target with raw UTF-8 bytes (as browsers never send, and curl does): the front
    percent-encodes them (a URI is ASCII), so raw_path and query_string hold the escapes, and path
    the characters they spell, decoded once, not the UTF-8 of their latin-1 reading."""
    server = serve("-w", "1", "-t", "1", "asgi_probe:app")
    with server.connect() as sock:
        sock.sendall(b"GET /target/caf\xc3\xa9/%C3%A9t%C3%A9?q=\xc3\xa9&r=%C3%A9 HTTP/1.1\r\n"
                     b"Host: localhost\r\nConnection: close\r\n\r\n")
        status, _, body = read_response(sock.makefile("rb"))
    assert status == 200, body
    assert json.loads(body) == {
        "path": "/target/caf\u00e9/\u00e9t\u00e9",
        "raw_path": "/target/caf%C3%A9/%C3%A9t%C3%A9",
        "query_string": "q=%C3%A9&r=%C3%A9",
    }


def test_lifespan_startup_before_ready_and_shutdown_on_drain(serve, framework_app, tmp_path):
    log = tmp_path / "lifespan"
    server = serve("-w", "2", "-t", "1", framework_app, env={"LIFESPAN_LOG": str(log)})
    # Both workers ran their startup before the front counted them ready.
    wait_until(lambda: [worker["state"] for worker in server.stats()["workers"]] == ["ready", "ready"],
               message="two ready workers")
    assert lifespan_events(log) == ["startup", "startup"]
    assert server.get("/items/1")[0] == 200
    server.signal(signal.SIGTERM)
    assert server.wait() == 0
    assert sorted(lifespan_events(log)) == ["shutdown", "shutdown", "startup", "startup"]
    pids = {line.split()[1] for line in log.read_text().splitlines()}
    assert len(pids) == 2, "each worker process runs its own startup and shutdown"


def test_failed_startup_stops_boot_with_the_apps_message(framework_app):
    environment = dict(os.environ, FAIL_STARTUP="1", HEADWAY_PYTHON=os.environ.get("HEADWAY_PYTHON", sys.executable))
    environment["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO / "python"), environment.get("PYTHONPATH")]))
    finished = subprocess.run([headway_binary(), "serve", "-b", "127.0.0.1:0", "-w", "1", "-t", "1", framework_app],
                              cwd=APPS, env=environment, capture_output=True, timeout=120)
    log = finished.stderr.decode() + finished.stdout.decode()
    assert finished.returncode != 0, log
    assert "the app's startup failed" in log and "RuntimeError: the database is down" in log, log
    assert "listening on http" not in log, "nothing is served by an app whose startup failed"


def test_app_without_lifespan_support_is_served(serve):
    server = serve("-w", "1", "-t", "1", "asgi_probe:app")
    assert server.get("/hello")[2] == b"hello"
    assert b"does not support the lifespan protocol" in server.log()


def test_slots_bound_the_requests_in_the_app(serve):
    server = serve("-w", "1", "-t", "2", "asgi_probe:app")
    results = parallel_gets(server, ["/slow"] * 4)
    assert [(status, body) for status, _, body in results] == [(200, b"slept")] * 4
    assert server.get("/most")[2] == b"2", "two slots: two requests in the app at once, never more"


def test_by_default_an_asgi_worker_has_16_slots_and_a_wsgi_worker_5(serve):
    """`-t auto`: the worker says its kind of app once it has imported it, and the front opens
    that many slots; still never more requests in the app at once than slots."""
    asgi = serve("-w", "1", "asgi_probe:app")
    stats = asgi.stats()
    assert (stats["slots"]["total"], stats["workers"][0]["slots"]) == (16, 16)
    results = parallel_gets(asgi, ["/slow"] * 20)
    assert [(status, body) for status, _, body in results] == [(200, b"slept")] * 20
    assert asgi.get("/most")[2] == b"16", "16 slots: 16 requests in the app at once, never more"
    wsgi = serve("-w", "2", "probe:app")
    assert wsgi.stats()["slots"]["total"] == 10
    assert [worker["slots"] for worker in wsgi.stats()["workers"]] == [5, 5]


def test_starlette_websocket_echo_through_the_front(serve):
    require_module("starlette")
    from websockets.sync.client import connect

    server = serve("-w", "1", "-t", "1", "--interface", "asgi", "starlette_site:app")
    with connect(f"ws://127.0.0.1:{server.port}/echo") as ws:
        for message in ("hello", b"\0\1" * 40_000):
            ws.send(message)
            assert ws.recv(timeout=30) == message
        assert server.stats()["slots"]["busy"] == 0, "an open WebSocket holds no slot"
        assert server.get("/items/7")[0] == 200, "the one slot still serves HTTP"


def test_a_websocket_denied_with_the_apps_own_response(serve):
    """The `websocket.http.response` extension: Starlette's `send_denial_response` reaches the
    client as the app made it, where a server without the extension would make the app fail."""
    require_module("starlette")
    from websockets.exceptions import InvalidStatus
    from websockets.sync.client import connect

    server = serve("-w", "1", "-t", "1", "--interface", "asgi", "starlette_site:app")
    with pytest.raises(InvalidStatus) as denied:
        connect(f"ws://127.0.0.1:{server.port}/private", open_timeout=30)
    response = denied.value.response
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == 'Bearer realm="ws"'
    assert response.body == b"sign in first\n"
    assert server.stats()["websockets"]["open"] == 0
    assert b"Traceback" not in server.log()


def test_the_demo_as_asgi(serve):
    server = serve("-w", "1", "-t", "1", "--interface", "asgi")
    status, _, body = server.get("/hello")
    assert (status, body) == (200, b"Hello, world!\n")
    assert b"headway.twins.demo_asgi:app (ASGI)" in server.log()


def test_a_request_waiting_on_what_only_it_holds_is_not_collected(serve):
    """asyncio holds a task only weakly: a request whose app awaits a future nothing else holds is
    kept by the worker until the app is done, so a garbage collection meanwhile does not end it."""
    server = serve("-w", "1", "-t", "2", "asgi_probe:app")
    with server.connect() as sock:
        send_request(sock, "GET", "/orphan", close=True)
        wait_until(lambda: server.stats()["slots"]["busy"] == 1, message="the request to wait in the app")
        assert server.get("/wake-orphan")[2] == b"woke"
        assert read_response(sock.makefile("rb"))[::2] == (200, b"woken")


def leave_and_see_the_app_hear_it(server, sock):
    """Closes `sock` once its request is in the app; the app must hear `http.disconnect`, and the
    slot serve on."""
    wait_until(lambda: server.stats()["slots"]["busy"] == 1, message="the request to reach the app")
    sock.close()
    wait_until(lambda: json.loads(server.get("/seen")[2]) == ["http.disconnect"],
               message="the app to hear that its client left")
    wait_until(lambda: server.stats()["slots"]["busy"] == 0, message="the slot to be given back")
    assert server.get("/hello")[2] == b"hello"


def test_the_app_hears_http_disconnect_when_its_client_vanishes(serve):
    server = serve("-w", "1", "-t", "2", "asgi_probe:app")
    sock = server.connect()
    send_request(sock, "GET", "/until-gone")
    leave_and_see_the_app_hear_it(server, sock)


def test_the_app_hears_http_disconnect_when_its_client_leaves_a_quiet_response(serve):
    """A response begun and then quiet (a long poll, server-sent events with nothing to say): the
    front watches its client while it waits for the next piece, so the app hears the client leave
    although nothing is written that could fail."""
    server = serve("-w", "1", "-t", "2", "asgi_probe:app")
    sock = server.connect()
    send_request(sock, "GET", "/quiet-until-gone")
    received = b""
    while b"started\n" not in received:
        data = sock.recv(4096)
        assert data, received
        received += data
    assert received.startswith(b"HTTP/1.1 200 OK\r\n"), received
    leave_and_see_the_app_hear_it(server, sock)


def test_a_pipelined_request_behind_a_streaming_response_is_kept_for_its_turn(serve):
    """The front reads on while a response streams; a request the client sends meanwhile is its
    next, answered after the first response ends, not taken for a hang-up."""
    server = serve("-w", "1", "-t", "2", "asgi_probe:app")
    with server.connect() as sock:
        stream = sock.makefile("rb")
        send_request(sock, "GET", "/large?size=3000000&pieces=30")
        send_request(sock, "GET", "/hello", close=True)
        first = read_response(stream)
        assert (first[0], first[2] == large_body(3000000)) == (200, True)
        assert read_response(stream)[::2] == (200, b"hello")


def test_the_app_hears_http_disconnect_when_its_client_leaves_mid_upload(serve):
    """A large body sent fast is read by the app as it arrives; its client leaving before the end
    is an `http.disconnect`, and the slot serves on."""
    server = serve("-w", "1", "-t", "1", "--max-body", "64MiB", "--request-buffer", "1MiB", "asgi_probe:app")
    sock = server.connect()
    sock.sendall(b"POST /read-until-gone HTTP/1.1\r\nHost: a\r\nContent-Length: %d\r\n\r\n" % (16 << 20)
                 + os.urandom(4 << 20))
    leave_and_see_the_app_hear_it(server, sock)  # 12 MiB short of its length


# The loop's slow paths over the hop: a request body that is not on the ring when the loop reads
# it, a response that does not fit the ring (then output is kept back), an upload left unread
# (taken off the ring before the slot is given back): each waits for the front to ring the loop
# when the ring has moved; and a client that leaves mid-response. The
# hop's rings hold 256 KiB (crates/server/src/workers/hop_link.rs, RING_BYTES); the
# bodies here are many times that.

def test_an_upload_sent_in_pauses_reaches_the_app_exactly(serve):
    """The front has the whole body before the request queues, but a body many rings long comes
    onto the ring piece by piece as the app reads it, and now and then the app reads faster."""
    server = serve("-w", "1", "-t", "1", "asgi_probe:app")
    piece = 2 << 20
    body = os.urandom(3 * piece + 7)
    pieces = [body[:piece], body[piece:2 * piece], body[2 * piece:]]
    assert upload_in_pauses(server, {"Content-Length": len(body)}, pieces) == digest_of(body)


def test_a_chunked_upload_sent_in_pauses_reaches_the_app_exactly(serve):
    server = serve("-w", "1", "-t", "1", "asgi_probe:app")
    pieces = [os.urandom(size) for size in (2 << 20, 1, (2 << 20) + 7)]
    chunks = [b"%x\r\n%s\r\n" % (len(piece), piece) for piece in pieces] + [b"0\r\n\r\n"]
    assert upload_in_pauses(server, {"Transfer-Encoding": "chunked"}, chunks) == digest_of(b"".join(pieces))


def test_an_app_reading_its_upload_while_it_streams_gets_both_through(serve):
    """One task of the app reads a body many rings long (reads that wait for the ring) while
    another sends piece after piece: both get through, neither fails."""
    server = serve("-w", "1", "-t", "1", "asgi_probe:app")
    body = os.urandom(8 << 20)
    with server.connect(timeout=60) as sock:
        send_request(sock, "POST", "/digest-streaming", body=body, close=True)
        status, _, answer = read_response(sock.makefile("rb"))
    assert status == 200, answer
    dots, _, digest = answer.rpartition(b"\n")
    assert dots.strip(b".") == b"", answer[:200]
    assert json.loads(digest) == digest_of(body)
    status, _, answer = server.get("/hello")
    assert (status, answer) == (200, b"hello"), "the one slot is free again"


def test_an_upload_the_app_never_reads_is_taken_off_the_ring_before_the_slot_serves_again(serve):
    """The app answers before reading a body many rings long: the rest still comes onto the ring
    as the front writes it, and the worker takes it off (woken each time the front has written
    more) before it gives the slot back, so the next request on it starts clean."""
    server = serve("-w", "1", "-t", "1", "asgi_probe:app")
    body = os.urandom(6 << 20)
    with server.connect(timeout=60) as sock:
        stream = sock.makefile("rb")
        send_request(sock, "POST", "/hello", body=body)
        assert read_response(stream)[::2] == (200, b"hello")
        send_request(sock, "GET", "/hello", close=True)
        assert read_response(stream)[::2] == (200, b"hello"), "the one slot serves the next request"


@pytest.mark.parametrize("pieces", [1, 97], ids=["one-message", "many-messages"])
def test_a_response_many_rings_long_arrives_whole_and_the_slot_serves_again(serve, pieces):
    """The client waits before it reads; the worker meanwhile writes far more than the ring holds,
    which the front takes off the ring into its spool as room frees up."""
    server = serve("-w", "1", "-t", "1", "asgi_probe:app")
    size = 6 << 20
    with server.connect(timeout=60) as sock:
        send_request(sock, "GET", f"/large?size={size}&pieces={pieces}", close=True)
        time.sleep(0.5)
        status, _, body = read_response(sock.makefile("rb"))
    assert status == 200
    assert len(body) == size
    assert hashlib.sha256(body).digest() == hashlib.sha256(large_body(size)).digest(), "bytes lost or out of order"
    status, _, body = server.get("/hello")
    assert (status, body) == (200, b"hello"), "the one slot is free again"


@pytest.mark.parametrize("listen", [True, False], ids=["awaiting-receive", "noticed-by-send"])
def test_a_client_leaving_mid_stream_ends_the_app_and_frees_its_slot(serve, tmp_path, listen):
    """An endless streamed response whose client reads a little and leaves: the app hears it, from
    `receive` (http.disconnect) or from `send` raising, and the one slot serves the next request."""
    heard = tmp_path / "heard"
    server = serve("-w", "1", "-t", "1", "asgi_probe:app")
    sock = server.connect()
    send_request(sock, "GET", f"/endless?listen={int(listen)}&record={quote(str(heard))}")
    stream = sock.makefile("rb")
    assert stream.readline().startswith(b"HTTP/1.1 200")
    for _ in range(5):
        assert stream.read(1000)
    stream.close()
    sock.close()
    expected = "http.disconnect" if listen else "send raised ConnectionError"
    wait_until(lambda: heard.exists() and expected in heard.read_text().splitlines(), timeout=60,
               message=f"the app to note {expected!r}")
    status, _, body = server.get("/hello", timeout=60)
    assert (status, body) == (200, b"hello"), "the one slot is free again"


def upload_in_pauses(server, headers, pieces):
    """POSTs to asgi_probe's /digest: the head, then each piece 0.2 s after the one before;
    returns what the app read, as JSON."""
    with server.connect() as sock:
        send_request(sock, "POST", "/digest", headers=headers, close=True)
        for piece in pieces:
            time.sleep(0.2)
            sock.sendall(piece)
        status, _, answer = read_response(sock.makefile("rb"))
    assert status == 200, answer
    return json.loads(answer)


def digest_of(body):
    return {"length": len(body), "sha256": hashlib.sha256(body).hexdigest()}


@pytest.mark.parametrize("size", [0, 1_000_003], ids=["empty", "four-pieces-and-a-bit"])
def test_a_file_sent_by_path(serve, tmp_path, size):
    """The `http.response.pathsend` extension (Starlette's FileResponse uses it when offered):
    the worker reads the file, and the client gets exactly its bytes."""
    file = tmp_path / "file"
    file.write_bytes(large_body(size))
    server = serve("-w", "1", "-t", "1", "asgi_probe:app")
    status, headers, body = server.get(f"/pathsend?path={file}")
    assert (status, headers["content-length"]) == (200, str(size))
    assert body == file.read_bytes()


def test_a_starlette_file_response(serve):
    require_module("starlette")
    server = serve("-w", "1", "-t", "1", "--interface", "asgi", "starlette_site:app")
    status, headers, body = server.get("/source")
    assert (status, body) == (200, (APPS / "starlette_site.py").read_bytes())
    assert headers["content-type"].startswith("text/plain")


def large_body(size):
    """What asgi_probe's /large sends: seeded pseudo-random bytes."""
    return random.Random(size).randbytes(size)


# The leak test: each request's native objects (its cycle, and what the app's task holds of it)
# must be freed once it is over, whether the app returned, its client left while it waited, or
# that client leaving cancelled its task. Most requests are pipelined on keep-alive connections, so
# 100,000 fit in well under a minute on two cores.
LEAK_REQUESTS = 100_000
LEAK_WARM_UP = 5_000
# In each batch of a connection: this many requests pipelined, then one whose client leaves while
# the app waits, and one whose client leaving cancels the app's task.
LEAK_BATCH = 48
LEAK_CLIENTS = 4


def census(server):
    """asgi_probe's /gc: the worker's counts after a collection."""
    status, _, body = server.get("/gc")
    assert status == 200, body
    return json.loads(body)


def pipelined(sock, count):
    """Sends `count` GETs of /hello at once on `sock` and reads their responses, all alike."""
    sock.sendall(b"GET /hello HTTP/1.1\r\nHost: a\r\n\r\n" * count)
    received = bytearray()
    while received.count(b"\r\n\r\nhello") < count:
        piece = sock.recv(1 << 16)
        assert piece, "the connection closed mid-batch"
        received += piece
    assert received.count(b"HTTP/1.1 200 ") == count


def leave(server, path):
    """Requests `path`, reads the first piece of its response (so the app is under way), and leaves."""
    with server.connect() as sock:
        send_request(sock, "GET", path)
        received = b""
        while b"started\n" not in received:
            piece = sock.recv(4096)
            assert piece, f"{path} closed before its first piece"
            received += piece


def requests_in_a_mix(server, total):
    """`total` requests from LEAK_CLIENTS threads: in each batch, LEAK_BATCH pipelined on a
    keep-alive connection, one /left and one /cancelled."""
    errors = []

    batches, rest = divmod(total, LEAK_CLIENTS * (LEAK_BATCH + 2))
    assert rest == 0

    def client():
        try:
            with server.connect() as sock:
                for _ in range(batches):
                    pipelined(sock, LEAK_BATCH)
                    leave(server, "/left")
                    leave(server, "/cancelled")
        except Exception as error:
            errors.append(error)

    threads = [threading.Thread(target=client) for _ in range(LEAK_CLIENTS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert not errors, errors
    assert not any(thread.is_alive() for thread in threads), "the clients did not finish in 300 s"


def test_requests_left_cancelled_or_served_leave_nothing_behind(serve):
    """After a warm-up, 100,000 requests (one in 25 whose client leaves mid-response while the app
    waits, one in 25 whose app is cancelled by that) leave the worker's objects and memory as they
    were. The slack: a few hundred tracked objects and pymalloc blocks for the loop's and
    allocator's own caches (free lists, a resized dict or set), and 8 MiB of resident memory for
    the C allocator's arenas; a request left behind would hold a cycle, a task and its frames,
    hundreds of bytes and several objects each, 100,000 times over."""
    server = serve("-w", "1", "-t", "4", "asgi_probe:app")
    requests_in_a_mix(server, LEAK_WARM_UP)
    wait_until(lambda: server.stats()["slots"]["busy"] == 0, message="the warm-up's requests to end")
    before = census(server)
    started = time.monotonic()
    requests_in_a_mix(server, LEAK_REQUESTS)
    elapsed = time.monotonic() - started
    wait_until(lambda: server.stats()["slots"]["busy"] == 0, message="every request to end")
    after = census(server)
    figures = f"before {before}, after {after}, {LEAK_REQUESTS} requests in {elapsed:.1f} s"
    assert after["objects"] - before["objects"] < 500, figures
    assert after["blocks"] - before["blocks"] < 1000, figures
    # The request asking for the census is the one cycle the collector reaches, by several paths.
    assert after["native"].get("HttpCycle", 0) <= before["native"].get("HttpCycle", 0), figures
    assert after["rss_kib"] - before["rss_kib"] < 8 * 1024, figures
