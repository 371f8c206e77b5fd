"""An HTTP/1.1 worker for `--cmd` tests of answers a worker should not send: serves on the unix
socket given as argv[1] and answers every request with its own path as the body.

- `/stray`: answered, then 0.3 s later a second complete response nobody asked for ("stray") is
  written on the same connection, while the worker goes on reading requests.
- `/doubled`: answered with the stray response right behind the answer, in the same write.
- `/spaced`: answered with header values that have blanks around them, as probe.py's `/spaced`.
"""

import sys
import threading

from unix_http import OkHandler, Server

STRAY = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nstray"


class Handler(OkHandler):
    def do_GET(self):
        body = self.path.encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        if self.path == "/spaced":
            self.send_header("Set-Cookie", " a=b ")
            self.send_header("X-Spaced", "\t1 2 \t")
        self.end_headers()
        self.wfile.write(body + (STRAY if self.path == "/doubled" else b""))
        if self.path == "/stray":
            threading.Timer(0.3, self.connection.sendall, [STRAY]).start()


if __name__ == "__main__":
    Server(sys.argv[1], Handler).serve_forever()
