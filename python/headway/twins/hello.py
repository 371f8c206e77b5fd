"""The smallest WSGI app worth measuring a server by: one route-less answer of 13 bytes.

bench/versus.sh's `wsgi` part serves it on headway, granian and gunicorn alike, so that what is
measured is the server's cost a request and not an app's router (the demo's /hello goes through
the demo's routing and query parsing).
"""

BODY = b"Hello, world!"
HEADERS = [("Content-Type", "text/plain"), ("Content-Length", str(len(BODY)))]


def app(environ, start_response):
    start_response("200 OK", HEADERS)
    return [BODY]
