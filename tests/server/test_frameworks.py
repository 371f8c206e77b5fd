"""Django and Flask apps (WSGI), and Django, FastAPI and Starlette apps (ASGI), unmodified, behind
a TLS-terminating router: they see https and the real client when the router is a trusted peer
(here a unix socket, as a local router uses), and nothing a client claims when the peer is not
(here 127.0.0.1, once --forwarded-allow-ips names another address). Mounted under a prefix
(--root-path), they route below it and link with it, whether the router keeps it in the path or
takes it off."""

import json

import pytest

from conftest import require_module
from netclient import exact_request, exchange

# framework: (the module it needs, the app, its /whoami path). The ASGI ones run on the bundled
# worker's ASGI side, found by `--interface auto`.
APPS = {
    "django": ("django", "django_site:application", "/whoami"),
    "flask": ("flask", "flask_site:app", "/whoami"),
    "django-asgi": ("django", "django_site:asgi_application", "/whoami-async"),
    "fastapi": ("fastapi", "fastapi_site:app", "/whoami"),
    "starlette": ("starlette", "starlette_site:app", "/whoami"),
}
ROUTER_SAYS = {"Host": "app.example", "X-Forwarded-Proto": "https", "X-Forwarded-For": "203.0.113.9"}


@pytest.mark.parametrize("framework", APPS)
def test_behind_a_trusted_router_the_app_sees_https_and_the_client(serve, framework, tmp_path):
    module, app, whoami = APPS[framework]
    require_module(module)
    router_socket = tmp_path / "router.sock"
    serve("-w", "1", "-t", "2", "-b", f"unix:{router_socket}", app)
    status, _, body = exchange(router_socket, exact_request(whoami, ROUTER_SAYS))
    assert status == 200, body
    assert json.loads(body) == {"secure": True, "client": "203.0.113.9", "url": f"https://app.example{whoami}"}


@pytest.mark.parametrize("framework", APPS)
@pytest.mark.parametrize("router", ["keeps-the-prefix", "takes-it-off"])
def test_under_a_root_path_the_app_routes_below_it_and_links_with_it(serve, framework, router, tmp_path):
    module, app, whoami = APPS[framework]
    require_module(module)
    router_socket = tmp_path / "router.sock"
    serve("-w", "1", "-t", "2", "-b", f"unix:{router_socket}", "--root-path", "/shop", app)
    path = f"/shop{whoami}" if router == "keeps-the-prefix" else whoami
    status, _, body = exchange(router_socket, exact_request(path, ROUTER_SAYS))
    assert status == 200, body
    assert json.loads(body)["url"] == f"https://app.example/shop{whoami}"


@pytest.mark.parametrize("framework", APPS)
def test_an_untrusted_peer_claims_nothing(serve, framework):
    module, app, whoami = APPS[framework]
    require_module(module)
    server = serve("-w", "1", "-t", "2", "--forwarded-allow-ips", "192.0.2.10", app)
    status, headers, body = exchange(("127.0.0.1", server.port), exact_request(whoami, ROUTER_SAYS))
    if module == "django":
        # SECURE_SSL_REDIRECT: a plain-http request goes to https, as it should from this peer.
        assert (status, headers["location"]) == (301, f"https://app.example{whoami}")
    else:
        assert status == 200
        assert json.loads(body) == {"secure": False, "client": "127.0.0.1", "url": f"http://app.example{whoami}"}
