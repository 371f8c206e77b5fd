"""PEP 3333 for the worker: the environ, start_response, wsgi.input and wsgi.file_wrapper.

The socket side of a response (when and how bytes are sent) lives in `connection`; this
module holds what the app sees and the checks PEP 3333 asks a server to make. Validated
status lines and header names are cached, so a well-behaved app pays for one dict lookup
per header on each request.
"""

import re
import sys
from urllib.parse import unquote_to_bytes

from .http import CACHE_ENTRIES, RECV_BYTES, TOKEN

_STATUS = re.compile(r"[1-9][0-9]{2} [^\r\n]*")
# PEP 3333: the app must not send hop-by-hop headers; framing is the server's job.
_HOP_BY_HOP = frozenset((
    "connection", "keep-alive", "proxy-authenticate", "proxy-authorization",
    "te", "trailer", "trailers", "transfer-encoding", "upgrade",
))

_ORDINARY, _CONTENT_LENGTH, _DATE = 1, 2, 3
_header_kinds = {"Content-Type": _ORDINARY, "Content-Length": _CONTENT_LENGTH}
_status_codes = {"200 OK": 200}


def _status_code(status):
    if type(status) is not str:
        raise TypeError(f"status must be a str such as '200 OK', not {type(status).__name__}")
    if not _STATUS.fullmatch(status):
        raise ValueError(f"bad status {status!r}: expected three digits, a space and a reason")
    status.encode("latin-1")
    code = int(status[:3])
    if len(_status_codes) < CACHE_ENTRIES:
        _status_codes[status] = code
    return code


def _header_kind(name):
    if type(name) is not str:
        raise TypeError(f"header name must be a str, not {type(name).__name__}")
    if not TOKEN.fullmatch(name):
        raise ValueError(f"bad header name {name!r}")
    lower = name.lower()
    if lower in _HOP_BY_HOP:
        raise ValueError(f"hop-by-hop header {name!r} is not allowed from a WSGI app (PEP 3333)")
    kind = {"content-length": _CONTENT_LENGTH, "date": _DATE}.get(lower, _ORDINARY)
    if len(_header_kinds) < CACHE_ENTRIES:
        _header_kinds[name] = kind
    return kind


def _content_length(value):
    if type(value) is not str or not (value.isdigit() and value.isascii()):
        raise ValueError(f"bad Content-Length header {value!r}")
    return int(value)


class StartResponse:
    """The state behind `start_response`: the validated status and headers of one response.

    The connection subclasses it to add `write` and the sending; `headers_sent` becomes
    True once the head is on the wire (after that exc_info re-raises, per PEP 3333).
    """

    __slots__ = ("status", "code", "header_block", "content_length", "has_date", "headers_sent")

    def __init__(self):
        self.status = None
        self.headers_sent = False

    def start_response(self, status, headers, exc_info=None):
        if exc_info is not None:
            try:
                if self.headers_sent:
                    raise exc_info[1].with_traceback(exc_info[2])
            finally:
                exc_info = None  # no reference cycle through the traceback
        elif self.status is not None:
            raise RuntimeError("start_response called a second time without exc_info")

        code = _status_codes.get(status) or _status_code(status)
        if type(headers) is not list:
            raise TypeError("response headers must be a list of (name, value) tuples")
        content_length = None
        has_date = False
        for header in headers:
            if type(header) is not tuple or len(header) != 2:
                raise TypeError(f"each response header must be a (name, value) tuple, not {header!r}")
            kind = _header_kinds.get(header[0]) or _header_kind(header[0])
            if kind == _CONTENT_LENGTH:
                length = _content_length(header[1])
                if content_length is not None and length != content_length:
                    raise ValueError("conflicting Content-Length headers")
                content_length = length
            elif kind == _DATE:
                has_date = True
        self.header_block = _encode_headers(headers)
        self.status = status
        self.code = code
        self.content_length = content_length
        self.has_date = has_date
        return self.write

    def write(self, data):
        raise NotImplementedError


def _encode_headers(headers):
    if not headers:
        return b""
    try:
        block = "\r\n".join(map(": ".join, headers))
    except TypeError:
        raise TypeError("response header values must be str") from None
    separators = len(headers) - 1
    if block.count("\n") != separators or block.count("\r") != separators:
        raise ValueError("a response header value contains CR or LF")
    try:
        return (block + "\r\n").encode("latin-1")
    except UnicodeEncodeError:
        raise ValueError("response headers must be latin-1 (PEP 3333)") from None


