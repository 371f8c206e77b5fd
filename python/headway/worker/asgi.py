"""ASGI 3 in the bundled worker: telling an ASGI app from a WSGI one, the lifespan protocol, and
the task that calls the app for each request of the `http` scope, on an asyncio loop (uvloop when
it is installed).

Why this shape: the app's coroutines all run on one loop thread, which must never wait on a
client or a ring, and a worker with T slots never has more than T requests in the app: the front's
queue keeps the rest, in its order. Served by the front, over the hop, the loop claims requests and
does their I/O itself, natively (claims.rs, cycle.rs): the scope is built, and `receive` and
`send` done, without Python code of ours between the app and the ring; what would wait (a body
not there yet, a ring full of response) waits for the front to ring the loop's work bell, not on a
thread. A request that crossed to a slot thread and back three times, each crossing waiting for
the GIL, cost about three times the CPU. On its own unix socket, the native core's T slot threads
take connections and do their I/O, in calls that let go of the GIL while they wait; a request's
`receive` and `send` hand a small operation to the slot thread that took the request and await its
result (`SlotExchange`). WebSockets come on connections of their own and hold no slot
(websocket.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import inspect
import os
import queue
import sys
import threading
import traceback
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

from headway import _native

from . import log, websocket
from .scope import ASGI_VERSION, App, Message, Scope, status_line

T = TypeVar("T")

# How much of a file an `http.response.pathsend` reads at a time.
FILE_PIECE = 256 * 1024


def is_asgi(app: object) -> bool:
    """An ASGI 3 app is a coroutine function, or an object whose `__call__` is one (as uvicorn
    decides); anything else callable is taken for WSGI."""
    if inspect.isclass(app):
        return False  # an ASGI 2 "double callable", or a WSGI class: not ASGI 3
    return inspect.iscoroutinefunction(app) or inspect.iscoroutinefunction(type(app).__call__)


def new_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


def serve(app: App, path: str, threads: int, describe: str, root_path: str = "") -> int:
    """Runs the app's startup, serves until a stop signal, then runs its shutdown; returns the exit
    status. Raises `_native.StartupError` as `_native.serve` does. Started by the front (which
    passes the hop in $HEADWAY_HOP), the worker also takes WebSocket handshakes on `path`, ready
    before the front hears that the worker is."""
    server = Server(app, root_path)
    try:
        server.start(path if os.environ.get("HEADWAY_HOP") else None)
    except LifespanFailed as error:
        log(f"the app's startup failed: {error}")
        server.close()
        return 1
    except OSError as error:
        log(f"cannot listen on {path} for WebSocket handshakes: {error}")
        server.stop()
        return 1
    try:
        return _native.serve_asgi(server, path, threads, f"{describe} (ASGI)")
    finally:
        server.stop()


class LifespanFailed(Exception):
    """The app answered a lifespan event with `...failed`; the message is the app's."""


