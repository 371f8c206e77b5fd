"""Django and Flask apps, unmodified, behind a TLS-terminating router: they see https and the
real client when the router is a trusted peer (here a unix socket, as a local router uses), and
nothing a client claims when the peer is not (here 127.0.0.1, once --forwarded-allow-ips names
another address)."""

import json

import pytest

from netclient import exchange, request_bytes

APPS = {"django": "django_site:application", "flask": "flask_site:app"}
ROUTER_SAYS = {"Host": "app.example", "X-Forwarded-Proto": "https", "X-Forwarded-For": "203.0.113.9"}


@pytest.mark.parametrize("framework", ["django", "flask"])
def test_behind_a_trusted_router_the_app_sees_https_and_the_client(serve, framework, tmp_path):
    pytest.importorskip(framework)
    router_socket = tmp_path / "router.sock"
    serve("-w", "1", "-t", "2", "-b", f"unix:{router_socket}", APPS[framework])
    status, _, body = exchange(router_socket, request_bytes("/whoami", ROUTER_SAYS))
    assert status == 200, body
    assert json.loads(body) == {"secure": True, "client": "203.0.113.9", "url": "https://app.example/whoami"}


@pytest.mark.parametrize("framework", ["django", "flask"])
def test_an_untrusted_peer_claims_nothing(serve, framework):
    pytest.importorskip(framework)
    server = serve("-w", "1", "-t", "2", "--forwarded-allow-ips", "192.0.2.10", APPS[framework])
    status, headers, body = exchange(("127.0.0.1", server.port), request_bytes("/whoami", ROUTER_SAYS))
    if framework == "django":
        # SECURE_SSL_REDIRECT: a plain-http request goes to https, as it should from this peer.
        assert (status, headers["location"]) == (301, "https://app.example/whoami")
    else:
        assert status == 200
        assert json.loads(body) == {"secure": False, "client": "127.0.0.1", "url": "http://app.example/whoami"}
