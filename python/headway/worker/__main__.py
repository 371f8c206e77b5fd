"""`python -m headway.worker`: the command line the headway front runs for each worker.

    python -m headway.worker --socket PATH --threads T [--workers W] [--interface I] [--hooks MODULE]
                             [--root-path PATH] [APP]

APP is `module:callable` (or `module:factory()`; `module` alone is `module:application`),
imported before the socket is bound so that "the socket accepts" means "the app is loaded"
(and, for ASGI, its startup done: see asgi.py). Without APP the demo app is served (its ASGI
twin with --interface asgi). The hooks module's functions run around the serving (hooks.py).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import traceback
from types import ModuleType
from typing import Any, Callable

from . import log
from .hooks import HooksImportError, serve_between
from .hooks import load as load_hooks

try:
    from headway import _native
except ImportError as error:  # this source tree on PYTHONPATH, but headway not installed here
    _native = None
    _NATIVE_MISSING = str(error)
else:
    from . import asgi

DEMO_APP = "headway.demo:app"
# What APP without ':callable' names, as in gunicorn: Django's wsgi.py and asgi.py call it so.
DEFAULT_CALLABLE = "application"
# The demo's ASGI twin, served when ASGI is asked for without an app.
DEMO_ASGI_APP = "headway.twins.demo_asgi:app"


class AppImportError(Exception):
    """APP cannot be turned into a WSGI callable; the message says why in one line."""


def load_app(spec: str) -> Callable[..., Any]:
    """Import `module:attr[.attr...]` and return it; with a trailing '()' call it first. A
    `module` alone is `module:application`."""
    module_name, sep, attr_path = spec.partition(":")
    if not module_name or (sep and not attr_path):
        raise AppImportError(f"expected module:callable, got {spec!r}")
    attr_path = attr_path or DEFAULT_CALLABLE
    factory = attr_path.endswith("()")
    if factory:
        attr_path = attr_path[:-2]
    target = importlib.import_module(module_name)
    for name in attr_path.split("."):
        try:
            target = getattr(target, name)
        except AttributeError:
            implied = "" if sep else f" (an APP without ':callable' is {module_name}:{DEFAULT_CALLABLE}; name yours)"
            raise AppImportError(f"{module_name} has no attribute {attr_path!r}{implied}") from None
    if factory:
        target = target()
    if not callable(target):
        raise AppImportError(f"{spec} is not callable")
    return target


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m headway.worker",
        description="Serve a WSGI or ASGI app over HTTP/1.1 on a unix socket, one slot thread per request.",
    )
    parser.add_argument("--socket", metavar="PATH", default=os.environ.get("HEADWAY_SOCKET"),
                        help="unix socket path to listen on (default: $HEADWAY_SOCKET)")
    parser.add_argument("--threads", metavar="T", type=_positive, default=1,
                        help="slots: connections served at once, one thread each (default 1)")
    parser.add_argument("--asgi-tasks", metavar="N", type=_positive,
                        help="slots of an ASGI app instead: requests at once on its event loop (default T)")
    parser.add_argument("--workers", metavar="W", type=_positive, default=1,
                        help="worker processes the front runs; sets wsgi.multiprocess (default 1)")
    parser.add_argument("--interface", choices=("auto", "wsgi", "asgi"), default="auto",
                        help="how to call the app; auto: ASGI 3 if it is a coroutine function or has an async "
                             "__call__, else WSGI (default auto)")
    parser.add_argument("--hooks", metavar="MODULE",
                        help="a module whose post_fork(worker) runs before the worker serves and on_exit(worker) as "
                             "it stops cleanly")
    parser.add_argument("--root-path", metavar="PATH", default="",
                        help="the path prefix the app is mounted under: SCRIPT_NAME (WSGI), root_path (ASGI)")
    parser.add_argument("app", nargs="?", metavar="APP",
                        help=f"WSGI or ASGI app as module:callable or module:factory(); module alone is "
                             f"module:{DEFAULT_CALLABLE} (default {DEMO_APP}, "
                             f"or {DEMO_ASGI_APP} with --interface asgi)")
    args = parser.parse_args(argv)
    if not args.socket:
        parser.error("--socket PATH is required (or set HEADWAY_SOCKET)")
    if args.app is None:
        args.app = DEMO_ASGI_APP if args.interface == "asgi" else DEMO_APP
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if _native is None:
        log(f"the native core is missing ({_NATIVE_MISSING}): install headway (pip install .) for "
            f"{sys.executable}, or run the worker with a Python that has it (headway serve --python)")
        return 1
    loaded = load_app_and_hooks(args.app, args.hooks)
    if loaded is None:
        return 1
    app, hooks = loaded
    index = int(os.environ.get("HEADWAY_WORKER") or 1)
    return serve_between(hooks, index,
                         lambda: serve(app, args, args.socket))


def load_app_and_hooks(spec: str, hooks_spec: str | None) -> tuple[Callable[..., Any], ModuleType | None] | None:
    """Imports APP and the hooks module (None without one), from the working directory as well;
    None, with the traceback and a line on stderr, if either does not import."""
    cwd = os.getcwd()
    if sys.path[:1] != [cwd]:  # like gunicorn: the app's own directory is importable
        sys.path.insert(0, cwd)
    try:
        return load_app(spec), load_hooks(hooks_spec)
    except (Exception, SystemExit) as error:  # an app module calling sys.exit() is a failed import too
        if not isinstance(error, (AppImportError, HooksImportError)) and not _is_missing(error, spec):
            traceback.print_exc(file=sys.stderr)
        message = f"cannot import {error.spec if isinstance(error, HooksImportError) else spec}: {error}"
        if isinstance(error, ImportError) or isinstance(error.__cause__, ImportError):
            # Most often the app's packages are installed for another Python than this one.
            version = ".".join(map(str, sys.version_info[:3]))
            message += f" (with {sys.executable}, Python {version}; --python or $HEADWAY_PYTHON names another)"
        log(message)
        return None


def _is_missing(error: BaseException, spec: str) -> bool:
    """Whether `error` says that the app's module itself is nowhere to be found: its traceback
    would show only the import machinery."""
    module = spec.partition(":")[0]
    return isinstance(error, ModuleNotFoundError) and error.name is not None and \
        (module == error.name or module.startswith(error.name + "."))


def serve(app: Callable[..., Any], args: argparse.Namespace, socket_path: str) -> int:
    """Serves the imported app as `args` (the command line's) say, until told to stop; returns the
    exit status. Also what a worker forked from a preloaded parent runs."""
    interface = args.interface
    if interface == "auto":
        interface = "asgi" if asgi.is_asgi(app) else "wsgi"
    try:
        if interface == "asgi":
            return asgi.serve(app, socket_path, args.asgi_tasks or args.threads, args.app, args.root_path)
        return _native.serve(app, socket_path, args.threads, args.workers, args.app, args.root_path)
    except _native.StartupError as error:
        log(str(error))
        return 1


if __name__ == "__main__":
    sys.exit(main())
