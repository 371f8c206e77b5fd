"""HTTP/1.1 for the worker, without sockets: request parsing, body decoding, response framing.

Everything here works on bytes handed to it (or pulled through a `recv` callable), so the
parsing and framing rules can be unit tested without a server. The hot path of a small
keep-alive request is: `Reader.read_head` -> `parse_request` -> (app) -> `status_line`,
`date_line`, `content_length_line` joined into one head. Caches of already-validated
names keep the per-request Python work small; each cache is bounded so that a peer
sending endless new names cannot grow memory.
"""

import re
import time
from email.utils import formatdate

# Limits on what a peer may send us. The headway front enforces its own (smaller) limits;
# these protect the worker when it is used directly.
MAX_HEAD_BYTES = 64 * 1024
MAX_HEADERS = 100
MAX_LINE_BYTES = 8 * 1024  # a chunk-size line or a trailer line
RECV_BYTES = 64 * 1024
CACHE_ENTRIES = 512

TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_HTTP_VERSION = re.compile(r"HTTP/[0-9]\.[0-9]")
_HEX = re.compile(r"[0-9A-Fa-f]{1,15}")

# Headers that may legitimately arrive several times but must be joined with a
# different separator than ', ' (RFC 6265: a Cookie list is separated by '; ').
_JOIN_SEPARATOR = {"HTTP_COOKIE": "; "}

# Request header name (as received) -> CGI environ key; None marks names we drop
# (a name with '_' could impersonate a '-' header such as X-Forwarded-For).
_environ_keys = {"Content-Type": "CONTENT_TYPE", "Content-Length": "CONTENT_LENGTH"}
_known_methods = {"GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE", "CONNECT"}


class HTTPError(Exception):
    """A request the worker refuses: answered with `status` and `message`, then closed."""

    def __init__(self, status, message):
        super().__init__(message)
        self.status = status
        self.message = message


class PeerClosed(ConnectionError):
    """The peer closed the connection in the middle of a request (an app reading
    wsgi.input sees it as the ConnectionError it is)."""


class Request:
    """The parsed head of one request. `headers` maps CGI environ keys to str values."""

    __slots__ = (
        "method", "target", "path", "query", "version", "headers",
        "keep_alive", "content_length", "chunked", "expect_continue",
    )


def _environ_key(name):
    """Validate a header name and return its CGI key (None: drop the header)."""
    if not TOKEN.fullmatch(name):
        raise HTTPError(400, "bad header name")
    key = None if "_" in name else "HTTP_" + name.upper().replace("-", "_")
    if key in ("HTTP_CONTENT_TYPE", "HTTP_CONTENT_LENGTH"):
        key = key[5:]
    if len(_environ_keys) < CACHE_ENTRIES:
        _environ_keys[name] = key
    return key


def _split_other_target(target):
    """(path, query) of an asterisk-form or absolute-form (RFC 9112 3.2) request target."""
    if target == "*":
        return "", ""
    scheme, sep, rest = target.partition("://")
    if not sep or not TOKEN.fullmatch(scheme):
        raise HTTPError(400, "bad request target")
    slash = rest.find("/")
    path, _, query = (rest[slash:] if slash >= 0 else "/").partition("?")
    return path, query


