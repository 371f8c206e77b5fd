"""A strict HTTP/1.1 response reader for the desync suite: it takes exactly what RFC 9112 allows a
server to send and raises `Malformed` on anything else, so that a response a lenient client would
shrug off (a bare LF, two lengths, a body longer than it says) fails the test instead."""

import re
from dataclasses import dataclass, field

STATUS_LINE = re.compile(rb"HTTP/1\.[01] ([1-9][0-9]{2}) [\t !-~\x80-\xff]*")
FIELD_NAME = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
FIELD_VALUE = re.compile(rb"[\t !-~\x80-\xff]*")
CHUNK_SIZE = re.compile(rb"[0-9A-Fa-f]{1,16}")


class Malformed(Exception):
    """What the server sent is not a well-framed response."""


class Cut(Malformed):
    """The connection ended inside a response (a body cut short: a client can tell). `head`: the
    response, without its body, when its head had arrived whole."""

    head = None


@dataclass
class Response:
    status: int
    headers: list = field(default_factory=list)
    body: bytes = b""

    def header(self, name):
        values = [value for key, value in self.headers if key == name]
        return ", ".join(values) if values else None

    @property
    def closes(self):
        return "close" in (self.header("connection") or "").lower()


class Stream:
    """The bytes a connection delivered, read on demand."""

    def __init__(self, sock):
        self.sock, self.buffer, self.ended = sock, b"", False

    def _fill(self):
        if self.ended:
            return False
        try:
            data = self.sock.recv(65536)
        except ConnectionResetError:
            data = b""
        if not data:
            self.ended = True
            return False
        self.buffer += data
        return True

    def line(self):
        while b"\n" not in self.buffer:
            if not self._fill():
                raise Cut(f"connection ended inside a line: {self.buffer[:80]!r}")
        line, _, self.buffer = self.buffer.partition(b"\n")
        if not line.endswith(b"\r") or b"\r" in line[:-1]:
            raise Malformed(f"a line not ended by CRLF, or with a bare CR: {line[:80]!r}")
        return line[:-1]

    def exactly(self, count):
        while len(self.buffer) < count:
            if not self._fill():
                raise Cut(f"connection ended {count - len(self.buffer)} bytes short of the body")
        data, self.buffer = self.buffer[:count], self.buffer[count:]
        return data

    def rest(self):
        while self._fill():
            pass
        data, self.buffer = self.buffer, b""
        return data

    def at_end(self):
        """Whether the connection ended with nothing left unread."""
        return not self.buffer and not self._fill()


def read_response(stream, method="GET"):
    """The next final response (1xx interim ones are read and dropped; a 101 is final)."""
    while True:
        response = _read_head(stream)
        if response.status >= 200 or response.status == 101:
            break
    lengths = [value for key, value in response.headers if key == "content-length"]
    codings = [value for key, value in response.headers if key == "transfer-encoding"]
    if lengths and codings:
        raise Malformed("both Content-Length and Transfer-Encoding")
    if response.status in (204, 304) or 100 <= response.status < 200:
        if codings or (response.status == 204 and lengths):
            raise Malformed(f"a {response.status} with a body length")
        return response
    if method == "HEAD":
        return response
    try:
        response.body = _read_body(stream, lengths, codings)
    except Cut as cut:
        cut.head = response
        raise
    return response


def _read_body(stream, lengths, codings):
    if codings:
        if ", ".join(codings).lower() != "chunked":
            raise Malformed(f"Transfer-Encoding {codings!r}")
        return _read_chunked(stream)
    if lengths:
        if len(set(lengths)) != 1 or not lengths[0].isdigit():
            raise Malformed(f"Content-Length {lengths!r}")
        return stream.exactly(int(lengths[0]))
    return stream.rest()  # close-delimited


def _read_head(stream):
    status_line = stream.line()
    match = STATUS_LINE.fullmatch(status_line)
    if not match:
        raise Malformed(f"status line {status_line[:80]!r}")
    response = Response(int(match[1]))
    while True:
        line = stream.line()
        if not line:
            return response
        if line[:1] in (b" ", b"\t"):
            raise Malformed(f"obs-fold: {line[:80]!r}")
        name, colon, value = line.partition(b":")
        if not colon or not FIELD_NAME.fullmatch(name) or not FIELD_VALUE.fullmatch(value):
            raise Malformed(f"field line {line[:80]!r}")
        response.headers.append((name.decode().lower(), value.strip(b" \t").decode("latin-1")))


def _read_chunked(stream):
    body = b""
    while True:
        size_line = stream.line()
        size, _, _extensions = size_line.partition(b";")
        if not CHUNK_SIZE.fullmatch(size):
            raise Malformed(f"chunk size {size_line[:80]!r}")
        size = int(size, 16)
        if size == 0:
            while stream.line():
                pass  # trailer fields
            return body
        body += stream.exactly(size)
        if stream.exactly(2) != b"\r\n":
            raise Malformed("chunk data not followed by CRLF")
