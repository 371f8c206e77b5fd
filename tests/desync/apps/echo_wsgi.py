"""The desync suite's echo app for the bundled worker, WSGI: each request is appended to the file
named by $ECHO_LOG (one JSON line) and answered with the same JSON, so the suite can compare what
the app saw with what its client was answered. `/odd/<case>` answers against its own framing,
as far as WSGI lets an app (the cases are in tests/desync/corpus.py)."""

import base64
import json
import os

# What the app claims and sends for each odd case: (status, headers, body).
ODD = {
    "longer": ("200 OK", [("Content-Length", "3")], b"hello"),
    "shorter": ("200 OK", [("Content-Length", "10")], b"hello"),
    "no-content": ("204 No Content", [], b"hello"),
    "both-lengths": ("200 OK", [("Content-Length", "100"), ("Transfer-Encoding", "chunked")], b"hello"),
}


def app(environ, start_response):
    body = environ["wsgi.input"].read()
    seen = {
        "method": environ["REQUEST_METHOD"],
        "path": environ["PATH_INFO"],
        "query": environ.get("QUERY_STRING", ""),
        "body": base64.b64encode(body).decode(),
        "headers": [[key[5:].lower().replace("_", "-"), value] for key, value in environ.items()
                    if key.startswith("HTTP_")],
    }
    line = json.dumps(seen)
    with open(os.environ["ECHO_LOG"], "a") as log:
        log.write(line + "\n")
    path = environ["PATH_INFO"]
    if path.startswith("/odd/") and path[5:] in ODD:
        status, headers, answer = ODD[path[5:]]
        start_response(status, headers)
        return [answer]
    answer = line.encode()
    start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(answer)))])
    return [answer]
