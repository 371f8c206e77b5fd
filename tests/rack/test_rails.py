"""A Rails 6.1 app (Debian's ruby-rails), unmodified, on the Rack worker: tests/apps/rails/ under
`headway serve -w 1 -t 5 config.ru`, as a client sees it through the front: pages, a CSRF form,
the session and cookies, an ActionController::Live stream, who the client is behind trusted and
untrusted routers, draining on SIGTERM, --preload, and an ActionCable echo over a WebSocket."""

import json
import re

import pytest
from rails_app import (
    RAILS_APP,
    assert_a_form_post_needs_its_csrf_token,
    assert_a_live_stream_goes_out_piece_by_piece,
    assert_an_actioncable_channel_echoes_over_a_websocket,
    assert_renders_a_page,
    assert_the_session_and_cookies_carry_across_requests,
    rails_version,
)
from test_rack import answer_across_sigterm, loaded_by, require_rack

from conftest import missing, parent_of, ready_pids

# Debian bookworm's ruby-rails.
RAILS = "6.1"


@pytest.fixture
def rails(serve):
    """Starts the Rails app on the Rack worker, 1 worker x 5 threads unless told."""
    require_rails()

    def start(*args, env=None):
        return serve(*(args or ("-w", "1", "-t", "5")), "config.ru", cwd=RAILS_APP, env=env)

    return start


def require_rails():
    require_rack()
    if rails_version() is None:
        missing("Rails is not installed (apt-get install ruby-rails)")


def test_a_page_is_rendered(rails):
    assert_renders_a_page(rails(), RAILS)


def test_a_list_page_renders_its_items_escaped(rails):
    server = rails()
    status, headers, body = server.get("/items")
    assert status == 200
    assert headers["content-type"] == "text/html; charset=utf-8"
    rows = re.findall(rb"<tr><td>(\d+)</td><td>([^<]*)</td><td>([^<]*)</td></tr>", body)
    assert [int(row[0]) for row in rows] == list(range(1, 11))
    assert (b"7", b"Tea &amp; biscuits &lt;for two&gt;", b"$5.00") in rows


def test_a_form_post_is_accepted_with_its_csrf_token_and_refused_without(rails):
    assert_a_form_post_needs_its_csrf_token(rails())


def test_the_session_and_cookies_carry_across_requests(rails):
    assert_the_session_and_cookies_carry_across_requests(rails())


def test_a_live_stream_goes_out_piece_by_piece(rails):
    assert_a_live_stream_goes_out_piece_by_piece(rails())


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
    assert status == 200 and f"<h1>Hello from Rails {RAILS}".encode() in body
    assert {int(server.get("/pid")[2]) for _ in range(6)} <= set(pids)


def test_an_actioncable_channel_echoes_over_a_websocket(rails):
    assert_an_actioncable_channel_echoes_over_a_websocket(rails("-w", "1", "-t", "1"))
