"""What an ASGI `http` scope and a `websocket` scope share, built from a request head as the native
core gives it (`Channel.next_request`, `parse_head`): one place for the keys both must agree on;
and the status line both answer with.

With `--root-path` (the app mounted under a prefix), `root_path` is the prefix and `path` the full
path, prefix included (ASGI 3, as uvicorn gives it), whether the router kept the prefix in the
request or took it off."""

import functools
import http
from urllib.parse import unquote_to_bytes

ASGI_VERSION = {"version": "3.0", "spec_version": "2.4"}


def connection_scope(kind, head, state, root_path):
    """The scope of type `kind` for `head`, with a shallow copy of the lifespan `state`."""
    method, raw_path, query, version, headers, scheme, client, _ = head
    if kind == "websocket":
        scheme = "wss" if scheme == "https" else "ws"
    path = unquote_to_bytes(raw_path).decode("utf-8", "replace")
    if root_path and path != root_path and not path.startswith(root_path + "/"):
        path, raw_path = root_path + path, root_path.encode() + raw_path
    return {
        "type": kind,
        "asgi": ASGI_VERSION,
        "http_version": version,
        "method": method,
        "scheme": scheme,
        "path": path,
        "raw_path": raw_path,
        "query_string": query,
        "root_path": root_path,
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
