"""Large bodies both ways, as a WSGI app (`app`), for bench/versus.sh: the server's cost of moving
bytes, with as little of the app's as WSGI allows. headway, granian and gunicorn serve it.

- POST /upload           reads the body in 1 MiB pieces and answers its length
- GET /download?size=N   N bytes, in 1 MiB pieces of one buffer made at import, with a
                         Content-Length
- POST /echo             the body read whole, sent back in one piece
"""

from collections.abc import Callable, Iterable, Iterator
from typing import Any
from urllib.parse import parse_qs

PIECE = 1 << 20
ZEROS = bytes(PIECE)


def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    method, path = environ["REQUEST_METHOD"], environ["PATH_INFO"]
    if (method, path) == ("POST", "/upload"):
        stream, length = environ["wsgi.input"], 0
        while piece := stream.read(PIECE):
            length += len(piece)
        return _reply(start_response, b"%d\n" % length)
    if (method, path) == ("POST", "/echo"):
        body = environ["wsgi.input"].read()
        return _reply(start_response, body, "application/octet-stream")
    if (method, path) == ("GET", "/download"):
        size = int(parse_qs(environ["QUERY_STRING"]).get("size", ["0"])[0])
        start_response("200 OK", [("Content-Type", "application/octet-stream"), ("Content-Length", str(size))])
        return _pieces(size)
    return _reply(start_response, b"not found\n", status="404 Not Found")


def _pieces(size: int) -> Iterator[bytes]:
    while size > PIECE:
        yield ZEROS
        size -= PIECE
    yield ZEROS[:size]


def _reply(start_response: Callable[..., Any], body: bytes, content_type: str = "text/plain",
           status: str = "200 OK") -> list[bytes]:
    start_response(status, [("Content-Type", content_type), ("Content-Length", str(len(body)))])
    return [body]
