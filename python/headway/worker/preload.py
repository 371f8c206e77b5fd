"""`python -m headway.worker.preload`: the preloaded parent of `headway serve --preload`.

    python -m headway.worker.preload --threads T [--asgi-tasks N] --workers W [--hooks MODULE] [APP]

Imports APP once, freezes what the import made (`gc.freeze()`, so the collector of a worker
never writes to those objects and their pages stay shared), says "ready" to the front on the
socket named by $HEADWAY_ZYGOTE, then forks a worker each time the front asks: the request is
the worker's number, socket path and CPU (empty when workers are not pinned), with the
descriptors of its shared memory (SCM_RIGHTS); the answer is the child's pid. The child serves
exactly as `python -m headway.worker` would. Why the front asks for each worker rather than this
process forking them all: see crates/server/src/workers/zygote.rs.

A child lives as long as the front, not as long as this process: it exits when the front does
(it watches the front's pidfd, as a worker the front starts has the kernel kill it then), and it
keeps serving if this process dies, so that losing the parent loses no request; the front
starts a new parent when it next needs to fork a worker.

Hooks (--hooks MODULE): `post_fork(worker)` runs in each child right after the fork, before it
serves, and `on_exit(worker)` as it stops cleanly (hooks.py).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import select
import signal
import socket
import sys
import threading
import traceback
from types import ModuleType
from typing import Any, Callable

from . import log
from .__main__ import DEMO_APP, DEMO_ASGI_APP, load_app_and_hooks, serve
from .hooks import serve_between


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m headway.worker.preload")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--asgi-tasks", type=int)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--hooks", metavar="MODULE")
    parser.add_argument("--interface", choices=("auto", "wsgi", "asgi"), default="auto")
    parser.add_argument("--root-path", default="")
    parser.add_argument("app", nargs="?")
    args = parser.parse_args(argv)
    if args.app is None:
        args.app = DEMO_ASGI_APP if args.interface == "asgi" else DEMO_APP
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    channel = socket.socket(fileno=int(os.environ.pop("HEADWAY_ZYGOTE")))
    # The front is our parent (and kills us when it dies): its pidfd, for the children to watch.
    front = os.pidfd_open(os.getppid())
    loaded = load_app_and_hooks(args.app, args.hooks)
    if loaded is None:
        return 1
    app, hooks = loaded
    gc.freeze()
    # Children are reaped by the kernel: the front watches each through a pidfd.
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    log(f"pid {os.getpid()} imported {args.app}; forking workers from it")
    channel.send(b"ready")
    while True:
        try:
            message, fds, _, _ = socket.recv_fds(channel, 4096, 4)  # region, bells, body files
        except InterruptedError:
            continue
        if not message:  # the front is gone
            return 0
        index, socket_path, cpu = message.decode().split("\0")
        pid = os.fork()
        if pid == 0:
            channel.close()
            os._exit(_serve_child(app, hooks, args, int(index), socket_path, cpu, fds, front))
        for fd in fds:
            os.close(fd)
        channel.send(str(pid).encode())


def _serve_child(app: Callable[..., Any], hooks: ModuleType | None, args: argparse.Namespace, index: int,
                 socket_path: str, cpu: str | None, fds: list[int], front: int) -> int:
    """Runs in the forked worker; returns its exit status."""
    try:
        os.setpgid(0, 0)  # a group of its own, as a worker the front starts: signals, memory
        if cpu:  # --cpu-affinity, as the front pins a worker it starts (crates/server/src/workers/affinity.rs):
            # before any thread starts, so that they all inherit it; best effort, as there too
            with contextlib.suppress(OSError):
                os.sched_setaffinity(0, {int(cpu)})
            with contextlib.suppress(OSError):
                os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))
        _exit_with(front)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        os.environ["HEADWAY_HOP"] = ",".join(map(str, fds))
        os.environ["HEADWAY_WORKER"] = str(index)
        status = serve_between(hooks, index,
                               lambda: serve(app, args, socket_path))
        sys.stdout.flush()
        sys.stderr.flush()
        return status
    except BaseException:
        traceback.print_exc(file=sys.stderr)
        sys.stderr.flush()
        return 1


def _exit_with(front: int) -> None:
    """Kills this process when the front (its pidfd `front`) ends: what PR_SET_PDEATHSIG does for
    a worker the front starts, which here would tie the worker to this parent instead."""

    def watch() -> None:
        watcher = select.poll()
        watcher.register(front, select.POLLIN)
        watcher.poll()  # returns once the front has exited
        os.kill(os.getpid(), signal.SIGKILL)

    threading.Thread(target=watch, name="headway-front-watch", daemon=True).start()


if __name__ == "__main__":
    sys.exit(main())
