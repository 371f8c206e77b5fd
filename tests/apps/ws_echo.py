"""An ASGI app for the WebSocket tests, run under uvicorn (`--lifespan off`) as a --cmd worker, and
on the bundled worker (`--interface asgi`), which finds that it does not support lifespan.

Run with one worker (`-w 1`) so every request sees the same process state:
- any WebSocket path   echoes every message back, text as text and bytes as bytes
- /refuse (WebSocket)  closes before accepting: uvicorn answers the handshake 403
- /sleep (HTTP)        "slept", after one second
- any other HTTP path  "hello"
- /disconnects (HTTP)  the close codes the app has seen from its sockets, as JSON
"""

import asyncio
import json

_disconnects = []


async def app(scope, receive, send):
    if scope["type"] == "websocket":
        await _websocket(scope, receive, send)
    elif scope["path"] == "/disconnects":
        await _reply(send, json.dumps(_disconnects).encode(), b"application/json")
    elif scope["path"] == "/sleep":
        await asyncio.sleep(1)
        await _reply(send, b"slept", b"text/plain")
    else:
        await _reply(send, b"hello", b"text/plain")


async def _websocket(scope, receive, send):
    await receive()  # websocket.connect
    if scope["path"] == "/refuse":
        await send({"type": "websocket.close", "code": 1008})
        return
    await send({"type": "websocket.accept"})
    while True:
        message = await receive()
        if message["type"] == "websocket.disconnect":
            _disconnects.append(message.get("code"))
            return
        if message.get("bytes") is not None:
            await send({"type": "websocket.send", "bytes": message["bytes"]})
        else:
            await send({"type": "websocket.send", "text": message["text"]})


async def _reply(send, body, content_type):
    headers = [(b"content-type", content_type), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})
