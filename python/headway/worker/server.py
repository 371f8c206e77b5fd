"""The worker process: bind the unix socket, run one thread per slot, stop cleanly on a signal.

Each of the T slot threads accepts a connection only while it has none, so the worker
never holds more than T connections: a connection beyond T waits in the listen backlog
until a slot frees. That is the "one permit per slot, taken before accept()" rule, with the
thread itself as the permit. On SIGTERM or SIGINT the socket file is removed, idle
connections are closed, requests in flight finish, and `run` returns 0.
"""

import os
import select
import signal
import socket
import stat
import sys
import threading
import time
import traceback

from . import log
from .connection import Connection
from .wsgi import base_environ

LISTEN_BACKLOG = 1024
# After accept() fails for lack of file descriptors, wait this long before retrying
# instead of spinning on a listener that stays readable.
ACCEPT_RETRY_SECONDS = 0.1


class StartupError(Exception):
    """The worker cannot start (bad socket path and the like): one line for the user."""


def bind_unix(path):
    """A listening unix socket at `path`, replacing a stale socket file left there."""
    try:
        if stat.S_ISSOCK(os.lstat(path).st_mode):
            os.unlink(path)
        else:
            raise StartupError(f"{path} exists and is not a socket; not replacing it")
    except FileNotFoundError:
        pass
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        listener.bind(path)
        listener.listen(LISTEN_BACKLOG)
    except OSError as error:
        listener.close()
        raise StartupError(f"cannot listen on {path}: {error}") from None
    return listener


class Slot:
    """One of the T threads: accepts a connection when it has none and serves it to the end."""

    def __init__(self, server, number):
        self._server = server
        self._lock = threading.Lock()  # guards _sock against the stopping main thread
        self._sock = None
        self.idle = True  # no request in progress: the connection may be closed to stop
        self.thread = threading.Thread(target=self._run, name=f"headway-slot-{number}")

    def stopping(self):
        return self._server.stopping

    def _run(self):
        server = self._server
        poller = select.poll()
        poller.register(server.listener, select.POLLIN)
        poller.register(server.stop_fd, select.POLLIN)
        while True:
            poller.poll()
            if server.stopping:
                return
            try:
                sock, _ = server.listener.accept()
            except BlockingIOError:
                continue  # another slot took it
            except OSError as error:
                log(f"accept failed: {error}")
                time.sleep(ACCEPT_RETRY_SECONDS)
                continue
            self._serve(sock)

    def _serve(self, sock):
        sock.setblocking(True)
        with self._lock:
            self._sock = sock
        try:
            Connection(sock, self._server.app, self._server.environ, self).serve()
        except BaseException:  # noqa: B902 - a slot thread must survive even SystemExit from an app
            log("unexpected error on a connection; closing it:")
            traceback.print_exc(file=sys.stderr)
        finally:
            with self._lock:
                self._sock = None
                sock.close()
            self.idle = True

    def close_if_idle(self):
        """Stop waiting for another request on the connection, if no request is in progress."""
        with self._lock:
            if self._sock is not None and self.idle:
                try:
                    # SHUT_RD wakes the slot's recv() with end-of-file; a request that raced in
                    # is still read from the buffer and answered, as writing stays open.
                    self._sock.shutdown(socket.SHUT_RD)
                except OSError:
                    pass  # the peer closed it already


class Server:
    """W x T serving, this process's share: T slot threads on one listening unix socket."""

    def __init__(self, app, path, threads, workers):
        self.app = app
        self.path = path
        self.threads = threads
        self.environ = base_environ(threads, workers)
        self.stopping = False
        self.listener = None
        self.stop_fd = None
        self._socket_inode = None

    def run(self, describe):
        """Serve until SIGTERM or SIGINT; `describe` names the app in the startup line."""
        self.listener = bind_unix(self.path)
        self._socket_inode = os.stat(self.path).st_ino
        self.listener.setblocking(False)  # slots poll it; a lost accept race must not block
        stop_read, stop_write = os.pipe()
        self.stop_fd = stop_read
        signal_read, signal_write = os.pipe()
        os.set_blocking(signal_write, False)
        signal.set_wakeup_fd(signal_write)
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, _note_signal)

        slots = [Slot(self, number) for number in range(self.threads)]
        for slot in slots:
            slot.thread.start()
        log(f"pid {os.getpid()} serving {describe} on {self.path} with {self.threads} threads")

        while not {signal.SIGTERM, signal.SIGINT}.intersection(os.read(signal_read, 64)):
            pass
        self.stopping = True
        self._remove_socket_file()
        os.write(stop_write, b".")  # wakes every slot waiting to accept; never read, stays readable
        for slot in slots:
            slot.close_if_idle()
        for slot in slots:
            slot.thread.join()
        self.listener.close()
        return 0

    def _remove_socket_file(self):
        """Unlink our socket file so that no new connection can reach us."""
        try:
            if os.stat(self.path).st_ino == self._socket_inode:
                os.unlink(self.path)
        except OSError:
            pass  # already gone or replaced by a newer worker: not ours to remove


def _note_signal(signum, frame):
    """The wakeup fd carries the signal to the main loop; nothing else to do here."""
