"""A WSGI app for --preload tests: its import is counted (a line appended to the file named by
$PRELOAD_COUNTER) and allocates 50 MB of data it only reads afterwards, as a large app's
modules and tables would; /crash ends the worker process, / answers with its pid."""

import os

with open(os.environ["PRELOAD_COUNTER"], "a") as counter:
    counter.write(f"{os.getpid()}\n")

TABLE = bytearray(os.urandom(1)) * (50 * 1000 * 1000)  # touched, so resident


def app(environ, start_response):
    if environ["PATH_INFO"] == "/crash":
        os._exit(3)
    body = f"{os.getpid()} {TABLE[-1]}".encode()
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body))),
                              ("X-Worker-Pid", str(os.getpid()))])
    return [body]