class InputStream:
    """wsgi.input: the request body, read lazily from the connection as the app asks.

    `body` is an http.FixedBody or http.ChunkedBody; `on_first_read` runs once before the
    first byte is read (it sends '100 Continue' when the client asked for it).
    """

    __slots__ = ("_body", "_buffer", "_on_first_read")

    def __init__(self, body, on_first_read=None):
        self._body = body
        self._buffer = b""
        self._on_first_read = on_first_read

    def _read_some(self, limit):
        if self._on_first_read is not None:
            hook, self._on_first_read = self._on_first_read, None
            hook()
        return self._body.read_some(limit)

    def read(self, size=-1):
        buffered = self._buffer
        if size is not None and 0 <= size <= len(buffered):
            self._buffer = buffered[size:]
            return buffered[:size]
        self._buffer = b""
        parts = [buffered]
        wanted = -1 if size is None or size < 0 else size - len(buffered)
        while wanted:
            data = self._read_some(RECV_BYTES if wanted < 0 else wanted)
            if not data:
                break
            parts.append(data)
            if wanted > 0:
                wanted -= len(data)
        return b"".join(parts)

    def readline(self, size=-1):
        limit = -1 if size is None or size < 0 else size
        buffered = self._buffer
        searched = 0
        while True:
            end = buffered.find(b"\n", searched) + 1  # 0: no newline yet
            if end or 0 <= limit <= len(buffered):
                break
            searched = len(buffered)
            data = self._read_some(RECV_BYTES)
            if not data:
                break
            buffered += data
        if not end:
            end = len(buffered)
        if 0 <= limit < end:
            end = limit
        self._buffer = buffered[end:]
        return buffered[:end]

    def readlines(self, hint=-1):
        lines = []
        total = 0
        for line in self:
            lines.append(line)
            total += len(line)
            if hint is not None and 0 < hint <= total:
                break
        return lines

    def __iter__(self):
        return self

    def __next__(self):
        line = self.readline()
        if not line:
            raise StopIteration
        return line


class FileWrapper:
    """wsgi.file_wrapper: lets the connection send a file with os.sendfile when it can.

    Iterating it reads blocks, which is what happens when the file has no fileno or the
    response has no Content-Length.
    """

    def __init__(self, filelike, blksize=64 * 1024):
        self.filelike = filelike
        self.blksize = blksize
        if hasattr(filelike, "close"):
            self.close = filelike.close

    def __iter__(self):
        read = self.filelike.read
        blksize = self.blksize
        while True:
            data = read(blksize)
            if not data:
                return
            yield data


def base_environ(threads, workers):
    """The environ keys that are the same for every request of this worker."""
    return {
        "SCRIPT_NAME": "",
        "SERVER_NAME": "localhost",
        "SERVER_PORT": "80",
        "SERVER_SOFTWARE": "headway",
        "REMOTE_ADDR": "",
        "wsgi.version": (1, 0),
        "wsgi.url_scheme": "http",
        "wsgi.errors": sys.stderr,
        "wsgi.multithread": threads > 1,
        "wsgi.multiprocess": workers > 1,
        "wsgi.run_once": False,
        "wsgi.input_terminated": True,
        "wsgi.file_wrapper": FileWrapper,
    }


def build_environ(base, request, wsgi_input):
    """The environ of one request: `base` plus what the request head says."""
    environ = base.copy()
    headers = request.headers
    environ.update(headers)
    path = request.path
    environ["REQUEST_METHOD"] = request.method
    environ["PATH_INFO"] = unquote_to_bytes(path).decode("latin-1") if "%" in path else path
    environ["QUERY_STRING"] = request.query
    environ["SERVER_PROTOCOL"] = request.version
    environ["wsgi.input"] = wsgi_input

    # The front appends the client address last: whatever came before it is the client's claim.
    forwarded_for = headers.get("HTTP_X_FORWARDED_FOR")
    if forwarded_for:
        environ["REMOTE_ADDR"] = forwarded_for.rpartition(",")[2].strip(" \t")
    proto = headers.get("HTTP_X_FORWARDED_PROTO")
    if proto is not None and proto != "http" and proto.rpartition(",")[2].strip(" \t").lower() == "https":
        environ["wsgi.url_scheme"] = "https"
        environ["SERVER_PORT"] = "443"
    host = headers.get("HTTP_HOST")
    if host:
        server = _servers.get(host) or _server_of_host(host)
        if server[0]:
            environ["SERVER_NAME"] = server[0]
        if server[1]:
            environ["SERVER_PORT"] = server[1]
    return environ


_servers = {}  # Host header -> (SERVER_NAME or "", SERVER_PORT or "")


def _server_of_host(host):
    if host[0] == "[":  # [IPv6]:port
        name, _, port = host[1:].partition("]")
        port = port[1:] if port[:1] == ":" else ""
    else:
        name, _, port = host.partition(":")
    server = (name, port if port.isdigit() and port.isascii() else "")
    if len(_servers) < CACHE_ENTRIES:
        _servers[host] = server
    return server
