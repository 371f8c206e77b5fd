"""WebSockets through the front: the handshake waits in the queue like any request, the worker
answers it on a connection of its own, and the open socket holds no slot. Workers: an ASGI echo
app (tests/apps/ws_echo.py) on uvicorn and on the bundled worker's ASGI side, Node with the `ws`
package (tests/apps/node) and Puma with a Rack hijacking app (tests/apps/ws_echo.ru) as --cmd
workers; the bundled WSGI worker for what it does with a handshake."""

import asyncio
import base64
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import time

import pytest
import websockets.asyncio.client
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect

from conftest import APPS, headway_binary, parallel_gets, read_response, require, send_request, wait_until

UVICORN = f"{sys.executable} -m uvicorn --uds {{socket}} --lifespan off --log-level warning ws_echo:app"
# The same echo app on uvicorn as a --cmd worker, and on the bundled worker, which finds it is
# ASGI (--interface auto) and tells the front it takes handshakes.
ECHO_WORKERS = {"uvicorn": ("--cmd", UVICORN), "bundled-asgi": ("ws_echo:app",)}
NODE_APP = APPS / "node" / "ws_echo.js"


def url(server, path="/echo"):
    return f"ws://127.0.0.1:{server.port}{path}"


def open_websockets(server):
    return server.stats()["websockets"]["open"]


def disconnects(server):
    """The close codes the echo app has seen (one worker: every request sees the same process)."""
    return json.loads(server.get("/disconnects")[2])


@pytest.fixture(params=ECHO_WORKERS)
def echo_worker(request):
    return ECHO_WORKERS[request.param]


def test_echo_holds_no_slot(serve, echo_worker):
    server = serve("-w", "1", "-t", "2", *echo_worker)
    with connect(url(server)) as ws:
        ws.send("hello")
        assert ws.recv(timeout=30) == "hello"
        ws.send(b"\0\1" * 50_000)
        assert ws.recv(timeout=30) == b"\0\1" * 50_000
        stats = server.stats()
        assert stats["websockets"]["open"] == 1
        assert stats["workers"][0]["websockets"] == 1
        assert stats["slots"]["busy"] == 0
        assert stats["connections"]["open"] == 0, "a WebSocket is counted apart from HTTP connections"
    wait_until(lambda: open_websockets(server) == 0, message="the socket to close")
    stats = server.stats()
    assert stats["websockets"]["opened"] == 1
    assert stats["responses"]["101"] == 1
    assert disconnects(server) == [1000]


def test_echo_through_node_and_the_ws_package(serve):
    require("node", "apt-get install nodejs")
    require(str(APPS / "node" / "node_modules" / "ws"), "npm ci --prefix tests/apps/node")
    server = serve("-w", "2", "-t", "2", "--cmd", f"node {NODE_APP}")
    with connect(url(server)) as first, connect(url(server)) as second:
        for ws, message in ((first, "one"), (second, b"two")):
            ws.send(message)
            assert ws.recv(timeout=30) == message
        # Each socket went to the least busy worker at its handshake.
        assert open_websockets(server) == 2
        assert server.get("/hello")[2] == b"hello"
    wait_until(lambda: open_websockets(server) == 0, message="the sockets to close")


def test_echo_through_puma_with_a_rack_hijacking_app(serve):
    require("puma", "apt-get install puma ruby-rack")
    server = serve("-w", "1", "-t", "2", "--cmd", f"puma -t 2:2 -b unix://{{socket}} {APPS / 'ws_echo.ru'}")
    with connect(url(server), compression=None) as ws:
        for message in ("hello", b"\0" * 70_000):
            ws.send(message)
            assert ws.recv(timeout=30) == message
        assert open_websockets(server) == 1
        assert server.get("/hello")[2] == b"hello"
    wait_until(lambda: open_websockets(server) == 0, message="the socket to close")


