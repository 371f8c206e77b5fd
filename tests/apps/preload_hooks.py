"""--hooks for tests (with and without --preload): each hook appends a line to the file named by
$HOOKS_LOG."""

import os


def _note(line):
    with open(os.environ["HOOKS_LOG"], "a") as log:
        log.write(line + "\n")


def post_fork(worker):
    _note(f"post_fork {worker.index} {worker.pid} {os.getpid()}")


def on_exit(worker):
    _note(f"on_exit {worker.index} {worker.pid}")
