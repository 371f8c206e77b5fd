"""An HTTP/1.1 worker for `--cmd` tests of clients that leave: serves on the unix socket given as
argv[1] and appends what it saw to the file given as argv[2].

- `/stream`: a chunked response, a chunk every 50 ms for up to a minute; notes "stream cut" when
  a write fails (the front closed the connection), "stream finished" if it runs to its end.
- `/wait`: answers after a minute, watching its connection meanwhile; notes "wait: connection
  closed" if the front closes it first, "wait finished" otherwise.
- POST `/digest`: reads the body as it comes and answers its length and SHA-256 as JSON; notes
  "upload cut" if the connection ends before the body does.
- anything else: 200 "ok".
"""

import hashlib
import json
import select
import socket
import sys
import time

from unix_http import OkHandler, Server

NOTES = sys.argv[2]
LIMIT = 60.0


def note(line):
    with open(NOTES, "a") as notes:
        notes.write(line + "\n")


class Handler(OkHandler):
    def do_GET(self):
        {"/stream": self.stream, "/wait": self.wait}.get(self.path, self.ok)()

    def do_POST(self):
        left, sha = int(self.headers["Content-Length"]), hashlib.sha256()
        length = left
        while left:
            piece = self.rfile.read1(min(left, 1 << 20))
            if not piece:
                note("upload cut")
                self.close_connection = True
                return
            sha.update(piece)
            left -= len(piece)
        body = json.dumps({"length": length, "sha256": sha.hexdigest()}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def stream(self):
        self.send_response(200)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            for _ in range(int(LIMIT / 0.05)):
                self.wfile.write(b"6\r\nchunk\n\r\n")
                self.wfile.flush()
                time.sleep(0.05)
            self.wfile.write(b"0\r\n\r\n")
        except OSError:
            note("stream cut")
            self.close_connection = True
            return
        note("stream finished")

    def wait(self):
        deadline = time.monotonic() + LIMIT
        while time.monotonic() < deadline:
            readable, _, _ = select.select([self.connection], [], [], 0.05)
            if readable and self.connection.recv(1, socket.MSG_PEEK) == b"":
                note("wait: connection closed")
                self.close_connection = True
                return
        note("wait finished")
        self.ok()


if __name__ == "__main__":
    Server(sys.argv[1], Handler).serve_forever()
