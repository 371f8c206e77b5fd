"""One slot's connection: read a request, run the WSGI app, write the response, repeat.

A connection carries one request at a time (the headway front never pipelines to a slot,
but a direct client may: leftover bytes simply wait in the reader). The response is framed
here: the app's Content-Length if it gave one, a computed one when the body is a list,
chunked otherwise (close-delimited for HTTP/1.0). A small response leaves in one send.
"""

import io
import sys
import traceback

from . import log
from .http import (
    CHUNKED_LINE,
    CLOSE_LINE,
    CONTINUE,
    KEEP_ALIVE_LINE,
    LAST_CHUNK,
    ChunkedBody,
    FixedBody,
    HTTPError,
    PeerClosed,
    Reader,
    chunk,
    content_length_line,
    date_line,
    error_response,
    parse_request,
    status_line,
)
from .wsgi import FileWrapper, InputStream, StartResponse, build_environ

# An unread request body up to this size is read and dropped after the response so the
# connection can be kept; a larger one costs more than reconnecting, so we close instead.
DRAIN_LIMIT = 1024 * 1024
# Up to this size, head and body are joined into one bytes and sent with one syscall.
JOIN_LIMIT = 256 * 1024

# How the body of a response is delimited.
_LENGTH, _CHUNKED, _UNTIL_CLOSE, _NO_BODY = range(4)


class Response(StartResponse):
    """start_response, write and the sending of one response on the connection's socket."""

    __slots__ = ("_sock", "_request", "_body", "_slot", "keep_alive", "continue_sent", "broken",
                 "_mode", "_remaining", "_overflowed")

    def __init__(self, sock, request, body, slot):
        self.status = None
        self.headers_sent = False
        self._sock = sock
        self._request = request
        self._body = body  # the request body still on the socket, or None
        self._slot = slot  # knows whether the worker is stopping
        self.keep_alive = request.keep_alive
        self.continue_sent = False
        self.broken = False

    def _sendall(self, data):
        try:
            self._sock.sendall(data)
        except OSError:
            self.broken = True
            raise

    def _head(self, body_length):
        """The response head; body_length is the whole body's size when it is known."""
        code = self.code
        request = self._request
        parts = [status_line(self.status), self.header_block]
        if not self.has_date:
            parts.append(date_line())
        length = self.content_length
        if code < 200 or code == 204 or code == 304:
            self._mode = _NO_BODY
        elif request.method == "HEAD":
            self._mode = _NO_BODY
            if length is None and body_length is not None:
                parts.append(content_length_line(body_length))  # what a GET would get
        elif length is not None:
            self._mode = _LENGTH
            self._remaining = length
            self._overflowed = False
        elif body_length is not None:
            self._mode = _LENGTH
            self._remaining = body_length
            self._overflowed = False
            parts.append(content_length_line(body_length))
        elif request.version == "HTTP/1.1":
            self._mode = _CHUNKED
            parts.append(CHUNKED_LINE)
        else:
            self._mode = _UNTIL_CLOSE
            self.keep_alive = False
        if (self._body is not None and not self._body_can_be_finished()) or self._slot.stopping():
            self.keep_alive = False
        if not self.keep_alive:
            parts.append(CLOSE_LINE)
        elif request.version == "HTTP/1.0":
            parts.append(KEEP_ALIVE_LINE)
        parts.append(b"\r\n")
        self.headers_sent = True
        return b"".join(parts)

    def _body_can_be_finished(self):
        """Whether the unread request body can be drained after this response."""
        if self._request.expect_continue and not self.continue_sent:
            return False  # the client may be waiting for '100 Continue' before it sends it
        return not self._body.too_large_to_drain(DRAIN_LIMIT)

    def _frame(self, data):
        """The bytes that carry `data` on the wire under the response's framing."""
        mode = self._mode
        if mode == _LENGTH:
            if len(data) > self._remaining:
                if not self._overflowed:
                    self._overflowed = True
                    log(f"app sent more bytes than its Content-Length ({self.content_length}); the rest is dropped")
                data = data[:self._remaining]
            self._remaining -= len(data)
            return data
        if mode == _CHUNKED:
            return chunk(data) if data else b""
        if mode == _NO_BODY:
            return b""
        return data

    def _send(self, head, data):
        data = self._frame(data)
        if not data and not head:
            return
        if len(head) + len(data) <= JOIN_LIMIT:
            self._sendall(head + data)
        else:
            if head:
                self._sendall(head)
            self._sendall(data)

    def write(self, data):
        """The write() callable of start_response; also sends each item of the app's iterable."""
        if type(data) is not bytes:
            raise TypeError(f"a WSGI response body must be bytes, not {type(data).__name__}")
        if self.status is None:
            raise RuntimeError("the app sent body bytes before calling start_response")
        if self.headers_sent:
            if data:
                self._send(b"", data)
        elif data:  # PEP 3333: the head waits for the first non-empty body bytes
            self._send(self._head(None), data)

    def send_continue(self):
        """Answer 'Expect: 100-continue' when the app first reads the body."""
        if not self.headers_sent and not self.continue_sent:
            self.continue_sent = True
            self._sendall(CONTINUE)

    def send_result(self, result):
        """Send the iterable the app returned, then end the response."""
        if type(result) is list or type(result) is tuple:
            if not self.headers_sent:
                self._send_sequence(result)
                return
        elif type(result) is FileWrapper and self._sendfile(result):
            self._end()
            return
        write = self.write
        for data in result:
            write(data)
        self._end()

    def _send_sequence(self, result):
        """A list of bytes: its size is known, so it gets a Content-Length and one send."""
        if self.status is None:
            raise RuntimeError("the app returned without calling start_response")
        total = 0
        for data in result:
            if type(data) is not bytes:
                raise TypeError(f"a WSGI response body must be bytes, not {type(data).__name__}")
            total += len(data)
        body = result[0] if len(result) == 1 else b"".join(result)
        self._send(self._head(total), body)
        self._end()

    def _sendfile(self, wrapper):
        """Send a wsgi.file_wrapper with os.sendfile; False if that is not possible."""
        if self.headers_sent or self.status is None or self.content_length is None:
            return False
        filelike = wrapper.filelike
        try:
            filelike.fileno()
            offset = filelike.tell()
        except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is both
            return False
        self._sendall(self._head(None))
        if self._mode == _LENGTH and self._remaining:
            try:
                sent = self._sock.sendfile(filelike, offset, self._remaining)
            except OSError:
                self.broken = True
                raise
            self._remaining -= sent
        return True

    def _end(self):
        if not self.headers_sent:
            if self.status is None:
                raise RuntimeError("the app returned without calling start_response")
            self._send(self._head(0), b"")
        mode = self._mode
        if mode == _CHUNKED:
            self._sendall(LAST_CHUNK)
        elif mode == _LENGTH and self._remaining:
            log(f"app sent {self._remaining} bytes fewer than its Content-Length ({self.content_length}); "
                "closing the connection")
            self.keep_alive = False


