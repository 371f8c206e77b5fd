"""Files at the front: `--static URL_PREFIX=DIR` mounts answered without a slot (types,
validators, conditionals, ranges, precompressed variants, Cache-Control, misses going to the app),
never a file outside the directory, over HTTP/1.1 and HTTP/2 with TLS or without; a slow reader of a
large file costs the front no memory and no slot; a worker's X-Accel-Redirect and X-Sendfile,
taken only under the roots the operator allowed; and all of it visible in the access log, /stats
and /metrics."""

import functools
import os
import signal
import socket
import ssl
import subprocess
import sys
import time

import pytest
from test_http2 import Client, h2c, tls_socket

from conftest import APPS, exchange, read_response, request_bytes, require, send_request, wait_until

CSS = b"body { color: #123; }\n"
PATTERN = bytes(range(256)) * 400  # 102400 bytes: past the size sent with its head, so by sendfile
DIGEST_NAME = "application-5c1f4d8e.css"
# Paths under the mount that try to leave it or show what should stay hidden; each must get the
# front's 404, never the file and never the app.
ESCAPES = [
    "/static/../secret.txt",
    "/static/sub/../../secret.txt",
    "/static/%2e%2e/secret.txt",
    "/static/%2E%2E/secret.txt",
    "/static/.%2e/secret.txt",
    "/static/..%2fsecret.txt",
    "/static/sub%2f..%2f..%2fsecret.txt",
    "/static/%2fetc%2fpasswd",
    "/static/app.css%00.png",
    "/static/%00",
    "/static/.env",
    "/static/%2eenv",
    "/static/sub/.git/config",
    "/static/out.txt",
    "/static/up/secret.txt",
]


@pytest.fixture
def site(tmp_path):
    """A public directory with a stylesheet and its variants, a fingerprinted copy, a patterned
    binary, an empty file, dot files, and symlinks in and out; a secret beside it; and a
    private directory for hand-offs."""
    public = tmp_path / "public"
    (public / "sub" / ".git").mkdir(parents=True)
    (public / "app.css").write_bytes(CSS)
    (public / "app.css.br").write_bytes(b"BROTLI")
    (public / "app.css.gz").write_bytes(b"GZIP")
    (public / DIGEST_NAME).write_bytes(CSS)
    (public / "pattern.bin").write_bytes(PATTERN)
    (public / "empty.txt").write_bytes(b"")
    (public / ".env").write_bytes(b"secret")
    (public / "sub" / ".git" / "config").write_bytes(b"secret")
    (public / "sub" / "page.html").write_bytes(b"<p>hi</p>")
    (tmp_path / "secret.txt").write_bytes(b"secret")
    os.symlink(public / "app.css", public / "in.css")
    os.symlink(tmp_path / "secret.txt", public / "out.txt")
    os.symlink(tmp_path, public / "up")
    private = tmp_path / "private"
    private.mkdir()
    (private / "report.pdf").write_bytes(PATTERN)
    os.symlink(tmp_path / "secret.txt", private / "leak.txt")
    return tmp_path


def mounted(serve, site, *extra):
    """A server with the site's public directory at /static, before an app that answers 200."""
    return serve("-w", "1", "--static", f"/static={site / 'public'}", *extra, "handoff:app")


def test_a_mount_serves_its_files_without_a_slot(serve, site):
    server = mounted(serve, site, "--static-max-age", "3600")
    status, headers, body = exchange(server, "GET", "/static/app.css")
    assert (status, body) == (200, CSS)
    assert headers["content-type"] == "text/css; charset=utf-8"
    assert headers["content-length"] == str(len(CSS))
    assert headers["accept-ranges"] == "bytes"
    assert headers["etag"].startswith('"') and headers["etag"].endswith(f'-{len(CSS):x}"')
    assert headers["last-modified"].endswith(" GMT")
    assert headers["cache-control"] == "public, max-age=3600"
    assert headers["vary"] == "Accept-Encoding", "it has precompressed variants"
    status, headers, body = exchange(server, "GET", f"/static/{DIGEST_NAME}?v=1", {"Accept-Encoding": "gzip, br"})
    assert (status, body, headers["cache-control"]) == (200, CSS, "public, max-age=3600, immutable")
    assert "vary" not in headers, "no variant there"
    status, headers, body = exchange(server, "GET", "/static/pattern.bin")
    assert (status, headers["content-type"], body) == (200, "application/octet-stream", PATTERN)
    assert exchange(server, "GET", "/static/sub/page.html")[2] == b"<p>hi</p>"
    assert exchange(server, "GET", "/static/in.css")[2] == CSS, "a symlink that stays inside"
    status, headers, body = exchange(server, "GET", "/static/empty.txt")
    assert (status, headers["content-length"], body) == (200, "0", b"")
    stats = server.stats()
    assert stats["workers"][0]["requests"] == 0, "no request reached a slot"
    assert stats["static_files"]["responses"] == {"200": 6}
    assert stats["static_files"]["bytes"] == 3 * len(CSS) + len(PATTERN) + len(b"<p>hi</p>")
    assert stats["responses"] == {}, "counted apart from the app's"


