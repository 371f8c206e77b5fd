"""A Rails 6.1 app (Debian's ruby-rails), unmodified, on the Rack worker: tests/apps/rails/ under
`headway serve -w 1 -t 5 config.ru`, as a client sees it through the front: pages, a CSRF form,
the session and cookies, an ActionController::Live stream, who the client is behind trusted and
untrusted routers, draining on SIGTERM, --preload, and an ActionCable echo over a WebSocket."""

import json
import re
import subprocess
from urllib.parse import quote

import pytest
from test_rack import answer_across_sigterm, exchange, gated_response, loaded_by, require_rack
from websockets.sync.client import connect

from conftest import APPS, missing, parent_of, ready_pids

RAILS_APP = APPS / "rails"


@pytest.fixture
def rails(serve):
    """Starts the Rails app on the Rack worker, 1 worker x 5 threads unless told."""
    require_rails()

    def start(*args, env=None):
        return serve(*(args or ("-w", "1", "-t", "5")), "config.ru", cwd=RAILS_APP, env=env)

    return start


def require_rails():
    require_rack()
    found = subprocess.run(["ruby", "-e", 'require "rails"'], capture_output=True)  # noqa: S607
    if found.returncode != 0:
        missing("Rails is not installed (apt-get install ruby-rails)")


def cookies_of(headers):
    """The `name=value` pairs a response's Set-Cookie fields set (read_response joins them with
    ', '; the app's cookies carry no Expires, so no value of theirs has a comma)."""
    fields = headers.get("set-cookie", "")
    return dict(field.split(";")[0].strip().split("=", 1) for field in fields.split(", ") if field)


def cookie_header(jar):
    return "; ".join(f"{name}={value}" for name, value in jar.items())


def test_a_page_is_rendered(rails):
    server = rails()
    status, headers, body = server.get("/")
    assert status == 200
    assert headers["content-type"] == "text/html; charset=utf-8"
    assert b"<h1>Hello from Rails 6.1" in body
    assert b"Rendered by pages#show." in body


def test_a_list_page_renders_its_items_escaped(rails):
    server = rails()
    status, headers, body = server.get("/items")
    assert status == 200
    assert headers["content-type"] == "text/html; charset=utf-8"
    rows = re.findall(rb"<tr><td>(\d+)</td><td>([^<]*)</td><td>([^<]*)</td></tr>", body)
    assert [int(row[0]) for row in rows] == list(range(1, 11))
    assert (b"7", b"Tea &amp; biscuits &lt;for two&gt;", b"$5.00") in rows


def test_a_form_post_is_accepted_with_its_csrf_token_and_refused_without(rails):
    server = rails()
    status, headers, page = server.get("/form")
    assert status == 200
    token = re.search(rb'name="authenticity_token" value="([^"]+)"', page)[1].decode()
    jar = cookies_of(headers)
    form = {"Content-Type": "application/x-www-form-urlencoded", "Cookie": cookie_header(jar)}
    filled = f"authenticity_token={quote(token)}&name=ada".encode()
    accepted = exchange(server, "POST", "/form", headers=form, body=filled)
    assert accepted[0] == 200 and accepted[2] == b"accepted ada"
    refused = exchange(server, "POST", "/form", headers=form, body=b"name=ada")
    assert refused[0] == 422
    without_cookie = {"Content-Type": "application/x-www-form-urlencoded"}
    refused = exchange(server, "POST", "/form", headers=without_cookie, body=filled)
    assert refused[0] == 422


def test_the_session_and_cookies_carry_across_requests(rails):
    server = rails()
    jar = {}
    seen = []
    for _ in range(3):
        status, headers, body = server.get("/counter", headers={"Cookie": cookie_header(jar)} if jar else None)
        assert status == 200
        jar.update(cookies_of(headers))
        seen.append(json.loads(body))
    assert seen == [{"session": n, "cookie": n} for n in (1, 2, 3)]
    assert set(jar) == {"_headway_rails_session", "visits"}


def test_a_live_stream_goes_out_piece_by_piece(rails):
    server = rails()
    received = gated_response(server, "/live")
    head, _, body = received.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200")
    assert b"transfer-encoding: chunked" in head.lower()
    assert body == b"6\r\nfirst\n\r\n7\r\nsecond\n\r\n0\r\n\r\n"


def client_seen(server, headers):
    status, _, body = server.get("/client", headers=headers)
    assert status == 200, body
    return json.loads(body)


ROUTER_SAYS = {"X-Forwarded-For": "203.0.113.7", "X-Forwarded-Proto": "https"}


def test_remote_ip_and_ssl_come_from_a_trusted_router(rails):
    server = rails("-w", "1", "-t", "5", "--forwarded-allow-ips", "127.0.0.1")
    assert client_seen(server, ROUTER_SAYS) == {"remote_ip": "203.0.113.7", "ssl": True, "remote_addr": "203.0.113.7"}
    assert client_seen(server, {}) == {"remote_ip": "127.0.0.1", "ssl": False, "remote_addr": "127.0.0.1"}


def test_an_untrusted_router_cannot_say_who_the_client_is(rails):
    server = rails("-w", "1", "-t", "5", "--forwarded-allow-ips", "192.0.2.1")
    assert client_seen(server, ROUTER_SAYS) == {"remote_ip": "127.0.0.1", "ssl": False, "remote_addr": "127.0.0.1"}


def test_sigterm_lets_a_slow_rails_request_finish(rails):
    server = rails()
    status, _, body = answer_across_sigterm(server, "/slow?ms=1500")
    assert (status, body) == (200, b"slept")


def test_rails_preloaded_is_loaded_once_and_serves_from_forked_workers(rails, tmp_path):
    loaded = tmp_path / "loaded"
    server = rails("-w", "2", "-t", "2", "--preload", env={"RAILS_LOADED_LOG": str(loaded)})
    pids = ready_pids(server, 2)
    [parent] = loaded_by(loaded)
    assert [parent_of(pid) for pid in pids] == [parent, parent]
    status, _, body = server.get("/")
    assert status == 200 and b"<h1>Hello from Rails 6.1" in body
    assert {int(server.get("/pid")[2]) for _ in range(6)} <= set(pids)


def cable_message(ws):
    """The next ActionCable message that is not a ping."""
    for _ in range(20):  # a ping every 3 s: a few at most before what is awaited
        message = json.loads(ws.recv(timeout=30))
        if message.get("type") != "ping":
            return message
    raise AssertionError("only pings")


def test_an_actioncable_channel_echoes_over_a_websocket(rails):
    server = rails("-w", "1", "-t", "1")
    with connect(f"ws://127.0.0.1:{server.port}/cable", subprotocols=["actioncable-v1-json"], compression=None) as ws:
        assert cable_message(ws) == {"type": "welcome"}
        identifier = json.dumps({"channel": "EchoChannel"})
        ws.send(json.dumps({"command": "subscribe", "identifier": identifier}))
        assert cable_message(ws) == {"identifier": identifier, "type": "confirm_subscription"}
        for text in ("hello", "again"):
            ws.send(json.dumps({"command": "message", "identifier": identifier, "data": json.dumps({"text": text})}))
            assert cable_message(ws) == {"identifier": identifier, "message": {"text": text}}
        # The open socket holds no slot: the one slot serves pages meanwhile.
        assert server.get("/")[0] == 200
        assert server.stats()["websockets"]["open"] == 1
