"""A WSGI app that is not the demo app and has no /hello: /fortunes, and 404 for every other
path. `headway lab recommend fortunes:app --path /fortunes` must measure it all the same, which
it can only if it learns that a server is up from the server rather than from a demo page."""

import time

FORTUNES = b"".join(
    line + b"\n"
    for line in [
        b"A journey of a thousand miles begins with a single step.",
        b"The queue is the thing to watch.",
        b"Fortune favours the prepared mind.",
    ]
)


def app(environ, start_response):
    if environ["PATH_INFO"] != "/fortunes":
        start_response("404 Not Found", [("Content-Type", "text/plain")])
        return [b"only /fortunes here\n"]
    time.sleep(0.002)  # a little waiting, as on a database
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(FORTUNES)))])
    return [FORTUNES]
