"""A FastAPI app, unmodified, for the ASGI tests of the bundled worker (tests/server/test_asgi.py).

- lifespan: lifespan_log.py's (notes startup and shutdown in $LIFESPAN_LOG, greets from startup)
- GET /items/{item_id}?q=   JSON, with the greeting the startup left
- POST /upload             a multipart form (a file and a field): what arrived, as JSON
- GET /stream              a streamed response: ten numbered lines, produced one by one
- GET /whoami              what FastAPI concluded about the request: scheme, client, URL
"""

import hashlib
from typing import Annotated

from fastapi import FastAPI, File, Form, Request, UploadFile
from fastapi.responses import StreamingResponse
from lifespan_log import lifespan

app = FastAPI(lifespan=lifespan)


@app.get("/items/{item_id}")
async def item(item_id: int, request: Request, q: str = ""):
    return {"item_id": item_id, "q": q, "greeting": request.state.greeting}


@app.post("/upload")
async def upload(file: Annotated[UploadFile, File()], name: Annotated[str, Form()]):
    data = await file.read()
    return {"name": name, "filename": file.filename, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}


@app.get("/stream")
async def stream():
    async def lines():
        for number in range(10):
            yield f"line {number}\n".encode()

    return StreamingResponse(lines(), media_type="text/plain")


@app.get("/whoami")
async def whoami(request: Request):
    return {"secure": request.url.scheme == "https", "client": request.client.host, "url": str(request.url)}