def parse_request(head):
    """Parse a request head (bytes up to, not including, the blank line) into a Request.

    Raises HTTPError for anything malformed or unsupported.
    """
    text = head.decode("latin-1")
    lines = text.split("\r\n")
    # A CR or LF that is not part of a CRLF, or a NUL, anywhere in the head is an attack or a bug.
    if text.count("\n") != len(lines) - 1 or text.count("\r") != len(lines) - 1 or "\x00" in text:
        raise HTTPError(400, "bad characters in request head")
    parts = lines[0].split(" ")
    if len(parts) != 3:
        raise HTTPError(400, "bad request line")
    method, target, version = parts
    if method not in _known_methods and not TOKEN.fullmatch(method):
        raise HTTPError(400, "bad method")
    if version == "HTTP/1.1":
        keep_alive = True
    elif version == "HTTP/1.0":
        keep_alive = False
    elif _HTTP_VERSION.fullmatch(version):
        raise HTTPError(505, "HTTP version not supported")
    else:
        raise HTTPError(400, "bad request line")
    if target[:1] == "/":
        path, _, query = target.partition("?")
    elif target:
        path, query = _split_other_target(target)
    else:
        raise HTTPError(400, "bad request target")
    if len(lines) > MAX_HEADERS + 1:
        raise HTTPError(431, "too many headers")

    headers = {}
    content_length = None
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep:
            raise HTTPError(400, "bad header line")
        key = _environ_keys.get(name, 0)
        if key == 0:
            key = _environ_key(name)  # rejects obs-fold and "Name :" (spaces are not token chars)
        if key is None:
            continue
        value = value.strip(" \t")
        if key == "CONTENT_LENGTH":
            if not (value.isdigit() and value.isascii()) or len(value) > 18:
                raise HTTPError(400, "bad Content-Length")
            if content_length is not None and int(value) != content_length:
                raise HTTPError(400, "conflicting Content-Length headers")
            content_length = int(value)
            headers[key] = value
        elif key in headers:
            headers[key] += _JOIN_SEPARATOR.get(key, ", ") + value
        else:
            headers[key] = value

    request = Request()
    request.method = method
    request.target = target
    request.version = version
    request.headers = headers
    request.content_length = content_length
    request.path = path
    request.query = query

    connection = headers.get("HTTP_CONNECTION")
    if connection is not None:
        tokens = connection.lower()
        if "close" in tokens and "close" in _tokens(tokens):
            keep_alive = False
        elif not keep_alive and "keep-alive" in _tokens(tokens):
            keep_alive = True
    request.keep_alive = keep_alive

    coding = headers.get("HTTP_TRANSFER_ENCODING")
    request.chunked = coding is not None
    if coding is not None:
        if coding.lower() != "chunked":
            raise HTTPError(501, "unsupported Transfer-Encoding")
        if content_length is not None:
            raise HTTPError(400, "both Content-Length and Transfer-Encoding")

    expect = headers.get("HTTP_EXPECT")
    request.expect_continue = False
    if expect is not None:
        if expect.lower() != "100-continue":
            raise HTTPError(417, "unsupported Expect")
        request.expect_continue = version == "HTTP/1.1"
    return request


def _tokens(header_value):
    return [token.strip(" \t") for token in header_value.split(",")]


class Reader:
    """Bytes from a connection: `recv(n)` returns up to n bytes, b'' once the peer closed.

    Whatever was received but not yet consumed stays in `pending`, so a pipelined request
    or the bytes after a chunked body are never lost.
    """

    __slots__ = ("_recv", "pending")

    def __init__(self, recv, pending=b""):
        self._recv = recv
        self.pending = pending

    def _fill(self):
        data = self._recv(RECV_BYTES)
        if not data:
            return False
        self.pending = self.pending + data if self.pending else data
        return True

    def read_head(self):
        """Return the next request head (without the blank line), None on a clean close."""
        data = self.pending
        while True:
            if data[:2] == b"\r\n":  # RFC 9112 2.2: ignore empty lines before a request
                data = self.pending = data.lstrip(b"\r\n")
            end = data.find(b"\r\n\r\n")
            if end >= 0:
                break
            if len(data) > MAX_HEAD_BYTES:
                raise HTTPError(431, "request head too large")
            if not self._fill():
                if data:
                    raise PeerClosed()
                return None
            data = self.pending
        if end > MAX_HEAD_BYTES:
            raise HTTPError(431, "request head too large")
        self.pending = data[end + 4:]
        return data[:end]

    def read_some(self, limit):
        """Up to `limit` bytes (at least one), b'' if the peer closed."""
        if not self.pending and not self._fill():
            return b""
        data = self.pending
        if len(data) <= limit:
            self.pending = b""
            return data
        self.pending = data[limit:]
        return data[:limit]

    def read_line(self):
        """One CRLF-terminated line without its CRLF; HTTPError if too long, PeerClosed on EOF."""
        end = self.pending.find(b"\r\n")
        while end < 0:
            if len(self.pending) > MAX_LINE_BYTES:
                raise HTTPError(400, "line too long in chunked body")
            if not self._fill():
                raise PeerClosed()
            end = self.pending.find(b"\r\n")
        line = self.pending[:end]
        self.pending = self.pending[end + 2:]
        return line


