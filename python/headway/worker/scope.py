"""What an ASGI `http` scope and a `websocket` scope share, built from a request head as the native
core gives it (`Channel.next_request`, `parse_head`): one place for the keys both must agree on;
and the status line both answer with."""

import functools
import http
from urllib.parse import unquote

ASGI_VERSION = {"version": "3.0", "spec_version": "2.4"}


def connection_scope(kind, head, state):
    """The scope of type `kind` for `head`, with a shallow copy of the lifespan `state`."""
    method, raw_path, query, version, headers, scheme, client, _ = head
    if kind == "websocket":
        scheme = "wss" if scheme == "https" else "ws"
    return {
        "type": kind,
        "asgi": ASGI_VERSION,
        "http_version": version,
        "method": method,
        "scheme": scheme,
        "path": unquote(raw_path.decode("latin-1")),
        "raw_path": raw_path,
        "query_string": query,
        "root_path": "",
        "headers": headers,
        "client": (client, 0) if client else None,
        "server": None,
        "state": state.copy(),
    }


@functools.cache
def status_line(status):
    """`200 OK` for 200; cached, as looking the phrase up was a measurable part of a request."""
    try:
        return f"{status} {http.HTTPStatus(status).phrase}"
    except ValueError:
        return f"{status} "
