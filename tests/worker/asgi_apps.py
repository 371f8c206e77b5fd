"""A bare ASGI app for the worker's ASGI tests (test_worker_asgi.py), one behaviour per path:

- /scope...       the http scope as JSON (bytes as latin-1 text)
- /echo           the request body back, with how many `http.request` messages carried it
- /stream         three pieces, the length not given: the worker must chunk them, in order
- /head           "abc" with its length, whatever the method (HEAD must get no body)
- /fail-before    raises before the response starts
- /fail-after     starts a streamed response, then raises
- /no-response    returns without sending anything
- /bad-status     answers status 42
- /after          reads the request, completes its response, then waits for the next message
                  and keeps its type;
  /seen           lists the types kept so far (one worker process: state is shared)
- /loop           the module of the running event loop's class
- /list-headers   headers as lists of two, as datasette sends them; /bad-pair one of three items
"""

import asyncio
import json

_seen = []


async def app(scope, receive, send):
    if scope["type"] != "http":
        raise ValueError("no lifespan here")
    path = scope["path"]
    if path.startswith("/scope"):
        await reply(send, json.dumps(describe(scope)).encode())
    elif path == "/echo":
        body, messages = b"", 0
        while True:
            message = await receive()
            body += message["body"]
            messages += 1
            if not message["more_body"]:
                break
        await reply(send, body, [(b"x-messages", str(messages).encode())])
    elif path == "/stream":
        await send({"type": "http.response.start", "status": 200, "headers": []})
        for piece in (b"one ", b"two ", b"three"):
            await send({"type": "http.response.body", "body": piece, "more_body": True})
        await send({"type": "http.response.body", "body": b""})
    elif path == "/head":
        await reply(send, b"abc")
    elif path == "/fail-before":
        raise RuntimeError("failed before the response")
    elif path == "/fail-after":
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"partial", "more_body": True})
        raise RuntimeError("failed in the middle of the response")
    elif path == "/no-response":
        return
    elif path == "/bad-status":
        await send({"type": "http.response.start", "status": 42, "headers": []})
        await send({"type": "http.response.body", "body": b"never"})
    elif path == "/after":
        await receive()  # the request (no body)
        await reply(send, b"done")
        _seen.append((await receive())["type"])
    elif path == "/loop":
        await reply(send, type(asyncio.get_running_loop()).__module__.encode())
    elif path == "/list-headers":
        await send({"type": "http.response.start", "status": 200,
                    "headers": [[b"content-type", b"text/plain"], [b"content-length", b"2"]]})
        await send({"type": "http.response.body", "body": b"ok"})
    elif path == "/bad-pair":
        await send({"type": "http.response.start", "status": 200, "headers": [[b"x-a", b"1", b"2"]]})
    elif path == "/seen":
        await reply(send, json.dumps(_seen).encode())


def describe(scope):
    text = {key: value.decode("latin-1") if isinstance(value, bytes) else value for key, value in scope.items()}
    text["headers"] = [[name.decode("latin-1"), value.decode("latin-1")] for name, value in scope["headers"]]
    return text


async def reply(send, body, headers=()):
    headers = [(b"content-length", str(len(body)).encode()), *headers]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})