def test_head_says_the_length_and_sends_nothing_more(serve, site):
    server = mounted(serve, site)
    with server.connect() as sock:
        stream = sock.makefile("rb")
        for path in ("/static/pattern.bin", "/static/app.css"):
            send_request(sock, "HEAD", path)
            status, headers, body = read_response(stream, method="HEAD")
            assert (status, body) == (200, b"")
            assert headers["content-length"] == str(len(PATTERN if path.endswith("bin") else CSS))
        send_request(sock, "GET", "/static/app.css", close=True)
        assert read_response(stream)[2] == CSS, "no body bytes after the HEAD responses"


def test_a_current_copy_gets_304(serve, site):
    server = mounted(serve, site, "--static-max-age", "60")
    _, first, _ = exchange(server, "GET", "/static/app.css")
    etag, modified = first["etag"], first["last-modified"]
    for conditional in ({"If-None-Match": etag}, {"If-None-Match": f'"other", W/{etag}'}, {"If-None-Match": "*"},
                        {"If-Modified-Since": modified}):
        status, headers, body = exchange(server, "GET", "/static/app.css", conditional)
        assert (status, body) == (304, b""), conditional
        assert (headers["etag"], headers["cache-control"]) == (etag, "public, max-age=60")
        assert "content-length" not in headers and "content-type" not in headers
    for stale in ({"If-None-Match": '"other"'}, {"If-Modified-Since": "Thu, 01 Jan 1970 00:00:00 GMT"},
                  {"If-None-Match": '"other"', "If-Modified-Since": modified}):
        assert exchange(server, "GET", "/static/app.css", stale)[:3:2] == (200, CSS), stale


def test_one_range_is_206_and_past_the_end_is_416(serve, site):
    server = mounted(serve, site)
    etag = exchange(server, "GET", "/static/pattern.bin")[1]["etag"]
    size = len(PATTERN)
    ranges = (("bytes=0-0", 0, 0), ("bytes=1000-60000", 1000, 60000), ("bytes=-10", size - 10, size - 1),
              ("bytes=100000-", 100000, size - 1), ("bytes=5-999999", 5, size - 1))
    for asked, start, end in ranges:
        status, headers, body = exchange(server, "GET", "/static/pattern.bin", {"Range": asked})
        assert status == 206, asked
        assert headers["content-range"] == f"bytes {start}-{end}/{size}"
        assert body == PATTERN[start:end + 1]
    status, headers, body = exchange(server, "GET", "/static/pattern.bin", {"Range": f"bytes={size}-"})
    assert (status, headers["content-range"], headers["content-length"], body) == (416, f"bytes */{size}", "0", b"")
    # Another unit, a stale If-Range: the whole file.
    for whole in ({"Range": "lines=1-2"}, {"Range": "bytes=0-1", "If-Range": '"old"'}):
        assert exchange(server, "GET", "/static/pattern.bin", whole)[:3:2] == (200, PATTERN), whole
    status, _, body = exchange(server, "GET", "/static/pattern.bin", {"Range": "bytes=2-3", "If-Range": etag})
    assert (status, body) == (206, PATTERN[2:4])
    status, headers, body = exchange(server, "HEAD", "/static/pattern.bin", {"Range": "bytes=2-3"})
    assert (status, headers["content-length"], body) == (200, str(size), b""), "Range is for GET"


