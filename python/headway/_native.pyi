"""What `headway._native` (crates/extension, registering crates/worker's types) exports: the
`headway` command, the bundled worker's serving loops, and the native halves of its WSGI and ASGI
protocols. Only the Python side of the worker calls the classes; an app sees them as the objects
of its protocol (`wsgi.file_wrapper`, ASGI's `receive` and `send`)."""

from collections.abc import Awaitable, Callable, Coroutine, Generator
from os import PathLike
from typing import Any

ASGI_VERSION: tuple[str, str]
"""ASGI's `version` and `spec_version`, as the scopes carry them."""

class StartupError(Exception):
    """The worker cannot start (bad socket path and the like): one line for the user."""

class PeerClosed(ConnectionError):
    """The client closed the connection in the middle of the request body."""

class HttpBodyError(Exception):
    """The request body is malformed (a bad chunked encoding)."""

def main(argv: list[str | bytes | PathLike[str]]) -> int:
    """The `headway` command with `argv` (the program first); returns its exit status."""

def serve(app: Any, path: str, threads: int, workers: int, describe: str, root_path: str = "") -> int:
    """Serves the WSGI `app` until a stop signal, over the hop when the front started the worker,
    else on the unix socket `path`; returns the exit status. Raises StartupError."""

def serve_asgi(server: Any, path: str, threads: int, describe: str) -> int:
    """Serves an ASGI app through `server` (`headway.worker.asgi.Server`) as `serve` does."""

def parse_scope(kind: str, head: bytes, state: dict[str, Any], root_path: str) -> dict[str, Any]:
    """The `kind` (`http` or `websocket`) scope of an HTTP/1.1 request head; ValueError if it is
    malformed."""

def websocket_accept(key: bytes) -> str:
    """The `Sec-WebSocket-Accept` value that answers a handshake's `Sec-WebSocket-Key`."""

class FileWrapper:
    """`wsgi.file_wrapper`: a file-like object's contents, `blksize` bytes at a time."""

    def __init__(self, filelike: Any, blksize: int = 65536) -> None: ...
    @property
    def filelike(self) -> Any: ...
    @property
    def blksize(self) -> int: ...
    def close(self) -> None: ...
    def __iter__(self) -> FileWrapper: ...
    def __next__(self) -> Any: ...

class Ready:
    """An awaitable whose result is already there."""

    def __await__(self) -> Generator[Any, None, Any]: ...
    def __iter__(self) -> Ready: ...
    def __next__(self) -> None: ...

class Channel:
    """One connection's requests on the worker's own socket, as the ASGI side sees them."""

    def next_request(self, state: dict[str, Any], root_path: str) -> tuple[dict[str, Any], bool] | None: ...
    def read(self) -> tuple[bytes, bool]: ...
    def respond(self, status: str, headers: list[tuple[str, str]], data: bytes, more: bool) -> None: ...
    def send(self, data: bytes, more: bool) -> None: ...
    def fail(self) -> None: ...
    def finish(self) -> bool: ...

class Claims:
    """The hop's requests, for the asyncio loop to claim and serve itself."""

    def begin(
        self,
        serve: Callable[[dict[str, Any], HttpCycle], Coroutine[Any, Any, None]],
        start: Callable[[Coroutine[Any, Any, None]], Any],
        send_file: Callable[[HttpCycle, Any], Coroutine[Any, Any, None]],
        event_loop: Any,
        state: dict[str, Any],
        root_path: str,
    ) -> None: ...
    def fileno(self) -> int: ...
    def turn(self, rung: bool = False) -> None: ...

class HttpCycle:
    """One request of the `http` scope served from the hop: the app's `receive` and `send`."""

    def receive(self) -> Awaitable[dict[str, Any]]: ...
    def send(self, message: dict[str, Any]) -> Awaitable[None]: ...
    def finish(self, error: BaseException | None = None) -> None: ...

class WebSocketCodec:
    """The server's side of one open WebSocket, without I/O."""

    def __init__(self) -> None: ...
    def feed(self, data: bytes) -> list[tuple[Any, ...]]: ...
    def send_text(self, text: str) -> None: ...
    def send_bytes(self, data: bytes) -> None: ...
    def close(self, code: int, reason: str) -> None: ...
    def output(self) -> bytes: ...