def test_a_thousand_open_sockets_leave_http_requests_served(serve, echo_worker):
    """1000 sockets on 1 worker x 2 slots: the slots stay free for requests. The latency bound
    is a sanity check, not a speed claim."""
    server = serve("-w", "1", "-t", "2", *echo_worker)

    async def main():
        # Handshakes take a slot while they last: a few at a time, as many as the slots can start
        # at once, so that opening them is not itself an overload (50 at a time into 2 slots is
        # a standing queue, and controlled delay rightly refuses some).
        opening = asyncio.Semaphore(4)

        async def open_one():
            async with opening:
                return await websockets.asyncio.client.connect(url(server), ping_interval=None, open_timeout=60)

        sockets = await asyncio.gather(*(open_one() for _ in range(1000)))
        try:
            await echo_on_all(sockets, "before")
            stats = await asyncio.to_thread(server.stats)
            assert stats["websockets"]["open"] == 1000
            assert stats["slots"]["busy"] == 0
            started = time.monotonic()
            results = await asyncio.to_thread(parallel_gets, server, ["/hello"] * 20)
            assert [status for status, _, _ in results] == [200] * 20
            assert time.monotonic() - started < 30
            await echo_on_all(sockets, "after")
        finally:
            await asyncio.gather(*(ws.close() for ws in sockets))

    asyncio.run(main())
    wait_until(lambda: open_websockets(server) == 0, message="every socket to close")
    assert server.stats()["websockets"]["opened"] == 1000


async def echo_on_all(sockets, text):
    async def echo(ws):
        await ws.send(text)
        return await asyncio.wait_for(ws.recv(), timeout=60)

    assert await asyncio.gather(*(echo(ws) for ws in sockets)) == [text] * len(sockets)


def test_handshakes_beyond_max_websockets_get_503(serve, echo_worker):
    server = serve("-w", "1", "-t", "2", "--max-websockets", "2", *echo_worker)
    with connect(url(server)), connect(url(server)):
        with pytest.raises(InvalidStatus) as refused:
            connect(url(server), open_timeout=30)
        assert refused.value.response.status_code == 503
        stats = server.stats()
        assert stats["websockets"]["refused"] == 1
        assert stats["responses"]["503"] == 1
    wait_until(lambda: open_websockets(server) == 0, message="the sockets to close")
    with connect(url(server)) as ws:  # their places are free again
        ws.send("again")
        assert ws.recv(timeout=30) == "again"


def test_a_client_that_vanishes_frees_its_socket_and_the_app_sees_it_go(serve, echo_worker):
    server = serve("-w", "1", "-t", "2", *echo_worker)
    sock = open_by_hand(server)
    sock.sendall(masked_frame(0x1, b"hi"))
    assert sock.recv(4) == b"\x81\x02hi"
    # Gone without a close frame, with a reset.
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()
    wait_until(lambda: open_websockets(server) == 0, message="the socket to be freed")
    # No close frame came, so the app sees no code from the client (uvicorn says 1005 or 1006).
    wait_until(lambda: len(disconnects(server)) == 1, message="the app to see the client go")
    assert server.stats()["workers"][0]["websockets"] == 0
    # The socket held no slot; the one /disconnects took is given back once its exchange ends.
    wait_until(lambda: server.stats()["slots"]["busy"] == 0, message="every slot to be free")


def test_a_quiet_client_that_answers_pings_outlives_the_idle_timeout(serve, echo_worker):
    """The client library answers the front's pings, so a socket that says nothing for twice the
    idle timeout is still open, and the app still hears it."""
    server = serve("-w", "1", "-t", "2", "--websocket-idle-timeout", "2", "--websocket-ping-interval", "0.5",
                   *echo_worker)
    with connect(url(server)) as ws:
        time.sleep(4)
        ws.send("still here")
        assert ws.recv(timeout=30) == "still here"
    assert disconnects(server) == [1000]


