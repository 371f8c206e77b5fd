"""The desync suite's echo app as ASGI, for the bundled worker and for uvicorn (h11 and
httptools) as --cmd workers: each request is appended to the file named by $ECHO_LOG (one JSON
line) and answered with the same JSON. `/odd/<case>` answers against its own framing, as an app
can through ASGI (the cases are in tests/desync/corpus.py)."""

import base64
import json
import os

# What the app claims and sends for each odd case: (status, headers, body).
ODD = {
    "longer": (200, [(b"content-length", b"3")], b"hello"),
    "shorter": (200, [(b"content-length", b"10")], b"hello"),
    "no-content": (204, [], b"hello"),
    "both-lengths": (200, [(b"content-length", b"100"), (b"transfer-encoding", b"chunked")], b"hello"),
}


async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    seen = {
        "method": scope["method"],
        "path": scope["path"],
        "query": scope["query_string"].decode("latin-1"),
        "body": base64.b64encode(body).decode(),
        "headers": [[name.decode("latin-1"), value.decode("latin-1")] for name, value in scope["headers"]],
    }
    line = json.dumps(seen)
    with open(os.environ["ECHO_LOG"], "a") as log:
        log.write(line + "\n")
    odd = ODD.get(scope["path"].removeprefix("/odd/")) if scope["path"].startswith("/odd/") else None
    if odd:
        status, headers, answer = odd
    else:
        answer = line.encode()
        status, headers = 200, [(b"content-type", b"application/json"), (b"content-length", str(len(answer)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": answer})
