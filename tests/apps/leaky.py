"""A WSGI app that leaks: every request to /leak keeps 16 MiB more, as a cache that never
evicts would. For --max-worker-memory tests; answers with its pid."""

import os

_kept = []


def app(environ, start_response):
    if environ["PATH_INFO"] == "/leak":
        _kept.append(bytearray(os.urandom(1)) * (16 << 20))  # touched, so resident
    body = str(os.getpid()).encode()
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body))),
                              ("X-Worker-Pid", str(os.getpid()))])
    return [body]