class Server:
    """The app, its loop (on a thread of its own) and its lifespan."""

    def __init__(self, app: App, root_path: str) -> None:
        self.app = app
        self.root_path = root_path  # --root-path, "" for none
        self.loop = new_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="headway-asgi-loop", daemon=True)
        self.lifespan = Lifespan(app)
        self.websockets = None  # the listener for handshakes, when there is one

    def start(self, websocket_path: str | None) -> None:
        self.thread.start()
        self.on_loop(self.lifespan.startup())
        if websocket_path:
            self.websockets = self.on_loop(websocket.listen(websocket_path, self.serve_websocket))
            self.websocket_socket = (websocket_path, os.stat(websocket_path).st_ino)

    def stop(self) -> None:
        try:
            if self.websockets is not None:
                self.loop.call_soon_threadsafe(self.websockets.close)
                path, inode = self.websocket_socket
                with contextlib.suppress(OSError):
                    if os.stat(path).st_ino == inode:  # a newer worker's socket is not ours to remove
                        os.unlink(path)
            self.on_loop(self.lifespan.shutdown())
        except LifespanFailed as error:
            log(f"the app's shutdown failed: {error}")
        finally:
            self.close()

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join()

    def on_loop(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Runs `coroutine` on the loop and waits for its result, from another thread."""
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result()

    async def serve_websocket(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await websocket.WebSocket(self.app, self.lifespan.state, self.root_path, reader, writer).run()

    def serve_channel(self, channel: _native.Channel) -> None:
        """Serves a transport's requests one after another; called on a slot thread."""
        while True:
            request = channel.next_request(self.lifespan.state, self.root_path)
            if request is None or not SlotExchange(self, channel, *request).run():
                return

    def serve_claims(self, claims: _native.Claims) -> None:
        """Started by the front: the loop serves the hop's requests itself (claims.rs)."""

        def start() -> None:
            claims.begin(self.serve_cycle, task_starter(self.loop), self.send_file, self.loop, self.lifespan.state,
                          self.root_path)
            self.loop.add_reader(claims.fileno(), claims.turn, True)
            claims.turn()  # and asks to be rung

        self.loop.call_soon_threadsafe(start)

    async def serve_cycle(self, scope: Scope, cycle: _native.HttpCycle) -> None:
        """One request from the hop: the app, with the cycle's native `receive` and `send`."""
        error = None
        try:
            await self.app(scope, cycle.receive, cycle.send)
        except Exception as raised:
            error = raised
        finally:
            cycle.finish(error)

    async def send_file(self, cycle: _native.HttpCycle, path: str) -> None:
        """The `http.response.pathsend` extension: the file at `path` is the whole body, read off
        the loop a piece at a time and sent as the app's body pieces would be."""
        await send_file(self.loop, path, lambda piece, more: cycle.send(
            {"type": "http.response.body", "body": piece, "more_body": more}))


def task_starter(loop: asyncio.AbstractEventLoop) -> Callable[[Coroutine[Any, Any, None]], asyncio.Task[None]]:
    """How the loop starts the task of a request: in a context of its own (a copy of the loop's,
    so that no request sees another's context variables), and where Python can (3.12+) eagerly: an
    app that needs to wait for nothing is done before the call returns, with no trip through the
    loop."""
    base = contextvars.copy_context()
    if sys.version_info >= (3, 12):
        def start(coroutine: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
            return asyncio.Task(coroutine, loop=loop, context=base.copy(), eager_start=True)
    elif sys.version_info >= (3, 11):
        def start(coroutine: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
            return loop.create_task(coroutine, context=base.copy())
    else:
        def start(coroutine: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
            return base.copy().run(loop.create_task, coroutine)
    return start


async def send_file(loop: asyncio.AbstractEventLoop, path: str,
                    send_body: Callable[[bytes, bool], Awaitable[None]]) -> None:
    """Reads the file at `path` off the loop, a piece at a time, and awaits `send_body(piece,
    more)` for each (the last with more false)."""
    with open(path, "rb") as file:
        piece = await loop.run_in_executor(None, file.read, FILE_PIECE)
        while True:
            following = await loop.run_in_executor(None, file.read, FILE_PIECE) if piece else b""
            await send_body(piece, bool(following))
            if not following:
                return
            piece = following


class Lifespan:
    """The `lifespan` scope: startup completes before the worker tells the front it is ready, and
    shutdown runs once the worker has drained. An app that raises on this scope before answering
    startup does not support it, and is served without it (uvicorn's "auto")."""

    def __init__(self, app: App) -> None:
        self.app = app
        self.state = {}
        self.task = None

    async def startup(self) -> None:
        self.events = asyncio.Queue()
        self.started = asyncio.get_running_loop().create_future()
        self.stopped = asyncio.get_running_loop().create_future()
        self.task = asyncio.ensure_future(self.run())
        self.events.put_nowait({"type": "lifespan.startup"})
        await self.started

    async def shutdown(self) -> None:
        if self.task is None or self.task.done():
            return
        self.events.put_nowait({"type": "lifespan.shutdown"})
        await self.stopped

    async def run(self) -> None:
        scope = {"type": "lifespan", "asgi": ASGI_VERSION, "state": self.state}
        try:
            await self.app(scope, self.events.get, self.send)
        except Exception as error:
            if not self.started.done():
                log(f"the app does not support the lifespan protocol ({error!r}); serving without it")
                self.started.set_result(None)
            elif not self.stopped.done() and self.started.exception() is None:
                self.stopped.set_exception(LifespanFailed(f"{type(error).__name__}: {error}"))
        finally:
            # An app that returns without answering has nothing more to do at that step.
            for step in (self.started, self.stopped):
                if not step.done():
                    step.set_result(None)

    async def send(self, message: Message) -> None:
        kind = message["type"]
        step = {"lifespan.startup": self.started, "lifespan.shutdown": self.stopped}.get(kind.rpartition(".")[0])
        if step is None or kind.rpartition(".")[2] not in ("complete", "failed"):
            raise RuntimeError(f"unexpected ASGI message {kind!r} in the lifespan scope")
        if step.done():
            return
        if kind.endswith(".failed"):
            step.set_exception(LifespanFailed(message.get("message") or "no message"))
        else:
            step.set_result(None)


class SlotExchange:
    """One request of the `http` scope on the worker's own socket, served by the slot thread that
    took its connection: `run` is that thread's side; it starts the app on the loop and carries
    out the app's reads and sends until the app is done."""

    def __init__(self, server: Server, channel: _native.Channel, scope: Scope, has_body: bool) -> None:
        self.server, self.channel, self.loop = server, channel, server.loop
        self.scope = scope
        self.body_left = has_body
        self.request_read = False
        self.start = None  # the `http.response.start` message, sent with the first body piece
        self.head_sent = False
        self.complete = False
        self.disconnected = False
        self.over = False
        # Set when the exchange ends (complete, client gone, app returned), for a `receive` that
        # waits for that; made only then, as most apps never call it.
        self.finished = None
        self.operations = queue.SimpleQueue()

    def run(self) -> bool:
        """Returns whether the channel can carry another request."""
        done = asyncio.run_coroutine_threadsafe(self.call_app(), self.loop)
        done.add_done_callback(lambda _: self.operations.put(None))
        while True:
            operation = self.operations.get()
            if operation is None:
                break
            function, args, waiter = operation
            try:
                result, error = function(*args), None
            except Exception as raised:
                result, error = None, raised
            self.loop.call_soon_threadsafe(settle, waiter, result, error)
        try:
            if not self.complete:
                self.channel.fail()  # the exchange must end even if the client is gone
                return False
            return self.channel.finish() and not self.disconnected
        except OSError:
            return False  # the client left while we ended the exchange

    async def io(self, function: Callable[..., T], *args: Any) -> T:
        """Has the slot thread run `function(*args)`, and waits for its result."""
        if self.over:
            raise RuntimeError("the request this belongs to is over")
        waiter = self.loop.create_future()
        self.operations.put((function, args, waiter))
        return await waiter

    async def call_app(self) -> None:
        try:
            await self.server.app(self.scope, self.receive, self.send)
            if not self.complete and not self.disconnected:
                log("the app returned without completing its response")
        except Exception:
            if not self.disconnected:
                log("the app failed:")
                traceback.print_exc()
        finally:
            self.over = True
            self.end()

    async def receive(self) -> Message:
        if not self.request_read:
            if not self.body_left:
                self.request_read = True
                return {"type": "http.request", "body": b"", "more_body": False}
            try:
                body, self.body_left = await self.io(self.channel.read)
            except ConnectionError:
                self.gone()
                return {"type": "http.disconnect"}
            self.request_read = not self.body_left
            return {"type": "http.request", "body": body, "more_body": self.body_left}
        # Nothing more comes from the client: what is left to tell is that the exchange ended.
        if not (self.complete or self.disconnected or self.over):
            if self.finished is None:
                self.finished = asyncio.Event()
            await self.finished.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: Message) -> None:
        kind = message["type"]
        if self.disconnected:
            raise ConnectionError("the client is gone")
        if self.complete:
            raise RuntimeError(f"unexpected ASGI message {kind!r} after the response was complete")
        if kind == "http.response.start":
            if self.start is not None:
                raise RuntimeError("http.response.start sent twice")
            headers = [(name.decode("latin-1"), value.decode("latin-1")) for name, value in message.get("headers", ())]
            self.start = (status_line(message["status"]), headers)
        elif kind == "http.response.body":
            if self.start is None:
                raise RuntimeError("http.response.body before http.response.start")
            await self.send_body(message.get("body", b""), message.get("more_body", False))
        elif kind == "http.response.pathsend":
            if self.start is None or self.head_sent:
                raise RuntimeError("http.response.pathsend must follow http.response.start, alone")
            await send_file(self.loop, message["path"], self.send_body)
        else:
            raise RuntimeError(f"unexpected ASGI message {kind!r} in an http scope")

    async def send_body(self, body: bytes, more: bool) -> None:
        try:
            if self.head_sent:
                await self.io(self.channel.send, body, more)
            else:
                await self.io(self.channel.respond, *self.start, body, more)
                self.head_sent = True
        except OSError:
            self.gone()
            raise
        if not more:
            self.complete = True
            self.end()

    def gone(self) -> None:
        """The client has gone: `receive` says `http.disconnect`, and `send` raises."""
        self.disconnected = True
        self.end()

    def end(self) -> None:
        """Wakes a `receive` waiting for the exchange to end."""
        if self.finished is not None:
            self.finished.set()


def settle(waiter: asyncio.Future[T], result: T, error: BaseException | None) -> None:
    if waiter.cancelled():
        return
    if error is None:
        waiter.set_result(result)
    else:
        waiter.set_exception(error)
