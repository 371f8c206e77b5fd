"""PEP 3333 as an app sees it through the front (the worker's own tests are in tests/worker)."""

import hashlib
import json
import os

from conftest import read_response, send_request, wait_until

REQUIRED = {
    "REQUEST_METHOD": "str", "SCRIPT_NAME": "str", "PATH_INFO": "str", "QUERY_STRING": "str",
    "SERVER_NAME": "str", "SERVER_PORT": "str", "SERVER_PROTOCOL": "str",
    "wsgi.version": "tuple", "wsgi.url_scheme": "str", "wsgi.multithread": "bool",
    "wsgi.multiprocess": "bool", "wsgi.run_once": "bool",
}


def test_environ_has_every_required_key_with_its_type(serve):
    server = serve("-w", "1", "-t", "2", "probe:app")
    status, _, body = server.get("/environ?x=1")
    environ = json.loads(body)
    assert status == 200
    for key, kind in REQUIRED.items():
        assert environ.get(key) == kind, key
    for key in ("wsgi.input", "wsgi.errors", "wsgi.file_wrapper"):
        assert key in environ


def test_large_body_streams_through_to_wsgi_input(serve):
    server = serve("-w", "1", "-t", "1", "--max-body", "16MiB", "probe:app")
    body = bytes(range(256)) * (4 << 12)  # 4 MiB, every byte value
    with server.connect(timeout=60) as sock:
        send_request(sock, "PUT", "/echo", body=body)
        status, _, answer = read_response(sock.makefile("rb"))
    echoed = json.loads(answer)
    assert status == 200
    assert echoed["content_length"] == str(len(body))
    assert echoed["body"].encode("latin-1") == body


def test_an_upload_past_the_request_buffer_reaches_the_app_exactly_however_it_reads(serve):
    """Past --request-buffer a body waits in a file, which the worker reads itself: the bytes
    held in memory come first, then the file's, in order, whatever sizes the app reads in."""
    server = serve("-w", "1", "-t", "2", "--max-body", "8MiB", "--request-buffer", "64KiB", "probe:app")
    for size in (64 << 10, (64 << 10) + 1, (3 << 20) + 7):
        body = os.urandom(size)
        for piece in (7, 4093, 65536, 1 << 20, (1 << 20) + 1, -1):
            if piece == 7 and size > 1 << 20:
                continue  # a million calls of the app's own: slow, and nothing more to learn
            with server.connect(timeout=60) as sock:
                send_request(sock, "POST", f"/digest?piece={piece}", body=body, close=True)
                status, _, answer = read_response(sock.makefile("rb"))
            assert status == 200, answer
            assert json.loads(answer) == {"length": size, "sha256": hashlib.sha256(body).hexdigest()}, (size, piece)


def test_uploads_past_the_request_buffer_leave_no_file_behind_read_or_not(serve):
    """The worker is handed each spooled body's file; whether the app reads the body or not, the
    file is closed when the request ends, and the front gives its disk back."""
    server = serve("-w", "1", "-t", "2", "--max-body", "8MiB", "--request-buffer", "64KiB", "probe:app")
    files_before = json.loads(server.get("/files")[2])
    body = os.urandom(1 << 20)
    for path in ("/digest", "/bytes?n=1") * 10:
        with server.connect(timeout=60) as sock:
            send_request(sock, "POST", path, body=body, close=True)
            assert read_response(sock.makefile("rb"))[0] == 200
    # A slot closes the file as its request ends, which may be just after the client has the last byte.
    wait_until(lambda: json.loads(server.get("/files")[2]) == files_before, message="the workers' files to be closed")
    wait_until(lambda: server.stats()["temp_files"]["bytes"] == 0, message="the files' disk to be given back")


def test_iterable_close_is_called_even_when_the_client_leaves_mid_response(serve):
    server = serve("-w", "1", "-t", "2", "probe:app")
    assert server.get("/closing?id=served")[2] == b"closing served"
    sock = server.connect()
    send_request(sock, "GET", "/closing?id=abandoned&ms=500")
    wait_until(lambda: server.stats()["slots"]["busy"] == 1, message="the response to start")
    sock.close()
    closed = wait_until(lambda: (lambda ids: ids if "abandoned" in ids else None)(json.loads(server.get("/closed")[2])),
                        message="close() of the abandoned response")
    assert "served" in closed


def test_a_stream_whose_client_left_stops_at_its_next_piece(serve):
    """As on a socket, where the write fails: the ring would take the pieces, the front's mark
    stops them, and close() runs."""
    server = serve("-w", "1", "-t", "2", "probe:app")
    with server.connect() as sock:
        send_request(sock, "GET", "/endless?id=left")
        assert sock.recv(4096).startswith(b"HTTP/1.1 200")
    wait_until(lambda: "left" in json.loads(server.get("/closed")[2]), message="the stream to stop")
    assert server.stats()["workers"][0]["restarts"] == 0


def test_queued_large_uploads_wait_on_disk_not_in_memory(serve):
    """Eight 16 MiB uploads wait behind a blocker: the front keeps at most --request-buffer of
    each in memory, and every body reaches the app intact afterwards."""
    server = serve("-w", "1", "-t", "1", "--max-body", "32MiB", "--request-buffer", "64KiB", "probe:app")
    blocker = server.connect()
    send_request(blocker, "GET", "/record?id=blocker&ms=3000")
    wait_until(lambda: server.stats()["slots"]["busy"] == 1, message="the blocker to start")
    rss_before = server.stats()["front"]["rss_bytes"]
    uploads = []
    for _ in range(8):
        body = os.urandom(16 << 20)
        sock = server.connect(timeout=60)
        send_request(sock, "POST", "/digest", body=body)
        uploads.append((sock, hashlib.sha256(body).hexdigest()))
    wait_until(lambda: server.stats()["queue"]["depth"] == 8, message="all uploads to be queued")
    growth = server.stats()["front"]["rss_bytes"] - rss_before
    assert growth < 40 << 20, f"front grew by {growth >> 20} MiB for 128 MiB of waiting uploads"
    assert read_response(blocker.makefile("rb"))[0] == 200
    for sock, expected in uploads:
        status, _, body = read_response(sock.makefile("rb"))
        assert status == 200 and json.loads(body) == {"length": 16 << 20, "sha256": expected}
