"""A bare ASGI app that watches itself, for the ASGI tests of the bundled worker.

Run with one worker (`-w 1`) so every request sees the same process state:
- /slow        stays in the app for half a second, counting the requests inside it at once
- /most        the most requests that were inside /slow at once, as text
- /hello       "hello"
- /until-gone  reads its request, then waits for the next message without answering: the client
               is expected to leave, and the message type is kept
- /quiet-until-gone
               sends its head and "started", then waits for the next message without sending
               more, as a long poll or quiet server-sent events do: the client is expected to
               leave, and the message type is kept
- /read-until-gone
               reads its request body until its end or until its client leaves, and keeps the
               type of the last message
- /seen        the message types /until-gone, /quiet-until-gone and /read-until-gone got, as JSON
- /http-version  the scope's http_version
- /digest      the request body's length and SHA-256, as JSON, read message by message
- /digest-streaming
               the same JSON, last in a streamed response: one task reads the request body
               while another sends dots until that is done, as a streaming proxy would
- /large?size=N&pieces=K
               large_body(N), in K `http.response.body` messages (one by default)
- /endless?record=FILE&listen=1
               streams pieces until its client leaves, and appends how it heard to FILE:
               "http.disconnect" from a task awaiting `receive` (with listen=1), or the error
               `send` raised
- /pathsend?path=FILE
               FILE as the body, through the `http.response.pathsend` extension when the scope
               offers it (else a 501)
- /orphan      waits on a future that only its own frame holds (a registry of weak references
               names it), then answers "woken"
- /wake-orphan collects garbage, then sets that future: "woke", or "gone" if it was collected
- /paths       the scope's path, raw_path (as text) and root_path, as JSON
- /left        streams a piece every few milliseconds (the first says "started") until its client
               leaves and `send` raises
- /cancelled   the same, but a task awaiting `receive` cancels the app's own task when its client
               leaves, as a framework that watches for a disconnect cancels the handler
- /gc          collects garbage, then the process's count of objects, of pymalloc blocks and of
               the worker's native objects by type, and its resident memory, as JSON
- /target/...  the scope's path, and its raw_path and query_string with each byte as the character
               of that number (latin-1), as JSON: the bytes of the request's target exactly
No lifespan support: it raises on that scope, as many small apps do, and must be served anyway.
It routes on the path below the scope's root_path, as an app mounted under a prefix must.
"""

import asyncio
import contextlib
import gc
import hashlib
import json
import os
import random
import sys
import weakref
from urllib.parse import parse_qs

_inside = 0
_most = 0
_seen = []
_orphans = weakref.WeakValueDictionary()


async def app(scope, receive, send):
    global _inside, _most
    if scope["type"] != "http":
        raise ValueError(f"unsupported scope {scope['type']}")
    route = scope["path"].removeprefix(scope["root_path"])
    if route == "/paths":
        paths = {"path": scope["path"], "raw_path": scope["raw_path"].decode(), "root_path": scope["root_path"]}
        await _reply(send, json.dumps(paths).encode())
    elif route == "/orphan":
        future = asyncio.get_running_loop().create_future()
        _orphans["waiting"] = future
        await future
        await _reply(send, b"woken")
    elif route == "/wake-orphan":
        gc.collect()
        future = _orphans.get("waiting")
        if future is not None:
            future.set_result(None)
        await _reply(send, b"gone" if future is None else b"woke")
    elif route == "/left":
        with contextlib.suppress(OSError):
            await _pieces_until_gone(send)
    elif route == "/cancelled":
        await _cancelled_when_gone(receive, send)
    elif route == "/gc":
        await _reply(send, json.dumps(_census()).encode())
    elif route.startswith("/target/"):
        target = {"path": scope["path"], "raw_path": scope["raw_path"].decode("latin-1"),
                  "query_string": scope["query_string"].decode("latin-1")}
        await _reply(send, json.dumps(target).encode())
    elif scope["path"] == "/slow":
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
    elif scope["path"] == "/quiet-until-gone":
        await receive()
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
        await send({"type": "http.response.body", "body": b"started\n", "more_body": True})
        _seen.append((await receive())["type"])
    elif scope["path"] == "/read-until-gone":
        while (message := await receive())["type"] == "http.request" and message.get("more_body"):
            pass
        _seen.append(message["type"])
    elif scope["path"] == "/digest":
        await _digest(receive, send)
    elif scope["path"] == "/digest-streaming":
        await _digest_streaming(receive, send)
    elif scope["path"] == "/large":
        query = _query(scope)
        await _send_in_pieces(send, large_body(int(query["size"])), int(query.get("pieces", 1)))
    elif scope["path"] == "/endless":
        query = _query(scope)
        await _endless(receive, send, query["record"], listen=query.get("listen") == "1")
    elif scope["path"] == "/pathsend":
        await _pathsend(scope, send)
    elif scope["path"] == "/seen":
        await _reply(send, json.dumps(_seen).encode())
    elif scope["path"] == "/most":
        await _reply(send, str(_most).encode())
    elif scope["path"] == "/http-version":
        await _reply(send, scope["http_version"].encode())
    else:
        await _reply(send, b"hello")


