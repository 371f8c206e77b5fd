"""HTTP/2 end to end: h2 by ALPN over TLS and h2c with prior knowledge, each stream a request of
the one queue; the bad requests of test_http.py in their HTTP/2 form; the limits a hostile
client cannot get past; and h2spec, the conformance suite, against both listeners.

The client is the `h2` package (pure Python, sans-IO) over a plain socket, with its own checks
off so that it can send what a broken or hostile client sends."""

import json
import socket
import ssl
import subprocess
import sys
import time
from pathlib import Path

import h2.config
import h2.connection
import h2.events
import h2.exceptions
import h2.settings
import hpack
import pytest

from conftest import SPACED_HEADER_WORKERS, require, wait_until

ENHANCE_YOUR_CALM = 11
PROTOCOL_ERROR = 1


class Client:
    """One HTTP/2 connection, driven by hand: requests are sent as given, answers collected."""

    def __init__(self, sock, settings=None):
        self.sock = sock
        config = h2.config.H2Configuration(client_side=True, header_encoding="utf-8",
                                           validate_outbound_headers=False, normalize_outbound_headers=False,
                                           validate_inbound_headers=False)
        self.conn = h2.connection.H2Connection(config=config)
        self.conn.initiate_connection()
        if settings:
            self.conn.update_settings(settings)
        self.streams = {}
        self.goaway = None
        self.goaways = 0
        self.closed = False
        self.flush()

    def flush(self):
        data = self.conn.data_to_send()
        if data:
            self.sock.sendall(data)

    def send(self, headers, body=b"", end=True):
        """Opens a stream with `headers` (pseudo-headers included) and returns its id."""
        stream_id = self.conn.get_next_available_stream_id()
        self.streams[stream_id] = {"status": None, "headers": [], "body": b"", "ended": False, "reset": None}
        self.conn.send_headers(stream_id, headers, end_stream=end and not body)
        if body:
            self.conn.send_data(stream_id, body, end_stream=end)
        self.flush()
        return stream_id

    def get(self, path, extra=(), method="GET", body=b""):
        return self.send([(":method", method), (":scheme", "http"), (":authority", "a"), (":path", path), *extra],
                         body=body)

    def reset(self, stream_id, code=8):
        self.conn.reset_stream(stream_id, error_code=code)
        self.flush()

    def pump(self, until, timeout=30):
        """Reads and handles frames until `until()` holds or the connection closes."""
        self.sock.settimeout(timeout)
        while not until() and not self.closed:
            try:
                data = self.sock.recv(65536)
            except ConnectionResetError:
                data = b""
            if not data:
                self.closed = True
                break
            for event in self.conn.receive_data(data):
                self.handle(event)
            try:
                self.flush()
            except (BrokenPipeError, ConnectionResetError):
                pass  # the peer has closed (after a GOAWAY, say): what it sent is still to read
        return until()

    def handle(self, event):
        stream = self.streams.get(getattr(event, "stream_id", None))
        if isinstance(event, h2.events.ResponseReceived):
            stream["headers"] = event.headers
            stream["status"] = int(dict(event.headers)[":status"])
        elif isinstance(event, h2.events.DataReceived):
            stream["body"] += event.data
            self.conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
        elif isinstance(event, h2.events.StreamEnded):
            stream["ended"] = True
        elif isinstance(event, h2.events.StreamReset):
            stream["reset"] = event.error_code
        elif isinstance(event, h2.events.ConnectionTerminated):
            self.goaway = event.error_code
            self.goaways += 1

    def answer(self, stream_id, timeout=30):
        """The stream's response once it ended or was reset."""
        stream = self.streams[stream_id]
        assert self.pump(lambda: stream["ended"] or stream["reset"] is not None, timeout), stream
        return stream


def h2c(server, settings=None):
    sock = server.connect()
    return Client(sock, settings)


def tls_socket(server, ca, alpn=("h2", "http/1.1")):
    context = ssl.create_default_context()
    ca.configure_trust(context)
    context.set_alpn_protocols(list(alpn))
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=30)
    return context.wrap_socket(sock, server_hostname="localhost")


