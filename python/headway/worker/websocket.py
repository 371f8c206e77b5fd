"""The ASGI `websocket` scope. The front opens a connection of its own to the worker's unix socket
for each WebSocket handshake (its slots never carry one), so an ASGI worker started by the front
listens there, on its asyncio loop: a handshake is read, handed to the app as a `websocket` scope,
answered `101` (`websocket.accept`), `403` (`websocket.close` first) or with a response of the
app's own (the `websocket.http.response` extension: a denial with its status, headers and body),
and the frames that follow go through the native codec (`_native.WebSocketCodec`, tungstenite
underneath). An open socket holds no slot: it costs the worker a connection and a task on the loop.
"""

import asyncio
import os
import stat
import traceback
from collections.abc import Awaitable, Callable
from typing import Any

from headway import _native

from . import log
from .scope import App, Message, status_line

# The most a handshake's head may take, as for any request head.
MAX_HEAD = 64 * 1024
READ_BYTES = 64 * 1024
NORMAL_CLOSURE = 1000
ABNORMAL_CLOSURE = 1006
INTERNAL_ERROR = 1011


async def listen(path: str, serve_connection: Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
                 ) -> asyncio.AbstractServer:
    """Listens on the unix socket `path` (replacing a stale socket file) for handshakes."""
    try:
        if stat.S_ISSOCK(os.lstat(path).st_mode):
            os.unlink(path)
    except FileNotFoundError:
        pass
    return await asyncio.start_unix_server(serve_connection, path, limit=MAX_HEAD)