def byteranges(headers, body):
    """The parts of a multipart/byteranges body, each as (Content-Type, Content-Range, bytes)."""
    kind, _, boundary = headers["content-type"].partition("; boundary=")
    assert kind == "multipart/byteranges" and boundary, headers["content-type"]
    delimiter = b"\r\n--" + boundary.encode()
    chunks = (b"\r\n" + body).split(delimiter)
    assert chunks[0] == b"" and chunks[-1] == b"--\r\n", "opened and closed by the boundary"
    parts = []
    for chunk in chunks[1:-1]:
        head, _, data = chunk.partition(b"\r\n\r\n")
        fields = dict(line.split(": ", 1) for line in head.decode().split("\r\n")[1:])
        parts.append((fields["Content-Type"], fields["Content-Range"], data))
    return parts


def test_several_ranges_are_a_multipart_body(serve, site, ca, tls_files):
    server = mounted(serve, site)
    size = len(PATTERN)
    etag = exchange(server, "GET", "/static/pattern.bin")[1]["etag"]
    binary = "application/octet-stream"
    # Small parts go in the write of the head; large ones by sendfile, the part heads between them.
    for asked, spans in (("bytes=1000-1009,0-1, -5", ((0, 1), (1000, 1009), (size - 5, size - 1))),
                         ("bytes=0-39999,60000-99999", ((0, 39999), (60000, 99999)))):
        status, headers, body = exchange(server, "GET", "/static/pattern.bin", {"Range": asked})
        assert status == 206 and "content-range" not in headers, asked
        assert headers["content-length"] == str(len(body))
        expected = [(binary, f"bytes {start}-{end}/{size}", PATTERN[start:end + 1]) for start, end in spans]
        assert byteranges(headers, body) == expected, asked
    status, headers, body = exchange(server, "GET", "/static/pattern.bin",
                                     {"Range": "bytes=0-1,5-6", "If-Range": etag})
    assert (status, headers["content-range"], body) == (206, f"bytes 0-6/{size}", PATTERN[:7]), "coalesced: one part"
    status, headers, body = exchange(server, "GET", "/static/pattern.bin", {"Range": "bytes=0-1,200000-"})
    assert (status, headers["content-range"], body) == (206, f"bytes 0-1/{size}", PATTERN[:2]), "past the end: left out"
    # Refused as RFC 9110 permits: more than 16 ranges, more bytes than the file (overlapping
    # ones); and a stale If-Range. Each gets the whole file.
    seventeen = "bytes=" + ",".join(f"{i * 1000}-{i * 1000}" for i in range(17))
    for whole in ({"Range": seventeen}, {"Range": "bytes=0-,0-"}, {"Range": "bytes=0-60000,1000-61000"},
                  {"Range": "bytes=0-1,500-501", "If-Range": '"old"'}):
        status, headers, body = exchange(server, "GET", "/static/pattern.bin", whole)
        assert (status, headers["content-type"], body) == (200, binary, PATTERN), whole
    sixteen = "bytes=" + ",".join(f"{i * 1000}-{i * 1000}" for i in range(16))
    status, headers, body = exchange(server, "GET", "/static/pattern.bin", {"Range": sixteen})
    assert status == 206 and len(byteranges(headers, body)) == 16
    status, headers, body = exchange(server, "GET", "/static/pattern.bin", {"Range": "bytes=200000-,300000-"})
    assert (status, headers["content-range"], body) == (416, f"bytes */{size}", b"")
    status, headers, body = exchange(server, "HEAD", "/static/pattern.bin", {"Range": "bytes=0-1,500-501"})
    assert (status, headers["content-length"], body) == (200, str(size), b""), "Range is for GET"
    status, headers, body = h2_get(h2c(server), "/static/pattern.bin", [("range", "bytes=0-1,70000-70009")])
    assert status == 206 and [part[2] for part in byteranges(headers, body)] == [PATTERN[:2], PATTERN[70000:70010]]
    secure = mounted(serve, site, *tls_files)
    with tls_socket(secure, ca, alpn=("http/1.1",)) as sock:
        send_request(sock, "GET", "/static/pattern.bin", headers={"Range": "bytes=0-39999,60000-99999"}, close=True)
        status, headers, body = read_response(sock.makefile("rb"))
    assert status == 206 and [part[2] for part in byteranges(headers, body)] == [PATTERN[:40000], PATTERN[60000:100000]]