def test_h2c_and_h2_over_tls_serve_the_app_which_hears_http2(serve, ca, tls_files):
    plain = serve("-w", "1", "-t", "2", "probe:app")
    client = h2c(plain)
    answer = client.answer(client.get("/echo?x=1", body=b"hello", method="POST"))
    assert answer["status"] == 200
    echo = json.loads(answer["body"])
    assert (echo["protocol"], echo["body"], echo["content_length"], echo["query"]) == ("HTTP/2", "hello", "5", "x=1")
    assert echo["headers"]["HTTP_HOST"] == "a"
    assert "HTTP_X_REQUEST_START" in echo["headers"]
    # HTTP/1.1 goes on beside it on the same port.
    status, _, body = plain.get("/echo")
    assert status == 200 and json.loads(body)["protocol"] == "HTTP/1.1"

    secure = serve("-w", "1", "-t", "2", *tls_files, "probe:app")
    sock = tls_socket(secure, ca)
    assert sock.selected_alpn_protocol() == "h2"
    client = Client(sock)
    answer = client.answer(client.get("/echo"))
    echo = json.loads(answer["body"])
    assert (echo["protocol"], echo["url_scheme"]) == ("HTTP/2", "https")
    assert tls_socket(secure, ca, alpn=("http/1.1",)).selected_alpn_protocol() == "http/1.1"
    stats = secure.stats()["connections"]
    assert stats["http2"] == 1 and stats["http2_streams"] == 1


def test_an_asgi_app_hears_http_version_2(serve):
    server = serve("-w", "1", "-t", "2", "--interface", "asgi", "asgi_probe:app")
    client = h2c(server)
    answer = client.answer(client.get("/http-version"))
    assert (answer["status"], answer["body"]) == (200, b"2")


@pytest.mark.parametrize("worker", SPACED_HEADER_WORKERS.values(), ids=SPACED_HEADER_WORKERS.keys())
def test_header_values_go_out_without_the_blanks_around_them_which_http2_forbids(serve, worker):
    """RFC 9113 section 8.2.1: a value with leading or trailing blanks is malformed, and strict
    clients (nghttp, h2load) reset the stream."""
    server = serve("-w", "1", "-t", "1", *worker)
    client = h2c(server)
    answer = client.answer(client.get("/spaced"))
    assert answer["status"] == 200 and answer["reset"] is None
    headers = dict(answer["headers"])
    assert (headers["set-cookie"], headers["x-spaced"]) == ("a=b", "1 2")


def test_no_http2_offers_only_http1(serve, ca, tls_files):
    secure = serve("-w", "1", "--no-http2", *tls_files, "probe:app")
    assert tls_socket(secure, ca).selected_alpn_protocol() == "http/1.1"
    plain = serve("-w", "1", "--no-http2", "probe:app")
    with plain.connect() as sock:
        sock.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
        assert sock.recv(100).startswith(b"HTTP/1.1 505 ")


BASE = [(":method", "GET"), (":scheme", "http"), (":authority", "a"), (":path", "/echo")]


def replaced(name, value):
    return [(n, value if n == name else v) for n, v in BASE]


BAD_STREAMS = [
    # h2 refuses the malformed ones with RST_STREAM PROTOCOL_ERROR (RFC 9113 section 8.1.1).
    pytest.param([h for h in BASE if h[0] != ":path"], b"", None, id="no-path"),
    pytest.param([h for h in BASE if h[0] != ":method"], b"", None, id="no-method"),
    pytest.param(BASE + [(":path", "/again")], b"", None, id="repeated-pseudo"),
    pytest.param([("accept", "*/*")] + BASE, b"", None, id="pseudo-after-field"),
    pytest.param(BASE + [(":protocol", "x")], b"", None, id="unknown-pseudo"),
    pytest.param(BASE + [("connection", "keep-alive")], b"", None, id="connection-field"),
    pytest.param(BASE + [("keep-alive", "timeout=5")], b"", None, id="keep-alive-field"),
    pytest.param(BASE + [("transfer-encoding", "chunked")], b"", None, id="transfer-encoding"),
    pytest.param(BASE + [("upgrade", "websocket")], b"", None, id="upgrade-field"),
    pytest.param(BASE + [("te", "gzip")], b"", None, id="te-not-trailers"),
    # A name HPACK cannot make a field of: h2 ends the connection (GOAWAY PROTOCOL_ERROR).
    pytest.param(BASE + [("Accept", "*/*")], b"", "goaway", id="upper-case-name"),
    pytest.param(replaced(":method", "POST") + [("content-length", "10")], b"abc", None, id="length-over-data"),
    pytest.param(replaced(":method", "POST") + [("content-length", "2")], b"abc", None, id="data-over-length"),
    pytest.param(replaced(":method", "POST") + [("content-length", "1"), ("content-length", "2")], b"ab", None,
                 id="two-lengths"),
    # The front's own, as HTTP/1.1 gets them.
    pytest.param(BASE + [("host", "b")], b"", 400, id="host-not-authority"),
    pytest.param(replaced(":authority", "u@evil"), b"", 400, id="authority-userinfo"),
    pytest.param([h for h in BASE if h[0] != ":authority"] + [("host", "u@evil")], b"", 400, id="host-userinfo"),
    pytest.param(replaced(":path", "*"), b"", 400, id="star-not-options"),
    pytest.param([(":method", "CONNECT"), (":authority", "a:443")], b"", 501, id="connect"),
    pytest.param(replaced(":method", "POST") + [("content-length", "2000")], b"x" * 2000, 413, id="declared-too-large"),
    pytest.param(replaced(":method", "POST"), b"x" * 2000, 413, id="sent-too-large"),
    pytest.param(BASE + [("x-big", "x" * 3000)], b"", 431, id="header-list-too-large"),
]


