"""A Starlette app, unmodified, for the ASGI tests of the bundled worker (tests/server/test_asgi.py);
the same routes and lifespan as fastapi_site.py, written with Starlette alone, plus a WebSocket.

- lifespan: lifespan_log.py's (notes startup and shutdown in $LIFESPAN_LOG, greets from startup)
- GET /items/{item_id}?q=   JSON, with the greeting the startup left
- POST /upload             a multipart form (a file and a field): what arrived, as JSON
- GET /stream              a streamed response: ten numbered lines, produced one by one
- GET /whoami              scheme, client, URL as Starlette sees them
- WebSocket /echo          echoes every message back, text as text and bytes as bytes
- GET /source             this file, as a FileResponse (sent by path, the worker offering it)
- WebSocket /private       denied with a 401 of the app's own (the denial response extension)
"""

import hashlib

from lifespan_log import lifespan
from starlette.applications import Starlette
from starlette.responses import FileResponse, JSONResponse, PlainTextResponse, StreamingResponse
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocketDisconnect


async def item(request):
    return JSONResponse({
        "item_id": int(request.path_params["item_id"]),
        "q": request.query_params.get("q", ""),
        "greeting": request.state.greeting,
    })


async def upload(request):
    async with request.form() as form:
        data = await form["file"].read()
        return JSONResponse({
            "name": form["name"],
            "filename": form["file"].filename,
            "size": len(data),
            "sha256": hashlib.sha256(data).hexdigest(),
        })


async def stream(request):
    async def lines():
        for number in range(10):
            yield f"line {number}\n".encode()

    return StreamingResponse(lines(), media_type="text/plain")


async def whoami(request):
    url = request.url
    return JSONResponse({"secure": url.scheme == "https", "client": request.client.host, "url": str(url)})


async def echo(websocket):
    await websocket.accept()
    try:
        while True:
            message = await websocket.receive()
            if message["type"] == "websocket.disconnect":
                return
            if message.get("bytes") is not None:
                await websocket.send_bytes(message["bytes"])
            else:
                await websocket.send_text(message["text"])
    except WebSocketDisconnect:
        return


async def source(request):
    return FileResponse(__file__, media_type="text/plain")


async def private(websocket):
    await websocket.send_denial_response(
        PlainTextResponse("sign in first\n", status_code=401, headers={"WWW-Authenticate": 'Bearer realm="ws"'}))


app = Starlette(
    routes=[
        Route("/items/{item_id}", item),
        Route("/upload", upload, methods=["POST"]),
        Route("/stream", stream),
        Route("/whoami", whoami),
        Route("/source", source),
        WebSocketRoute("/echo", echo),
        WebSocketRoute("/private", private),
    ],
    lifespan=lifespan,
)
