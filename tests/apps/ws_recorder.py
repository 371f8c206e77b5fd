"""A `--cmd` WebSocket worker that answers nothing and notes every frame that reaches it, for the
tests of what the front lets through: serves on the unix socket given as argv[1].

- a WebSocket handshake: `101`, then the socket is read to its end, each frame noted as
  `[opcode, fin, reserved bits, payload length]` (a close frame with its code after them);
- GET `/frames`: the frames of every socket that has ended, one list per socket, as JSON;
- anything else: 200 "ok".
"""

import base64
import hashlib
import json
import struct
import sys
import threading

from unix_http import OkHandler, Server

GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
_ended = []
_lock = threading.Lock()


class Handler(OkHandler):
    def do_GET(self):
        if self.headers.get("Upgrade", "").lower() == "websocket":
            self.record()
        elif self.path == "/frames":
            with _lock:
                body = json.dumps(_ended).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        else:
            self.ok()

    def record(self):
        accept = base64.b64encode(hashlib.sha1(self.headers["Sec-WebSocket-Key"].encode() + GUID).digest())
        self.wfile.write(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                         b"Sec-WebSocket-Accept: " + accept + b"\r\n\r\n")
        self.wfile.flush()
        self.close_connection = True
        received = b""
        while piece := self.rfile.read1(65536):
            received += piece
        with _lock:
            _ended.append(frames_of(received))


def frames_of(data):
    """The frames in `data`, as the module comment says; a frame cut short is noted as it came."""
    frames, at = [], 0
    while at + 2 <= len(data):
        first, second = data[at], data[at + 1]
        length, at = second & 0x7F, at + 2
        if length >= 126:
            size = 2 if length == 126 else 8
            length = int.from_bytes(data[at:at + size], "big")
            at += size
        mask = data[at:at + 4] if second & 0x80 else b"\0\0\0\0"
        at += 4 if second & 0x80 else 0
        payload = bytes(byte ^ mask[i % 4] for i, byte in enumerate(data[at:at + min(length, 2)]))
        frame = [first & 0x0F, bool(first & 0x80), first & 0x70, length]
        if first & 0x0F == 0x8 and len(payload) == 2:
            frame.append(struct.unpack("!H", payload)[0])
        frames.append(frame)
        at += length
    return frames


if __name__ == "__main__":
    Server(sys.argv[1], Handler).serve_forever()
