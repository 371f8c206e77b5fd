"""What the `--cmd` test workers share: a threaded HTTP/1.1 server on a unix socket, and a
quiet handler that answers 200 "ok"."""

import socketserver
from http.server import BaseHTTPRequestHandler


class OkHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def ok(self):
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    do_GET = ok

    def log_message(self, *args):
        pass


class Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
