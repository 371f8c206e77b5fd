"""The Rails test app (tests/apps/rails/) as a client sees it: the checks that tests/rack/test_rails.py
runs on the source tree's Rack worker under Debian's Rails 6.1, and tests/ship/test_gem.py on the
installed gem under each Ruby it carries (trixie's Rails 7.2 for Ruby 3.3): a page, a CSRF form,
the session and cookies, an ActionController::Live stream and an ActionCable echo."""

import json
import re
import subprocess
from urllib.parse import quote

from websockets.sync.client import connect

from conftest import APPS, exchange, gated_response

RAILS_APP = APPS / "rails"
# What the app requires, and the version it renders.
LOADS_THE_APPS_FRAMEWORKS = ('require "rails"; require "action_controller/railtie"; require "action_view/railtie"; '
                             'require "action_cable/engine"; print Rails.version')


def rails_version(ruby="ruby", env=None):
    """The version of the Rails that RUBY loads with the frameworks the app uses; None if it cannot."""
    found = subprocess.run([ruby, "-e", LOADS_THE_APPS_FRAMEWORKS], env=env, capture_output=True, text=True,
                           timeout=120)
    return found.stdout if found.returncode == 0 else None


def cookies_of(headers):
    """The `name=value` pairs a response's Set-Cookie fields set (read_response joins them with
    ', '; the app's cookies carry no Expires, so no value of theirs has a comma)."""
    fields = headers.get("set-cookie", "")
    return dict(field.split(";")[0].strip().split("=", 1) for field in fields.split(", ") if field)


def cookie_header(jar):
    return "; ".join(f"{name}={value}" for name, value in jar.items())


def assert_renders_a_page(server, version):
    status, headers, body = server.get("/")
    assert status == 200, server.log().decode()
    assert headers["content-type"] == "text/html; charset=utf-8"
    assert f"<h1>Hello from Rails {version}".encode() in body
    assert b"Rendered by pages#show." in body


def assert_a_form_post_needs_its_csrf_token(server):
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


def assert_the_session_and_cookies_carry_across_requests(server):
    jar = {}
    seen = []
    for _ in range(3):
        status, headers, body = server.get("/counter", headers={"Cookie": cookie_header(jar)} if jar else None)
        assert status == 200
        jar.update(cookies_of(headers))
        seen.append(json.loads(body))
    assert seen == [{"session": n, "cookie": n} for n in (1, 2, 3)]
    assert set(jar) == {"_headway_rails_session", "visits"}


def assert_a_live_stream_goes_out_piece_by_piece(server):
    """Needs two slots: /release is asked while the stream holds one."""
    received = gated_response(server, "/live")
    head, _, body = received.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200")
    assert b"transfer-encoding: chunked" in head.lower()
    assert body == b"6\r\nfirst\n\r\n7\r\nsecond\n\r\n0\r\n\r\n"


def cable_message(ws):
    """The next ActionCable message that is not a ping."""
    for _ in range(20):  # a ping every 3 s: a few at most before what is awaited
        message = json.loads(ws.recv(timeout=30))
        if message.get("type") != "ping":
            return message
    raise AssertionError("only pings")


def assert_an_actioncable_channel_echoes_over_a_websocket(server):
    """With one slot a worker, shows that the open socket holds none."""
    with connect(f"ws://127.0.0.1:{server.port}/cable", subprotocols=["actioncable-v1-json"], compression=None) as ws:
        assert cable_message(ws) == {"type": "welcome"}
        identifier = json.dumps({"channel": "EchoChannel"})
        ws.send(json.dumps({"command": "subscribe", "identifier": identifier}))
        assert cable_message(ws) == {"identifier": identifier, "type": "confirm_subscription"}
        for text in ("hello", "again"):
            ws.send(json.dumps({"command": "message", "identifier": identifier, "data": json.dumps({"text": text})}))
            assert cable_message(ws) == {"identifier": identifier, "message": {"text": text}}
        # The open socket holds no slot: the slots serve pages meanwhile.
        assert server.get("/")[0] == 200
        assert server.stats()["websockets"]["open"] == 1


def assert_serves_the_rails_app(server, version):
    """Every check above, on a server with two slots or more, whose Rails is VERSION."""
    assert_renders_a_page(server, version)
    assert_a_form_post_needs_its_csrf_token(server)
    assert_the_session_and_cookies_carry_across_requests(server)
    assert_a_live_stream_goes_out_piece_by_piece(server)
    assert_an_actioncable_channel_echoes_over_a_websocket(server)
