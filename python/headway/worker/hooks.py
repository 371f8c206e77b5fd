"""`--hooks MODULE`: what a worker process runs at the two ends of its life.

Both functions are optional. `post_fork(worker)` runs in each worker process once the app is
imported and before the worker serves: with --preload, right after the fork, to open again what
the import opened (database connections, sockets and threads do not survive a fork usefully);
without it, in a worker that imported the app itself, for what each process sets up for its own
(a metrics exporter, a tracer). `on_exit(worker)` runs as the worker stops cleanly.
`worker.index` is its number (1..W), `worker.pid` its pid. The same order with and without
--preload, so that a hooks module works either way.
"""

from __future__ import annotations

import importlib
import os
import sys
import traceback
from dataclasses import dataclass
from types import ModuleType
from typing import Callable


@dataclass(frozen=True)
class Worker:
    """What a hook learns about the worker it runs in."""

    index: int
    pid: int


class HooksImportError(Exception):
    """The --hooks module does not import (the traceback is printed before)."""

    def __init__(self, spec: str, error: BaseException) -> None:
        super().__init__(str(error))
        self.spec = spec


def load(spec: str | None) -> ModuleType | None:
    """The hooks module named `spec`, or None without one."""
    if spec is None:
        return None
    try:
        return importlib.import_module(spec)
    except Exception as error:
        traceback.print_exc(file=sys.stderr)
        raise HooksImportError(spec, error) from error


def serve_between(hooks: ModuleType | None, index: int, serve: Callable[[], int]) -> int:
    """Runs `serve()` in worker `index` between its hooks; returns what `serve` returns."""
    worker = Worker(index=index, pid=os.getpid())
    if hasattr(hooks, "post_fork"):
        hooks.post_fork(worker)
    status = serve()
    if hasattr(hooks, "on_exit"):
        hooks.on_exit(worker)
    return status