@pytest.mark.parametrize(("headers", "body", "status"), BAD_STREAMS)
def test_bad_requests_get_the_right_error_and_the_connection_goes_on(serve, headers, body, status):
    server = serve("-w", "1", "--max-body", "1000", "--max-header-size", "2KiB", "probe:app")
    client = h2c(server)
    stream_id = client.send(headers, body=body)
    if status == "goaway":
        client.pump(lambda: client.goaway is not None)
        assert client.goaway == PROTOCOL_ERROR
        client = h2c(server)  # and other connections go on
    else:
        answer = client.answer(stream_id)
        if status is None:
            assert answer["reset"] == PROTOCOL_ERROR, answer
        else:
            assert answer["status"] == status, answer
    # Nothing else is lost: the next stream of the same connection is served.
    good = client.answer(client.get("/echo"))
    assert good["status"] == 200
    assert client.goaway is None


def test_a_stream_reset_while_queued_never_reaches_the_app(serve):
    server = serve("-w", "1", "-t", "1", "probe:app")
    client = h2c(server)
    first = client.get("/record?id=first&ms=1000")
    wait_until(lambda: server.stats()["slots"]["busy"] == 1)
    second = client.get("/record?id=second")
    wait_until(lambda: server.stats()["queue"]["depth"] == 1)
    client.reset(second)
    wait_until(lambda: server.stats()["queue"]["depth"] == 0)
    assert client.answer(first)["body"] == b"first"
    log = client.answer(client.get("/log"))
    assert json.loads(log["body"]) == ["first"]
    assert server.stats()["abandoned"]["queued"] == 1


def test_a_slow_reading_stream_frees_its_slot(serve):
    size = 4_000_000
    server = serve("-w", "1", "-t", "1", "--response-buffer", "64KiB", "probe:app")
    # A client that opens a window of one byte and reads nothing more for now.
    slow = h2c(server, {h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 1})
    big = slow.send([(":method", "GET"), (":scheme", "http"), (":authority", "a"), (":path", f"/bytes?n={size}")])
    wait_until(lambda: server.stats()["queue"]["dispatched"] >= 1)
    # The one slot serves another client meanwhile: the big response waits in its spool.
    other = h2c(server)
    assert other.answer(other.get("/record?id=other"), timeout=20)["body"] == b"other"
    # And the slow reader gets every byte once it reads.
    slow.conn.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 1 << 20})
    slow.conn.increment_flow_control_window(1 << 24)
    slow.flush()
    answer = slow.answer(big, timeout=60)
    assert (answer["status"], len(answer["body"])) == (200, size)


def test_a_rapid_reset_flood_is_told_to_calm_down_and_barely_reaches_the_app(serve):
    limit = 10
    server = serve("-w", "1", "-t", "2", "--http2-max-concurrent-streams", str(limit), "probe:app")
    client = h2c(server)
    headers = [(":method", "GET"), (":scheme", "http"), (":authority", "a"), (":path", "/record?id=flood")]
    for _ in range(1000):
        stream_id = client.conn.get_next_available_stream_id()
        client.conn.send_headers(stream_id, headers, end_stream=True)
        client.conn.reset_stream(stream_id, error_code=8)
    try:
        client.flush()
    except OSError:
        pass  # the front may have closed before taking it all
    client.pump(lambda: client.goaway is not None)
    assert client.goaway == ENHANCE_YOUR_CALM
    stats = server.stats()
    assert stats["queue"]["dispatched"] <= limit
    assert stats["connections"]["http2_calmed"] == 1
    # Everyone else is served as before.
    fresh = h2c(server)
    assert fresh.answer(fresh.get("/record?id=after"))["status"] == 200


HEADERS, PING = 0x1, 0x6
END_STREAM = ACK = 0x1


