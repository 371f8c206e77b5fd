"""The demo app as an ASGI 3 app (`app`), for uvicorn and granian --interface asgi.

Routing and bodies come from headway.demo; only the waiting differs: the CPU burn runs
inline (it holds the event loop, as real CPU work would) and waits are awaited.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from headway.demo import burn_cpu, headers, route

if TYPE_CHECKING:  # the twin runs without headway's native core, which headway.worker imports
    from headway.worker.scope import Receive, Scope, Send


async def app(scope: Scope, receive: Receive, send: Send) -> None:
    if scope["type"] == "lifespan":
        await _lifespan(receive, send)
        return
    if scope["type"] != "http":
        raise ValueError(f"the demo app serves HTTP only, not {scope['type']!r}")
    reply = route(scope["path"], scope["query_string"].decode("latin-1"))
    if reply.cpu_ms:
        burn_cpu(reply.cpu_ms)
    if reply.wait_ms:
        await asyncio.sleep(reply.wait_ms / 1000)
    await send({
        "type": "http.response.start",
        "status": reply.code,
        "headers": [(name.lower().encode(), value.encode()) for name, value in headers(reply)],
    })
    await send({"type": "http.response.body", "body": reply.body})


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return