class FixedBody:
    """A body of exactly `length` bytes (Content-Length)."""

    __slots__ = ("_reader", "remaining")

    def __init__(self, reader, length):
        self._reader = reader
        self.remaining = length

    def read_some(self, limit):
        """Up to `limit` bytes of the body; b'' at its end. PeerClosed if it was cut short."""
        if self.remaining == 0:
            return b""
        data = self._reader.read_some(min(limit, self.remaining))
        if not data:
            raise PeerClosed()
        self.remaining -= len(data)
        return data

    def too_large_to_drain(self, limit):
        return self.remaining > limit

    def drain(self, limit):
        """Discard the unread rest if it is at most `limit` bytes; True if the body is done."""
        if self.remaining > limit:
            return False
        while self.remaining:
            self.read_some(RECV_BYTES)
        return True


class ChunkedBody:
    """A `Transfer-Encoding: chunked` body, decoded as it is read (trailers are discarded)."""

    __slots__ = ("_reader", "_chunk_left", "_done")

    def __init__(self, reader):
        self._reader = reader
        self._chunk_left = 0
        self._done = False

    def read_some(self, limit):
        while not self._done:
            if self._chunk_left:
                data = self._reader.read_some(min(limit, self._chunk_left))
                if not data:
                    raise PeerClosed()
                self._chunk_left -= len(data)
                if not self._chunk_left and self._reader.read_line() != b"":
                    raise HTTPError(400, "bad chunk: data longer than its size")
                return data
            size = self._reader.read_line().split(b";", 1)[0].strip(b" \t")
            if not _HEX.fullmatch(size.decode("latin-1")):
                raise HTTPError(400, "bad chunk size")
            self._chunk_left = int(size, 16)
            if not self._chunk_left:
                self._skip_trailers()
        return b""

    def _skip_trailers(self):
        for _ in range(MAX_HEADERS + 1):
            if self._reader.read_line() == b"":
                self._done = True
                return
        raise HTTPError(431, "too many trailers")

    def too_large_to_drain(self, limit):
        return False  # unknown until it is read: drain() finds out

    def drain(self, limit):
        """Discard the unread rest if it is at most `limit` bytes; True if the body is done."""
        while limit >= 0:
            data = self.read_some(RECV_BYTES)
            if not data:
                return True
            limit -= len(data)
        return False


# --- response framing ------------------------------------------------------------------

_status_lines = {}


def status_line(status):
    """b'HTTP/1.1 <status>\\r\\n' for a status str already validated by the caller."""
    line = _status_lines.get(status)
    if line is None:
        line = b"HTTP/1.1 " + status.encode("latin-1") + b"\r\n"
        if len(_status_lines) < CACHE_ENTRIES:
            _status_lines[status] = line
    return line


_date = [0, b""]


def date_line():
    """The `Date:` header line, formatted at most once a second."""
    now = int(time.time())
    if _date[0] != now:
        _date[1] = b"Date: " + formatdate(now, usegmt=True).encode("ascii") + b"\r\n"
        _date[0] = now
    return _date[1]


def content_length_line(length):
    return b"Content-Length: %d\r\n" % length


CHUNKED_LINE = b"Transfer-Encoding: chunked\r\n"
CLOSE_LINE = b"Connection: close\r\n"
KEEP_ALIVE_LINE = b"Connection: keep-alive\r\n"
LAST_CHUNK = b"0\r\n\r\n"
CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"


def chunk(data):
    """One chunk of a chunked body (data must not be empty: that would end the body)."""
    return b"%x\r\n%b\r\n" % (len(data), data)


def has_body(method, code):
    """False when the response must not carry a body (RFC 9110 6.4.1)."""
    return method != "HEAD" and code >= 200 and code != 204 and code != 304


_REASONS = {
    400: "Bad Request", 417: "Expectation Failed", 431: "Request Header Fields Too Large",
    500: "Internal Server Error", 501: "Not Implemented", 505: "HTTP Version Not Supported",
}


def error_response(status, message, with_body=True):
    """A complete short plain-text response for an error the worker answers itself; the
    connection is closed after it (with_body=False answers a HEAD request)."""
    body = message.encode("latin-1", "replace") + b"\n"
    return b"".join((
        status_line(f"{status} {_REASONS[status]}"),
        date_line(),
        b"Content-Type: text/plain; charset=utf-8\r\n",
        content_length_line(len(body)),
        CLOSE_LINE,
        b"\r\n",
        body if with_body else b"",
    ))