def test_a_client_that_answers_no_ping_is_closed_at_the_idle_timeout(serve, echo_worker):
    server = serve("-w", "1", "-t", "2", "--websocket-idle-timeout", "2", "--websocket-ping-interval", "0.5",
                   *echo_worker)
    sock = open_by_hand(server)
    received = b""
    while chunk := sock.recv(64):  # until the front closes the connection
        received += chunk
    sock.close()
    # Empty pings, unmasked, each after a quiet interval, then the close frame: 1001.
    close = b"\x88\x0e\x03\xe9idle timeout"
    pings = received.removesuffix(close)
    assert received.endswith(close) and pings == b"\x89\x00" * (len(pings) // 2) and len(pings) >= 4, received
    wait_until(lambda: open_websockets(server) == 0, message="the socket to be freed")


def test_a_message_over_the_limit_closes_the_socket_with_1009(serve, echo_worker):
    server = serve("-w", "1", "-t", "2", "--max-websocket-message", "1KiB", *echo_worker)
    # Without compression: the front sees the sizes on the wire (the app, after inflating).
    with connect(url(server), compression=None) as ws:
        ws.send(b"x" * 1024)
        assert ws.recv(timeout=30) == b"x" * 1024
        ws.send(b"x" * 1025)
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv(timeout=30)
        assert closed.value.rcvd.code == 1009
    # The app never got the message; it was told the client went away.
    wait_until(lambda: disconnects(server) == [1001], message="the app to see the socket close")


@pytest.mark.parametrize("error, code, app_hears", [
    ("invalid-utf8", 1007, 1007),  # a text message that is not UTF-8: the codec's to judge
    ("orphan-continuation", 1002, 1001),  # a continuation with no message to continue
    ("reserved-bit", 1002, 1001),  # a reserved bit set, with no extension agreed that gives it a meaning
])
def test_the_bundled_worker_answers_a_protocol_error_with_a_close_frame(serve, error, code, app_hears):
    """What breaks the protocol in a frame's header the front refuses, as for any worker (the app
    is told the client went away); what breaks it in a payload the front does not read, and the
    bundled worker's codec refuses. Either way the client gets a close frame with the code RFC
    6455 gives the error, then the end of the connection, not a bare close."""
    frame = {
        "invalid-utf8": masked_frame(0x1, b"caf\xc3"),
        "orphan-continuation": masked_frame(0x0, b"more"),
        "reserved-bit": bytes([0xC2]) + masked_frame(0x2, b"x")[1:],
    }[error]
    server = serve("-w", "1", "-t", "2", "ws_echo:app")
    sock = open_by_hand(server)
    sock.sendall(frame)
    received = b""
    while chunk := sock.recv(64):  # until the connection ends
        received += chunk
    sock.close()
    assert received[:1] == b"\x88" and struct.unpack("!H", received[2:4])[0] == code, received
    wait_until(lambda: disconnects(server) == [app_hears], message="the app to hear the close")


def test_a_fragmented_message_over_the_limit_reaches_the_app_in_no_part(serve):
    """A message over the limit sent in fragments, each well under it: the front refuses the
    fragment that crosses the limit (1009), and the app is told the socket closed without any
    part of the message."""
    server = serve("-w", "1", "-t", "2", "--max-websocket-message", "64KiB", "ws_echo:app")
    sock = open_by_hand(server)
    fragments = [masked_frame(0x2 if n == 0 else 0x0, b"x" * 8000, fin=False) for n in range(9)]
    sock.sendall(b"".join(fragments) + masked_frame(0x0, b"x", fin=True))
    received = b""
    while chunk := sock.recv(64):
        received += chunk
    sock.close()
    assert received[:1] == b"\x88" and struct.unpack("!H", received[2:4])[0] == 1009, received
    wait_until(lambda: disconnects(server) == [1001], message="the app to see the socket close")


def test_unfinished_messages_of_every_socket_share_the_held_budget(serve):
    """A fragmented message waits in the front until its last frame; every socket's together stay
    within --max-websocket-held. The socket whose message would take more than is left is closed
    with 1013 (try again later), the app seeing none of that message; the one holding the room
    finishes its message, which the app echoes whole, and gives the room back."""
    server = serve("-w", "1", "-t", "2", "--max-websocket-message", "64KiB", "--max-websocket-held", "64KiB",
                   "ws_echo:app")
    piece = b"x" * 8000
    holder = open_by_hand(server)
    holder.sendall(b"".join(masked_frame(0x2 if n == 0 else 0x0, piece, fin=False) for n in range(5)))
    wait_until(lambda: server.stats()["websockets"]["held_bytes"] >= 5 * len(piece),
               message="the first socket's fragments to be held")
    late = open_by_hand(server)
    late.sendall(b"".join(masked_frame(0x2 if n == 0 else 0x0, piece, fin=False) for n in range(4)))
    assert close_code_and_end(late) == 1013
    assert server.stats()["websockets"]["held_refused"] == 1
    wait_until(lambda: disconnects(server) == [1001], message="the app to hear the late socket close")

    holder.sendall(masked_frame(0x0, b"end", fin=True))
    echoed = b""
    message = piece * 5 + b"end"
    while len(echoed) < 4 + len(message):  # the echo: one frame, a 16-bit length
        chunk = holder.recv(65536)
        assert chunk, echoed
        echoed += chunk
    assert echoed == bytes([0x82, 126]) + struct.pack("!H", len(message)) + message, echoed[:16]
    assert server.stats()["websockets"]["held_bytes"] == 0
    holder.close()


def test_a_held_budget_below_the_largest_message_is_refused_at_start():
    result = subprocess.run([headway_binary(), "serve", "--max-websocket-message", "1MiB", "--max-websocket-held",
                             "512KiB"], capture_output=True, text=True, timeout=30)
    assert result.returncode != 0
    assert "--max-websocket-held must be at least --max-websocket-message" in result.stderr, result.stderr


RECORDER = f"{sys.executable} {APPS / 'ws_recorder.py'} {{socket}}"
GOING_AWAY = [0x8, True, 0, 2 + len("the client broke the WebSocket rules"), 1001]


def recorded(server, sockets=1):
    """What reached the recorder (tests/apps/ws_recorder.py), once its `sockets` have ended."""
    wait_until(lambda: len(json.loads(server.get("/frames")[2])) == sockets, message="the sockets to end")
    return json.loads(server.get("/frames")[2])


def close_code_and_end(sock):
    """The close code the front sends, once it has ended the connection."""
    sock.settimeout(10)
    received = b""
    while chunk := sock.recv(64):
        received += chunk
    sock.close()
    assert received[:1] == b"\x88", received
    return struct.unpack("!H", received[2:4])[0]


@pytest.mark.parametrize("refused", ["opcode-3", "opcode-b", "rsv1", "rsv2", "orphan-continuation",
                                     "message-in-message"])
def test_a_cmd_worker_never_sees_a_frame_no_client_may_send(serve, refused):
    """The rules the bundled worker's codec holds a client to, the front holds it to for every
    worker: the client gets 1002 and the --cmd worker sees the whole message before it, then the
    front's close, and nothing of the refused frame."""
    frame = {
        "opcode-3": masked_frame(0x3, b"x"),  # a reserved opcode
        "opcode-b": masked_frame(0xB, b""),  # a reserved control opcode
        "rsv1": bytes([0xC2]) + masked_frame(0x2, b"x")[1:],  # with no permessage-deflate agreed
        "rsv2": bytes([0xA2]) + masked_frame(0x2, b"x")[1:],
        "orphan-continuation": masked_frame(0x0, b"more"),  # with no message started
        "message-in-message": masked_frame(0x1, b"a", fin=False) + masked_frame(0x1, b"b"),
    }[refused]
    server = serve("-w", "1", "-t", "2", "--cmd", RECORDER)
    sock = open_by_hand(server)
    sock.sendall(masked_frame(0x1, b"fine") + frame)
    assert close_code_and_end(sock) == 1002
    assert recorded(server) == [[[0x1, True, 0, 4], GOING_AWAY]]


def test_a_fragmented_message_over_the_limit_reaches_a_cmd_worker_in_no_part(serve):
    """Fragments are held until the message is known to fit: one that fits reaches the worker
    whole, one over the limit in no part (64 000 bytes of it came before the fragment that
    crossed 64 KiB)."""
    server = serve("-w", "1", "-t", "2", "--max-websocket-message", "64KiB", "--cmd", RECORDER)
    sock = open_by_hand(server)
    fitting = [masked_frame(0x1, b"a", fin=False), masked_frame(0x9, b"ping"), masked_frame(0x0, b"b")]
    fragments = [masked_frame(0x2 if n == 0 else 0x0, b"x" * 8000, fin=False) for n in range(9)]
    sock.sendall(b"".join(fitting) + b"".join(fragments) + masked_frame(0x0, b"x", fin=True))
    assert close_code_and_end(sock) == 1009
    assert recorded(server) == [[[0x1, False, 0, 1], [0x9, True, 0, 4], [0x0, True, 0, 1], GOING_AWAY]]


def test_shutdown_drains_requests_then_closes_sockets_with_1001(serve, echo_worker):
    server = serve("-w", "1", "-t", "2", *echo_worker)
    with connect(url(server)) as ws:
        sleeper = server.connect()
        send_request(sleeper, "GET", "/sleep", close=True)
        wait_until(lambda: server.stats()["slots"]["busy"] == 1, message="the request to run")
        server.signal(signal.SIGTERM)
        # While the request drains, the socket still works.
        ws.send("during the drain")
        assert ws.recv(timeout=30) == "during the drain"
        assert read_response(sleeper.makefile("rb"))[2] == b"slept"
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv(timeout=30)
        assert closed.value.rcvd.code == 1001
    assert server.wait(timeout=60) == 0


def test_reload_closes_the_old_workers_sockets_with_1001(serve, echo_worker):
    server = serve("-w", "1", "-t", "2", *echo_worker)
    pid = server.stats()["workers"][0]["pid"]
    with connect(url(server)) as ws:
        server.signal(signal.SIGHUP)
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv(timeout=60)
        assert closed.value.rcvd.code == 1001
    wait_until(lambda: server.stats()["workers"][0]["pid"] not in (0, pid), message="the new worker")
    with connect(url(server)) as ws:
        ws.send("new worker")
        assert ws.recv(timeout=30) == "new worker"


def test_an_answer_other_than_101_is_relayed_as_a_response(serve, echo_worker):
    server = serve("-w", "1", "-t", "2", *echo_worker)
    with server.connect() as sock:
        send_request(sock, "GET", "/refuse", headers=handshake_headers())
        status, _, _ = read_response(sock.makefile("rb"))
    assert status == 403
    assert server.stats()["websockets"]["open"] == 0


def test_the_front_refuses_malformed_handshakes(serve):
    server = serve("-w", "1", "-t", "2", "--cmd", UVICORN)
    assert server.get("/echo", headers=handshake_headers(key="short"))[0] == 400
    status, headers, _ = server.get("/echo", headers=handshake_headers(version="8"))
    assert (status, headers["sec-websocket-version"]) == (426, "13")
    assert server.stats()["websockets"]["opened"] == 0


def test_the_bundled_wsgi_worker_gets_handshakes_and_other_upgrades_as_plain_requests(serve):
    """WSGI has no WebSocket: the bundled worker answers a handshake like any GET (the front
    strips Upgrade, as it always has), and so does it any other upgrade."""
    server = serve("-w", "1", "-t", "1", "probe:app")
    for headers in (handshake_headers(), {"Connection": "Upgrade", "Upgrade": "h2c"}):
        status, _, body = server.get("/environ", headers=headers)
        assert status == 200
        assert "HTTP_UPGRADE" not in json.loads(body)
    assert server.stats()["websockets"]["opened"] == 0


def handshake_headers(key=None, version="13"):
    return {
        "Connection": "Upgrade",
        "Upgrade": "websocket",
        "Sec-WebSocket-Key": key or base64.b64encode(os.urandom(16)).decode(),
        "Sec-WebSocket-Version": version,
    }


def open_by_hand(server):
    """A raw socket after its handshake, for what a client library would not do."""
    sock = server.connect()
    send_request(sock, "GET", "/echo", headers=handshake_headers())
    head = b""
    while not head.endswith(b"\r\n\r\n"):
        chunk = sock.recv(1)
        assert chunk, f"closed during the handshake: {head!r}"
        head += chunk
    assert head.startswith(b"HTTP/1.1 101 "), head
    return sock


def masked_frame(opcode, payload, fin=True):
    mask = os.urandom(4)
    masked = bytes(byte ^ mask[i % 4] for i, byte in enumerate(payload))
    if len(payload) < 126:
        length = bytes([0x80 | len(payload)])
    else:
        length = bytes([0x80 | 126]) + struct.pack("!H", len(payload))
    return bytes([(0x80 if fin else 0) | opcode]) + length + mask + masked