def frame(kind, flags, stream_id, payload):
    return len(payload).to_bytes(3, "big") + bytes([kind, flags]) + stream_id.to_bytes(4, "big") + payload


def read_until_closed(client, deadline, answer_ping=False):
    """Reads what the server sends until it closes the connection: whether it did before
    `deadline` (a `time.monotonic()`). Nothing is answered (no SETTINGS acknowledged), except a
    PING if `answer_ping`. Frames are handled one at a time, PINGs by hand: the `h2` package
    refuses a PING after a GOAWAY."""
    unread = b""
    while (left := deadline - time.monotonic()) > 0:
        client.sock.settimeout(left)
        try:
            data = client.sock.recv(65536)
        except TimeoutError:
            return False
        except ConnectionResetError:
            return True
        if not data:
            return True
        unread += data
        while len(unread) >= 9 + int.from_bytes(unread[:3], "big"):
            size = 9 + int.from_bytes(unread[:3], "big")
            raw, unread = unread[:size], unread[size:]
            if raw[3] != PING:
                for event in client.conn.receive_data(raw):
                    client.handle(event)
            elif answer_ping and raw[4] == 0:
                client.sock.sendall(frame(PING, ACK, 0, raw[9:]))
    return False


def unfinished_header_block(client):
    """A HEADERS frame without END_HEADERS, whose CONTINUATION never comes."""
    block = hpack.Encoder().encode(BASE)
    client.sock.sendall(frame(HEADERS, END_STREAM, client.conn.get_next_available_stream_id(), block))


@pytest.mark.parametrize("case", ["idle", "unfinished-header-block", "after-408"])
def test_a_client_that_never_answers_the_goaway_ping_is_closed_all_the_same(serve, case):
    """At the header or keep-alive timeout the front sends a graceful GOAWAY and `h2` a PING
    whose answer it waits for before the last GOAWAY and the close; a client that never answers
    is dropped the header timeout later."""
    server = serve("-w", "1", "--header-timeout", "1", "--keep-alive-timeout", "2", "--io-timeout", "1", "probe:app")
    silent, answering = [h2c(server) for _ in range(20)], h2c(server)
    for client in [*silent, answering]:
        if case == "unfinished-header-block":
            unfinished_header_block(client)
        elif case == "after-408":
            client.send(replaced(":method", "POST") + [("content-length", "10")], end=False)
    # GOAWAY at 1 s (3 s after a 408: the I/O timeout, then the keep-alive timeout), closed 1 s later.
    deadline = time.monotonic() + 10
    assert read_until_closed(answering, deadline, answer_ping=True)
    # The PING answered, `h2` sends its last GOAWAY (PROTOCOL_ERROR in a header block) and closes.
    assert answering.goaways == 2
    still_open = sum(not read_until_closed(client, deadline) for client in silent)
    assert still_open == 0, f"{still_open} of {len(silent)} silent connections still open"
    for client in silent:
        assert (client.goaways, client.goaway) == (1, 0), "a graceful GOAWAY, and no other"
        if case == "after-408":
            assert client.streams[1]["status"] == 408, client.streams
    wait_until(lambda: server.stats()["connections"]["open"] == 0, timeout=5, message="no connection open")


def h2spec_binary():
    """scripts/setup --test builds it into the virtualenv, beside its Python."""
    found = str(Path(sys.executable).parent / "h2spec")
    require(found, "scripts/setup --test builds it")
    return found


# Every section over both listeners: on a plain port that also serves HTTP/1.1, bytes that are
# neither the preface nor an HTTP/1.x request ("INVALID CONNECTION PREFACE") are closed on
# without an answer, as h2spec's 3.5/2 wants.
SECTIONS = ["generic", "http2", "hpack"]


@pytest.mark.parametrize("tls", [True, False], ids=["tls", "h2c"])
def test_h2spec_passes_every_case(serve, tls_files, tls, tmp_path):
    h2spec = h2spec_binary()
    server = serve("-w", "1", "-t", "4", *(tls_files if tls else []), "probe:app")
    report = tmp_path / "h2spec.xml"
    command = [h2spec, *SECTIONS, "-h", "127.0.0.1", "-p", str(server.port),
               "-o", "10", "-j", str(report), *(["-t", "-k"] if tls else [])]
    run = subprocess.run(command, capture_output=True, text=True, timeout=600)
    summary = run.stdout.strip().splitlines()[-1] if run.stdout.strip() else run.stderr
    assert run.returncode == 0, run.stdout[-5000:]
    assert " 0 failed" in summary and " 0 skipped" in summary, summary