class WebSocket:
    """One handshake connection: the scope, and the app's `receive` and `send` for it."""

    def __init__(self, app: App, state: dict[str, Any], root_path: str, reader: asyncio.StreamReader,
                 writer: asyncio.StreamWriter) -> None:
        self.app, self.state, self.root_path = app, state, root_path
        self.reader, self.writer = reader, writer
        self.codec = _native.WebSocketCodec()
        self.events = asyncio.Queue()
        self.accepted = False
        self.answered = False  # the handshake got its 101 or its refusal
        self.closed = False  # a close frame went out, or the peer is gone
        self.pump = None
        self.denial = None  # (status, headers, body so far) once `websocket.http.response.start` came

    async def run(self) -> None:
        try:
            head = await self.reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            self.writer.close()
            return
        try:
            scope = self.scope(head[:-4])
        except ValueError as error:
            await self.refuse(400, str(error))
            return
        self.events.put_nowait({"type": "websocket.connect"})
        try:
            await self.app(scope, self.events.get, self.send)
            if self.denial is not None and not self.answered:
                log("the app returned in the middle of its denial response")
                await self.refuse(500)
            elif not self.answered:
                log("the app returned without accepting or closing a WebSocket")
                await self.refuse(403)
            elif not self.closed:
                await self.close_with(NORMAL_CLOSURE, "")
        except Exception:
            if not (self.closed and self.accepted):
                log("the app failed on a WebSocket:")
                traceback.print_exc()
            if not self.answered:
                await self.refuse(500)
            elif not self.closed:
                await self.close_with(INTERNAL_ERROR, "")
        finally:
            if self.pump is not None:
                self.pump.cancel()
            self.writer.close()

    def scope(self, head: bytes) -> dict[str, Any]:
        scope = _native.parse_scope("websocket", head, self.state, self.root_path)
        fields = scope["headers"]
        self.key = next((value for name, value in fields if name == b"sec-websocket-key"), None)
        if scope.pop("method") != "GET" or self.key is None:
            raise ValueError("not a WebSocket handshake")
        protocols = [value.decode("latin-1") for name, value in fields if name == b"sec-websocket-protocol"]
        scope["subprotocols"] = [item.strip() for value in protocols for item in value.split(",")]
        scope["extensions"] = {"websocket.http.response": {}}
        return scope

    async def send(self, message: Message) -> None:
        kind = message["type"]
        if self.denial is not None and not self.answered and kind != "websocket.http.response.body":
            raise RuntimeError(f"unexpected ASGI message {kind!r} in a denial response")
        if kind == "websocket.accept" and not self.answered:
            await self.accept(message)
        elif kind == "websocket.close" and not self.answered:
            await self.refuse(403)
        elif kind == "websocket.http.response.start" and not self.answered:
            self.denial = (message["status"], message.get("headers", ()), [])
        elif kind == "websocket.http.response.body" and self.denial is not None and not self.answered:
            self.denial[2].append(message.get("body", b""))
            if not message.get("more_body", False):
                await self.deny(*self.denial)
        elif kind == "websocket.close" and self.closed:
            pass  # the peer closed first, or left
        elif kind in ("websocket.send", "websocket.close") and self.accepted:
            if self.closed:
                raise ConnectionError("the WebSocket is closed")
            if kind == "websocket.close":
                await self.close_with(message.get("code", NORMAL_CLOSURE), message.get("reason") or "")
            elif message.get("bytes") is not None:
                self.codec.send_bytes(message["bytes"])
                await self.flush()
            else:
                self.codec.send_text(message["text"])
                await self.flush()
        else:
            raise RuntimeError(f"unexpected ASGI message {kind!r} on a WebSocket at this point")

    async def accept(self, message: Message) -> None:
        lines = [
            "HTTP/1.1 101 Switching Protocols",
            "Upgrade: websocket",
            "Connection: Upgrade",
            f"Sec-WebSocket-Accept: {_native.websocket_accept(self.key)}",
        ]
        if message.get("subprotocol"):
            lines.append(f"Sec-WebSocket-Protocol: {message['subprotocol']}")
        for name, value in message.get("headers", ()):
            lines.append(f"{name.decode('latin-1')}: {value.decode('latin-1')}")
        self.writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        self.answered = self.accepted = True
        self.pump = asyncio.ensure_future(self.read_frames())
        await self.writer.drain()

    async def refuse(self, status: int, message: str = "") -> None:
        """Answers the handshake with `status` instead of 101; the connection ends with it."""
        await self.deny(status, (), [f"{message}\n".encode()] if message else [])

    async def deny(self, status: int, headers: list[tuple[bytes, bytes]], body: bytes) -> None:
        """Answers the handshake with a response of `status`, the app's `headers` (its framing
        replaced by ours: the body is whole) and `body` (pieces); the connection ends with it."""
        self.answered = self.closed = True
        body = b"".join(body)
        framing = (b"content-length", b"transfer-encoding", b"connection")
        lines = [f"HTTP/1.1 {status_line(status)}".encode("latin-1")]
        lines += [bytes(name) + b": " + bytes(value) for name, value in headers if bytes(name).lower() not in framing]
        lines += [b"Content-Length: %d" % len(body), b"Connection: close"]
        self.writer.write(b"\r\n".join(lines) + b"\r\n\r\n" + body)
        try:
            await self.writer.drain()
        except ConnectionError:
            pass

    async def close_with(self, code: int, reason: str) -> None:
        self.codec.close(code, reason)
        self.closed = True
        try:
            await self.flush()
        except ConnectionError:
            pass

    async def flush(self) -> None:
        output = self.codec.output()
        if output:
            self.writer.write(output)
            await self.writer.drain()

    async def read_frames(self) -> None:
        """Turns what the peer sends into `websocket.receive` events, until it closes or leaves."""
        while True:
            try:
                data = await self.reader.read(READ_BYTES)
            except ConnectionError:
                data = b""
            if not data:
                self.closed = True
                self.events.put_nowait({"type": "websocket.disconnect", "code": ABNORMAL_CLOSURE, "reason": ""})
                return
            for kind, *payload in self.codec.feed(data):
                if kind == "close":
                    self.closed = True
                    code, reason = payload
                    self.events.put_nowait({"type": "websocket.disconnect", "code": code, "reason": reason})
                else:
                    self.events.put_nowait({"type": "websocket.receive", kind: payload[0]})
            try:
                await self.flush()  # pongs, and the answer to a close
            except ConnectionError:
                pass
            if self.closed:
                return