def syscalls_of(pid, requests):
    """The system calls `pid` (its threads too) makes while `requests()` runs: {name: calls}."""
    trace = subprocess.Popen(["strace", "-f", "-c", "-o", "/dev/stdout", "-p", str(pid)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert b"attached" in trace.stderr.readline(), "strace attached"
    time.sleep(0.2)
    requests()
    trace.send_signal(signal.SIGINT)
    summary, _ = trace.communicate(timeout=30)
    counts = {}
    for line in summary.decode().splitlines():
        fields = line.split()
        if len(fields) >= 5 and fields[3].isdigit() and fields[-1] != "total":
            counts[fields[-1]] = int(fields[3])
    return counts


def test_a_small_file_costs_few_system_calls(serve, site):
    """A keep-alive request for a small file, from a client that takes no coding (as a load tool):
    one read of the file into the head's buffer and one write of both; no stat of the path or of
    variants not asked for; and the file, kept open for a second, not opened again for each."""
    require("strace", "apt-get install strace")
    server = mounted(serve, site)
    count = 50
    with server.connect() as sock:
        stream = sock.makefile("rb")

        def requests(times):
            for _ in range(times):
                send_request(sock, "GET", "/static/app.css")
                assert read_response(stream)[2] == CSS

        requests(1)  # the first request's own costs, before counting
        # One more than counted: the client can have the last response before strace has counted
        # the write that sent it, and the next request is answered only after it has.
        calls = syscalls_of(server.process.pid, lambda: requests(count + 1))
    stats = sum(calls.get(name, 0) for name in ("statx", "newfstatat", "fstat", "lstat", "stat", "access"))
    writes = sum(calls.get(name, 0) for name in ("write", "writev", "sendto", "sendmsg", "sendfile"))
    assert calls.get("openat", 0) < count // 2 and calls.get("pread64", 0) <= count + 2, calls
    assert stats <= count + 2, calls
    assert count <= writes <= count + 10, calls


@pytest.mark.parametrize("setting, small, large", [(None, "sendfile", "copy"), ("on", "sendfile", "sendfile"),
                                                   ("off", "copy", "copy")])
def test_sendfile_goes_where_the_setting_says(serve, site, setting, small, large):
    """By default a file goes by sendfile, except one of 4 MiB or more to a client on this host (as
    every client of a test is), which the front reads and writes; --sendfile on and off say so for
    every file. The bytes are the same whichever way they went."""
    require("strace", "apt-get install strace")
    large_file = bytes(range(251)) * (5 * (1 << 20) // 251)
    (site / "public" / "large.bin").write_bytes(large_file)
    server = mounted(serve, site, *(["--sendfile", setting] if setting else []))
    def fetch(path, into):
        # A second request on the connection, answered only once the front's task has come back from
        # the file's last system call: the client can have every byte while strace has yet to count
        # that call.
        with server.connect() as sock:
            stream = sock.makefile("rb")
            send_request(sock, "GET", path)
            into.append(read_response(stream))
            send_request(sock, "GET", "/static/no-such-file", close=True)  # the app answers it
            into.append(read_response(stream))

    for name, content, expected in (("pattern.bin", PATTERN, small), ("large.bin", large_file, large)):
        got = []
        calls = syscalls_of(server.process.pid, functools.partial(fetch, f"/static/{name}", got))
        assert [(status, body == content) for status, _, body in got] == [(200, True), (200, False)], name
        went = "sendfile" if calls.get("sendfile", 0) else "copy"
        assert went == expected and (went == "sendfile" or calls.get("pread64", 0) >= 1), (name, calls)


def test_a_file_replaced_is_served_new_once_its_second_open_is_up(serve, site):
    server = mounted(serve, site)
    page = site / "public" / "sub" / "page.html"
    assert exchange(server, "GET", "/static/sub/page.html")[2] == b"<p>hi</p>"
    fresh = site / "public" / "sub" / "fresh.tmp"
    fresh.write_bytes(b"<p>new</p>")
    os.rename(fresh, page)  # as a deploy replaces a file
    time.sleep(1.2)
    status, headers, body = exchange(server, "GET", "/static/sub/page.html")
    assert (status, body, headers["content-length"]) == (200, b"<p>new</p>", "10")
    page.unlink()
    time.sleep(1.2)
    status, _, body = exchange(server, "GET", "/static/sub/page.html")
    assert (status, body.startswith(b"X-Sendfile-Type")) == (200, True), "deleted: a miss, which the app answers"


def test_a_precompressed_variant_goes_to_a_client_that_takes_it(serve, site):
    server = mounted(serve, site)
    for accept, encoding, body in (("gzip, deflate, br", "br", b"BROTLI"), ("gzip", "gzip", b"GZIP"),
                                   ("br;q=0, gzip;q=0.5", "gzip", b"GZIP"), ("identity", None, CSS), (None, None, CSS)):
        status, headers, got = exchange(server, "GET", "/static/app.css",
                                        {"Accept-Encoding": accept} if accept else None)
        assert (status, got, headers.get("content-encoding")) == (200, body, encoding), accept
        assert (headers["vary"], headers["content-type"]) == ("Accept-Encoding", "text/css; charset=utf-8")


def test_a_miss_goes_to_the_app_unless_static_only(serve, site):
    server = mounted(serve, site)
    status, _, body = exchange(server, "GET", "/static/nope.css?x=1")
    assert (status, body) == (200, b"X-Sendfile-Type: -\nX-Accel-Mapping: -"), "the app answered"
    assert exchange(server, "GET", "/static/sub/")[0] == 200, "a directory is no file: the app's"
    assert exchange(server, "POST", "/static/app.css")[0] == 200, "only GET and HEAD are the front's"
    assert exchange(server, "GET", "/staticx/app.css")[0] == 200
    assert server.stats()["workers"][0]["requests"] == 4
    only = mounted(serve, site, "--static-only")
    assert exchange(only, "GET", "/static/nope.css")[:3:2] == (404, b"Not Found\n")
    assert exchange(only, "GET", "/static/app.css")[2] == CSS
    assert only.stats()["workers"][0]["requests"] == 0


def test_only_is_per_mount(serve, site):
    """`:only` after a mount's directory: its misses get 404, another mount's go to the app."""
    server = serve("-w", "1", "--static", f"/static={site / 'public'}:only", "--static",
                   f"/files={site / 'private'}", "handoff:app")
    assert exchange(server, "GET", "/static/nope.css")[:3:2] == (404, b"Not Found\n")
    assert exchange(server, "GET", "/static/app.css")[2] == CSS
    assert exchange(server, "GET", "/files/nope.pdf")[0] == 200, "the app answered"
    assert exchange(server, "GET", "/files/report.pdf")[2] == PATTERN
    assert server.stats()["workers"][0]["requests"] == 1


def test_dot_files_are_served_when_asked(serve, site):
    """`:dotfiles` (or --static-dotfiles, for every mount) serves names starting with a dot, as an
    ACME client's `.well-known/acme-challenge/` needs; `..` stays refused, in every spelling."""
    challenge = site / "public" / ".well-known" / "acme-challenge"
    challenge.mkdir(parents=True)
    (challenge / "token").write_bytes(b"token.key")
    per_mount = serve("-w", "1", "--static", f"/={site / 'public'}:dotfiles", "handoff:app")
    from_env = serve("-w", "1", "--static", f"/={site / 'public'}", "handoff:app",
                     env={"HEADWAY_STATIC_DOTFILES": "1"})
    for server in (per_mount, from_env):
        status, headers, body = exchange(server, "GET", "/.well-known/acme-challenge/token")
        assert (status, body) == (200, b"token.key")
        assert exchange(server, "GET", "/%2eenv")[2] == b"secret"
        for path in ("/../secret.txt", "/%2e%2e/secret.txt", "/.%2e/secret.txt", "/sub/./page.html", "/out.txt"):
            assert exchange(server, "GET", path)[:3:2] == (404, b"Not Found\n"), path
    refused = serve("-w", "1", "--static", f"/={site / 'public'}:only", "handoff:app")
    assert exchange(refused, "GET", "/.well-known/acme-challenge/token")[:3:2] == (404, b"Not Found\n")


@pytest.mark.parametrize("path", ESCAPES)
def test_no_path_leaves_the_directory(serve, site, path):
    server = mounted(serve, site, "--static-only")
    with server.connect() as sock:
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n".encode())
        status, _, body = read_response(sock.makefile("rb"))
    assert status == 404 and b"secret" not in body, (path, status, body)
    assert server.stats()["workers"][0]["requests"] == 0


def test_escapes_are_refused_not_passed_to_the_app(serve, site):
    """Without --static-only a miss is the app's, but a path that tries to leave is the front's 404."""
    server = mounted(serve, site)
    for path in ESCAPES:
        with server.connect() as sock:
            sock.sendall(f"GET {path} HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n".encode())
            status, _, body = read_response(sock.makefile("rb"))
        assert (status, body) == (404, b"Not Found\n"), path
    assert server.stats()["workers"][0]["requests"] == 0


def h2_get(client, path, extra=()):
    answer = client.answer(client.get(path, extra))
    return answer["status"], dict(answer["headers"]), answer["body"]


def test_http2_and_tls_serve_the_same_bytes(serve, site, ca, tls_files):
    plain = mounted(serve, site)
    client = h2c(plain)
    status, headers, body = h2_get(client, "/static/pattern.bin")
    assert (status, headers["content-length"], body) == (200, str(len(PATTERN)), PATTERN)
    status, headers, body = h2_get(client, "/static/pattern.bin", [("range", "bytes=70000-70009")])
    assert (status, headers["content-range"], body) == (206, f"bytes 70000-70009/{len(PATTERN)}", PATTERN[70000:70010])
    assert h2_get(client, "/static/app.css", [("accept-encoding", "br")])[2] == b"BROTLI"
    assert h2_get(client, "/static/%2e%2e/secret.txt")[:3:2] == (404, b"Not Found\n")
    status, headers, body = h2_get(client, "/static/app.css", [("if-none-match", headers_etag(plain))])
    assert (status, body) == (304, b"")
    client.answer(client.get("/static/app.css", method="HEAD"))

    secure = mounted(serve, site, *tls_files)
    with tls_socket(secure, ca, alpn=("http/1.1",)) as sock:
        send_request(sock, "GET", "/static/pattern.bin", close=True)
        status, _, body = read_response(sock.makefile("rb"))
        assert (status, body) == (200, PATTERN), "in pieces through TLS"
    with tls_socket(secure, ca, alpn=("http/1.1",)) as sock:
        send_request(sock, "GET", "/static/pattern.bin", headers={"Range": "bytes=-5"}, close=True)
        assert read_response(sock.makefile("rb"))[::2] == (206, PATTERN[-5:])
    sock = tls_socket(secure, ca)
    assert sock.selected_alpn_protocol() == "h2"
    status, _, body = h2_get(Client(sock), "/static/pattern.bin")
    sock.close()
    assert (status, body) == (200, PATTERN)
    assert secure.stats()["workers"][0]["requests"] == 0


def headers_etag(server):
    return exchange(server, "GET", "/static/app.css")[1]["etag"]


def front_rss(server):
    with open(f"/proc/{server.process.pid}/status") as status:
        return next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmRSS:"))


def slow_http1(server, ca, tls):
    """Asks for /static/big.bin over HTTP/1.1 (TLS if `tls`) with a small receive buffer; returns a
    function that reads a little more of the body each call, and how much it has read."""
    raw = socket.socket()
    raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
    raw.settimeout(30)
    raw.connect(("127.0.0.1", server.port))
    sock = raw
    if tls:
        context = ssl.create_default_context()
        ca.configure_trust(context)
        context.set_alpn_protocols(["http/1.1"])
        sock = context.wrap_socket(raw, server_hostname="localhost")
    sock.sendall(request_bytes("GET", "/static/big.bin"))
    head = b""
    while b"\r\n\r\n" not in head:
        head += sock.recv(4096)
    assert head.startswith(b"HTTP/1.1 200 ") and b"content-length: 1073741824" in head.lower()
    got = [len(head.partition(b"\r\n\r\n")[2])]

    def read_some():
        got[0] += len(sock.recv(16 * 1024))
        return got[0]

    return read_some, sock


def slow_http2(server):
    """The same over h2c: the client opens its window only as it reads."""
    client = h2c(server)
    stream_id = client.get("/static/big.bin")
    client.sock.settimeout(30)

    def read_some():
        for event in client.conn.receive_data(client.sock.recv(16 * 1024)):
            client.handle(event)
        client.flush()
        return len(client.streams[stream_id]["body"])

    return read_some, client.sock


@pytest.mark.parametrize("how", ["sendfile", "copied", "tls-pieces", "http2-pieces"])
def test_a_slow_reader_of_a_large_file_costs_no_memory_and_no_slot(serve, site, ca, tls_files, how):
    big = site / "public" / "big.bin"
    with open(big, "wb") as sparse:
        sparse.truncate(1 << 30)  # 1 GiB, no disk
    # A large file to a client on this host is copied unless --sendfile on says otherwise.
    extra = {"sendfile": ["--sendfile", "on"], "tls-pieces": tls_files}.get(how, [])
    server = mounted(serve, site, *extra)
    exchange(server, "GET", "/static/app.css")  # the front's first-request allocations, before measuring
    before = front_rss(server)
    read_some, sock = slow_http2(server) if how == "http2-pieces" else slow_http1(server, ca, how == "tls-pieces")
    # Read a little at a time for a while: the front has most of a gigabyte left to send.
    for _ in range(30):
        got = read_some()
        time.sleep(0.05)
    grown = front_rss(server) - before
    stats = server.stats()
    sock.close()
    assert grown < 16 << 20, f"the front grew by {grown} bytes for a slow reader"
    assert stats["slots"]["busy"] == 0 and stats["workers"][0]["requests"] == 0
    assert 0 < got < 1 << 28


# Hand-offs. The WSGI app and the --cmd worker answer with the fields their query asks for.
HANDOFF_WORKERS = {
    "wsgi": ["handoff:app"],
    "cmd": ["--cmd", f"{sys.executable} {APPS / 'handoff.py'} {{socket}}"],
}


@pytest.fixture(params=list(HANDOFF_WORKERS))
def handoff(request, serve, site):
    return serve("-w", "1", "--accel-mapping", f"/private/={site / 'private'}", "--sendfile-root",
                 str(site / "private"), *HANDOFF_WORKERS[request.param])


def test_x_accel_redirect_and_x_sendfile_under_their_roots_send_the_file(handoff, site):
    disposition = "attachment; filename=report.pdf"
    query = f"type=application/pdf&disposition={disposition.replace(' ', '%20').replace(';', '%3B')}"
    for named in ("accel=/private/report.pdf", f"sendfile={site / 'private' / 'report.pdf'}"):
        status, headers, body = exchange(handoff, "GET", f"/download?{named}&{query}")
        assert (status, body) == (200, PATTERN), named
        assert (headers["content-type"], headers["content-disposition"]) == ("application/pdf", disposition)
        assert "x-accel-redirect" not in headers and "x-sendfile" not in headers
        status, headers, body = exchange(handoff, "GET", f"/download?{named}", {"Range": "bytes=10-19"})
        assert (status, headers["content-range"], body) == (206, f"bytes 10-19/{len(PATTERN)}", PATTERN[10:20])
        etag = headers["etag"]
        assert exchange(handoff, "GET", f"/download?{named}", {"If-None-Match": etag})[::2] == (304, b"")
        status, headers, body = exchange(handoff, "HEAD", f"/download?{named}")
        assert (status, headers["content-length"], body) == (200, str(len(PATTERN)), b"")
    status, _, body = exchange(handoff, "GET", "/download?accel=/private/report.pdf&status=403%20Forbidden")
    assert (status, body) == (403, PATTERN), "the worker's status, the file as its body"
    for _ in range(6):  # more than the worker's 5 slots: each is free again after its dropped body
        status, _, body = exchange(handoff, "GET", f"/download?accel=/private/report.pdf&pad={4 << 20}")
        assert (status, body) == (200, PATTERN), "the worker's own body is dropped"
    wait_until(lambda: handoff.stats()["slots"]["busy"] == 0, message="no slot busy")
    stats = handoff.stats()
    assert stats["static_files"]["handed_off"] == 15 and stats["static_files"]["handoffs_refused"] == 0


def test_hand_offs_outside_their_roots_are_502_and_logged(handoff, site):
    secret = site / "secret.txt"
    refused = [
        "accel=/elsewhere/report.pdf",
        "accel=/private/../secret.txt",
        "accel=/private/%2e%2e/secret.txt",
        "accel=/private/leak.txt",
        f"sendfile={secret}",
        f"sendfile={site / 'private' / '..' / 'secret.txt'}",
        f"sendfile={site / 'private' / 'leak.txt'}",
        "sendfile=private/report.pdf",
        "sendfile=/etc/passwd",
    ]
    for named in refused:
        status, _, body = exchange(handoff, "GET", f"/download?{named.replace(';', '%3B')}")
        assert status == 502 and b"secret" not in body and b"root" not in body, named
    assert exchange(handoff, "GET", "/download?accel=/private/nope.pdf")[0] == 404
    assert exchange(handoff, "GET", f"/download?sendfile={site / 'private' / 'nope.pdf'}")[0] == 404
    assert handoff.stats()["static_files"]["handoffs_refused"] == len(refused)
    log = handoff.log()
    assert b"X-Accel-Redirect /elsewhere/report.pdf: not under any --accel-mapping prefix" in log
    assert f"X-Sendfile {secret}: ".encode() in log


def test_the_app_is_told_how_to_hand_off_and_the_client_cannot_say_otherwise(handoff, site):
    spoofed = {"X-Sendfile-Type": "X-Sendfile", "X-Accel-Mapping": "/=/anything/"}
    _, _, body = exchange(handoff, "GET", "/told", spoofed)
    private = (site / "private").resolve()
    assert body.decode().splitlines() == ["X-Sendfile-Type: X-Accel-Redirect", f"X-Accel-Mapping: {private}/=/private/"]


def test_without_the_flags_the_fields_go_to_the_client(serve, site):
    server = serve("-w", "1", "handoff:app")
    status, headers, body = exchange(server, "GET", "/download?accel=/private/report.pdf")
    assert (status, headers["x-accel-redirect"], body) == (200, "/private/report.pdf", b"")
    _, _, body = exchange(server, "GET", "/told", {"X-Sendfile-Type": "X-Sendfile"})
    assert body.decode().splitlines()[0] == "X-Sendfile-Type: X-Sendfile", "left as the client sent it"


def test_static_responses_are_logged_and_counted_apart(serve, site, tmp_path):
    log = tmp_path / "access.log"
    server = mounted(serve, site, "--access-log", str(log))
    exchange(server, "GET", "/static/app.css")
    exchange(server, "GET", "/static/nope.css")
    exchange(server, "GET", "/static/..%2fsecret.txt")

    def three_lines():
        found = log.read_text().splitlines() if log.exists() else []
        return found if len(found) == 3 else None

    lines = wait_until(three_lines, message="three log lines")
    assert '"GET /static/app.css HTTP/1.1" 200 ' in lines[0] and lines[0].endswith(' queue=- service=- lane="static"')
    assert 'lane="static"' not in lines[1], "the app's"
    assert '" 404 10 ' in lines[2] and lines[2].endswith('lane="static"')
    metrics = server.metrics()
    assert 'headway_static_responses_total{code="200"} 1' in metrics
    assert 'headway_static_responses_total{code="404"} 1' in metrics
    assert f"headway_static_bytes_total {len(CSS) + 10}" in metrics
    text = server.stats_command()
    assert "static       200: 1  404: 1 (0.0 MiB sent); 0 handed off by workers, 0 refused (502)" in text


def test_mounts_come_from_the_environment_and_the_config_file(serve, site, tmp_path):
    config = tmp_path / "headway.toml"
    config.write_text(f'static = ["/files={site / "public"}"]\nstatic-max-age = 30\n')
    from_file = serve("-w", "1", "-c", str(config), "handoff:app")
    status, headers, body = exchange(from_file, "GET", "/files/app.css")
    assert (status, headers["cache-control"], body) == (200, "public, max-age=30", CSS)
    from_env = serve("-w", "1", "handoff:app", env={"HEADWAY_STATIC": f"/a={site / 'public'},/b={site / 'private'}"})
    assert exchange(from_env, "GET", "/a/app.css")[2] == CSS
    assert exchange(from_env, "GET", "/b/report.pdf")[2] == PATTERN
