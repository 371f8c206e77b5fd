"""What every ASGI scope shares with the lifespan scope, and the status line the WebSocket side
answers a refused handshake with. The `http` and `websocket` scopes themselves are built natively
(crates/worker/src/asgi/scope.rs), one place for the keys every way of serving must agree on."""

import functools
import http
from collections.abc import Awaitable, Callable
from typing import Any

from headway import _native

ASGI_VERSION = dict(zip(("version", "spec_version"), _native.ASGI_VERSION))

# ASGI 3's shapes, for the signatures here.
Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]


@functools.cache
def status_line(status: int) -> str:
    """`200 OK` for 200; cached, as looking the phrase up was a measurable part of a request."""
    try:
        return f"{status} {http.HTTPStatus(status).phrase}"
    except ValueError:
        return f"{status} "