class Connection:
    """Serves the requests of one accepted connection until it closes."""

    __slots__ = ("_sock", "_app", "_base_environ", "_slot")

    def __init__(self, sock, app, base_environ, slot):
        self._sock = sock
        self._app = app
        self._base_environ = base_environ
        self._slot = slot  # tells the server whether we are between requests

    def serve(self):
        reader = Reader(self._sock.recv)
        slot = self._slot
        while True:
            slot.idle = True
            if slot.stopping():
                return
            try:
                head = reader.read_head()
                if head is None:
                    return
                slot.idle = False
                request = parse_request(head)
            except HTTPError as error:
                self._reply_error(error, "GET")
                return
            except (PeerClosed, OSError):
                return
            if not self._handle(request, reader):
                return

    def _reply_error(self, error, method):
        try:
            self._sock.sendall(error_response(error.status, error.message, method != "HEAD"))
        except OSError:
            pass  # the peer is gone; there is nobody left to tell

    def _handle(self, request, reader):
        """Run the app for one request; True if the connection can carry another."""
        body = None
        length = request.content_length
        if request.chunked:
            body = ChunkedBody(reader)
        elif not length:
            wsgi_input = io.BytesIO()
        elif length <= len(reader.pending) and not request.expect_continue:
            wsgi_input = io.BytesIO(reader.read_some(length))  # the whole body is already here
        else:
            body = FixedBody(reader, length)
        response = Response(self._sock, request, body, self._slot)
        if body is not None:
            wsgi_input = InputStream(body, response.send_continue if request.expect_continue else None)

        result = None
        try:
            result = self._app(build_environ(self._base_environ, request, wsgi_input),
                               response.start_response)
            response.send_result(result)
        except Exception as error:
            self._app_failed(error, request, response)
            return False
        finally:
            if hasattr(result, "close"):
                self._close_result(result)

        if not response.keep_alive:
            return False
        if body is not None:
            try:
                return body.drain(DRAIN_LIMIT)
            except (HTTPError, PeerClosed, OSError):
                return False
        return True

    def _app_failed(self, error, request, response):
        """Answer for an exception out of the app (the connection is closed after it)."""
        if response.broken or isinstance(error, PeerClosed):
            return  # the client went away: nothing to answer
        if isinstance(error, HTTPError):  # a malformed chunked body, met while the app read it
            if not response.headers_sent:
                self._reply_error(error, request.method)
            return
        _print_traceback(error)
        if response.headers_sent:
            log("the app failed after the response started; closing the connection")
        else:
            self._reply_error(HTTPError(500, "Internal Server Error"), request.method)

    @staticmethod
    def _close_result(result):
        try:
            result.close()
        except Exception as error:
            log("the app's iterable failed in close():")
            _print_traceback(error)


def _print_traceback(error):
    traceback.print_exception(type(error), error, error.__traceback__, file=sys.stderr)
