"""An HTTP/1.1 worker for `--cmd` tests of replacing a worker: serves on the unix socket given as
argv[1], answering every request with its pid and that socket as JSON. It takes two seconds to
start listening once the file given as argv[2] exists, as a large app takes to boot."""

import json
import os
import sys
import time

from unix_http import OkHandler, Server

SOCKET, SLOW = sys.argv[1], sys.argv[2]


class Handler(OkHandler):
    def do_GET(self):
        body = json.dumps({"pid": os.getpid(), "socket": SOCKET}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


if os.path.exists(SLOW):
    time.sleep(2)
Server(SOCKET, Handler).serve_forever()