async def _reply(send, body):
    headers = [(b"content-type", b"text/plain"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _pathsend(scope, send):
    path = _query(scope)["path"]
    if "http.response.pathsend" not in scope.get("extensions", {}):
        await send({"type": "http.response.start", "status": 501, "headers": [(b"content-length", b"0")]})
        await send({"type": "http.response.body", "body": b""})
        return
    length = str(os.path.getsize(path)).encode()
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", length)]})
    await send({"type": "http.response.pathsend", "path": path})


async def _pieces_until_gone(send):
    """The front hears that a client left mid-response when it writes to it: a piece every few
    milliseconds, until `send` raises."""
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": b"started\n", "more_body": True})
    while True:
        await asyncio.sleep(0.002)
        await send({"type": "http.response.body", "body": b".", "more_body": True})


async def _cancelled_when_gone(receive, send):
    handler = asyncio.current_task()

    async def watch():
        while (await receive())["type"] != "http.disconnect":
            pass
        handler.cancel()

    watcher = asyncio.ensure_future(watch())
    try:
        with contextlib.suppress(OSError):
            await _pieces_until_gone(send)
        await asyncio.sleep(3600)  # until the watcher cancels the task
    finally:
        await watcher


def _census():
    """What a leak would grow: the objects the collector tracks, the blocks Python's allocator
    has out (the native objects, which it does not track, among them), the native objects it can
    reach, and the resident memory."""
    gc.collect()
    tracked = gc.get_objects()
    native = {}
    for referent in gc.get_referents(*tracked):
        kind = type(referent)
        if kind.__module__ == "headway._native":
            native[kind.__name__] = native.get(kind.__name__, 0) + 1
    with open("/proc/self/status") as status:
        rss_kib = next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))
    return {"objects": len(tracked), "blocks": sys.getallocatedblocks(), "native": native, "rss_kib": rss_kib}


def large_body(size):
    """`size` bytes no shorter period repeats, so a piece lost, doubled or out of order shows."""
    return random.Random(size).randbytes(size)


def _query(scope):
    return {name: values[0] for name, values in parse_qs(scope["query_string"].decode()).items()}


async def _digest(receive, send):
    await _reply(send, await _read_digest(receive))


async def _digest_streaming(receive, send):
    reading = asyncio.ensure_future(_read_digest(receive))
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    while not reading.done():
        await send({"type": "http.response.body", "body": b".", "more_body": True})
        await asyncio.sleep(0)
    await send({"type": "http.response.body", "body": b"\n" + await reading})


async def _read_digest(receive):
    digest, length = hashlib.sha256(), 0
    while True:
        message = await receive()
        digest.update(message["body"])
        length += len(message["body"])
        if not message.get("more_body"):
            break
    return json.dumps({"length": length, "sha256": digest.hexdigest()}).encode()


async def _send_in_pieces(send, body, pieces):
    headers = [(b"content-type", b"application/octet-stream")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    size = -(-len(body) // pieces)
    for start in range(0, len(body), size):
        await send({"type": "http.response.body", "body": body[start:start + size], "more_body": True})
    await send({"type": "http.response.body", "body": b""})


async def _endless(receive, send, record, listen):
    def note(what):
        with open(record, "a") as file:
            file.write(f"{what}\n")

    async def until_disconnect():
        while (await receive())["type"] != "http.disconnect":
            pass
        note("http.disconnect")

    listener = asyncio.ensure_future(until_disconnect()) if listen else None
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    try:
        while listener is None or not listener.done():
            await send({"type": "http.response.body", "body": b"piece\n" * 100, "more_body": True})
            await asyncio.sleep(0.01)
    except OSError as error:
        note(f"send raised {type(error).__name__}")
    if listener is not None:
        await listener
