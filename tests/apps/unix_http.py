"""What the `--cmd` test workers share: a threaded HTTP/1.1 server on a unix socket, and a
quiet handler that answers 200 "ok" (after `?ms=N` milliseconds)."""

import socketserver
import time
from http.server import BaseHTTPRequestHandler
from urllib.parse import parse_qs, urlsplit


class OkHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def ok(self):
        # `?ms=N`: the answer takes N ms, so that a test's load can keep the slots busy.
        query = parse_qs(urlsplit(self.path).query)
        time.sleep(int(query.get("ms", ["0"])[0]) / 1000)
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    do_GET = ok

    def log_message(self, *args):
        pass


class Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
