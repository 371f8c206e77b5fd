"""A bare ASGI app that watches itself, for the ASGI tests of the bundled worker.

Run with one worker (`-w 1`) so every request sees the same process state:
- /slow        stays in the app for half a second, counting the requests inside it at once
- /most        the most requests that were inside /slow at once, as text
- /hello       "hello"
- /until-gone  reads its request, then waits for the next message without answering: the client
               is expected to leave, and the message type is kept
- /seen        the message types /until-gone got, as JSON
No lifespan support: it raises on that scope, as many small apps do, and must be served anyway.
"""

import asyncio
import json

_inside = 0
_most = 0
_seen = []


async def app(scope, receive, send):
    global _inside, _most
    if scope["type"] != "http":
        raise ValueError(f"unsupported scope {scope['type']}")
    if scope["path"] == "/slow":
        _inside += 1
        _most = max(_most, _inside)
        try:
            await asyncio.sleep(0.5)
        finally:
            _inside -= 1
        await _reply(send, b"slept")
    elif scope["path"] == "/until-gone":
        await receive()
        _seen.append((await receive())["type"])
    elif scope["path"] == "/seen":
        await _reply(send, json.dumps(_seen).encode())
    elif scope["path"] == "/most":
        await _reply(send, str(_most).encode())
    else:
        await _reply(send, b"hello")


async def _reply(send, body):
    headers = [(b"content-type", b"text/plain"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})
