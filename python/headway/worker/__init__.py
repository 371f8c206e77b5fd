"""The bundled headway worker: serves a WSGI app over HTTP/1.1 on a unix socket.

Run as `python -m headway.worker --socket PATH --threads T [APP]`; the headway front opens
exactly T keep-alive connections to PATH, one per slot, and the worker serves each one on
its own thread. Python does the command line and imports the app (`__main__`); the serving
(threads, signals, HTTP/1.1, PEP 3333) is native, in `headway._native` (crates/worker, built by crates/extension).
"""

import sys


def log(message: str) -> None:
    """One line on stderr, where the front collects the worker's output."""
    sys.stderr.write(f"headway worker: {message}\n")
    sys.stderr.flush()
