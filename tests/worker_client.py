"""Helpers for the worker tests: run `python -m headway.worker` and talk raw HTTP/1.1 to it.

The client here parses responses itself (no http.client) so tests can see exactly what
went over the unix socket: framing headers, chunk boundaries, closed connections.
"""

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# The worker tests' apps (worker_apps.py, asgi_apps.py, ...), which the workers import.
APPS_DIR = REPO / "tests" / "worker"
TIMEOUT = 10.0  # seconds; the bound on every wait in these tests
# The interpreter the worker processes run on: the tests' own unless HEADWAY_PYTHON names
# another (as for `headway serve`), so the worker can be checked on other Python versions.
WORKER_PYTHON = os.environ.get("HEADWAY_PYTHON", sys.executable)

# The unit tests import the same source tree the worker processes run (see python_env).
sys.path.insert(0, str(REPO / "python"))


def worker_can_import(module):
    """Whether WORKER_PYTHON finds `module` (it may not be the interpreter running the tests)."""
    probe = f"import importlib.util, sys; sys.exit(importlib.util.find_spec({module!r}) is None)"
    return subprocess.run([WORKER_PYTHON, "-c", probe], env=python_env(), timeout=TIMEOUT).returncode == 0


def python_env(**extra):
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO / "python") + os.pathsep + env.get("PYTHONPATH", "")
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    return env


class Response:
    def __init__(self, version, status, reason, headers, body, interim=()):
        self.version = version
        self.status = status
        self.reason = reason
        self.headers = headers  # list of (name, value) as received
        self.body = body
        self.interim = list(interim)  # 1xx responses that came first

    def header(self, name):
        values = [value for key, value in self.headers if key.lower() == name.lower()]
        assert len(values) <= 1, f"header {name} sent {len(values)} times"
        return values[0] if values else None


class Client:
    """One raw connection to a unix socket path, or to a (host, port) TCP address."""

    def __init__(self, address, timeout=TIMEOUT):
        family = socket.AF_INET if isinstance(address, tuple) else socket.AF_UNIX
        self.sock = socket.socket(family, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect(address if isinstance(address, tuple) else str(address))
        self.buffer = b""
        self.chunked_raw = b""  # the wire bytes of the last chunked body, for framing checks

    def close(self):
        self.sock.close()

    def send(self, data):
        self.sock.sendall(data)

    def request(self, method, target, headers=(), body=b"", version="HTTP/1.1", host="localhost"):
        lines = [f"{method} {target} {version}"]
        if host is not None:
            lines.append(f"Host: {host}")
        names = {name.lower() for name, _ in headers}
        if body and "content-length" not in names and "transfer-encoding" not in names:
            lines.append(f"Content-Length: {len(body)}")
        lines += [f"{name}: {value}" for name, value in headers]
        self.send(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)
        return self.read_response(method)

    def _fill(self):
        data = self.sock.recv(65536)
        if not data:
            raise ConnectionError("the worker closed the connection")
        self.buffer += data

    def _read_exact(self, size):
        while len(self.buffer) < size:
            self._fill()
        data, self.buffer = self.buffer[:size], self.buffer[size:]
        return data

    def _read_line(self):
        while b"\r\n" not in self.buffer:
            self._fill()
        line, self.buffer = self.buffer.split(b"\r\n", 1)
        return line

    def read_head(self):
        while b"\r\n\r\n" not in self.buffer:
            self._fill()
        head, self.buffer = self.buffer.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        version, status, reason = (lines[0].split(" ", 2) + [""])[:3]
        headers = [tuple(part.strip() for part in line.split(":", 1)) for line in lines[1:]]
        return version, int(status), reason, headers

    def read_response(self, method="GET"):
        interim = []
        while True:
            version, status, reason, headers = self.read_head()
            if status >= 200:
                break
            interim.append(status)
        response = Response(version, status, reason, headers, b"", interim)
        length = response.header("Content-Length")
        if method == "HEAD" or status in (204, 304):
            return response
        if response.header("Transfer-Encoding") == "chunked":
            response.body = self._read_chunked()
        elif length is not None:
            response.body = self._read_exact(int(length))
        else:
            response.body = self.read_until_close()
        return response

    def _read_chunked(self):
        parts = []
        raw = []
        while True:
            size_line = self._read_line()
            raw.append(size_line + b"\r\n")
            size = int(size_line.split(b";")[0], 16)
            if size == 0:
                while self._read_line():
                    pass
                raw.append(b"\r\n")
                self.chunked_raw = b"".join(raw)
                return b"".join(parts)
            parts.append(self._read_exact(size))
            raw.append(parts[-1] + b"\r\n")
            assert self._read_exact(2) == b"\r\n"

    def read_until_close(self):
        while True:
            data = self.sock.recv(65536)
            if not data:
                data, self.buffer = self.buffer, b""
                return data
            self.buffer += data

    def is_closed(self):
        """True if the worker closes the connection (EOF within TIMEOUT) with nothing more sent."""
        try:
            return self.sock.recv(1) == b"" and not self.buffer
        except ConnectionResetError:
            return True


def wait_until_accepting(address, proc, describe):
    """Connect to `address` until it accepts; fail if `proc` exits or TIMEOUT passes."""
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"{describe()} exited with {proc.returncode} before it listened")
        try:
            Client(address, timeout=1).close()
            return
        except (FileNotFoundError, ConnectionRefusedError):
            time.sleep(0.02)
    pytest.fail(f"{describe()} did not listen within {TIMEOUT} s")


class Worker:
    def __init__(self, proc, socket_path, stderr_path):
        self.proc = proc
        self.socket_path = socket_path
        self.stderr_path = stderr_path

    @property
    def pid(self):
        return self.proc.pid

    def client(self):
        return Client(self.socket_path)

    def get(self, target, **kwargs):
        client = self.client()
        try:
            return client.request("GET", target, **kwargs)
        finally:
            client.close()

    def stderr(self):
        return self.stderr_path.read_text()

    def stop(self, signum=signal.SIGTERM):
        """Signal the worker and return its exit status."""
        self.proc.send_signal(signum)
        return self.proc.wait(TIMEOUT)

    def wait_ready(self):
        wait_until_accepting(self.socket_path, self.proc, lambda: f"the worker (stderr: {self.stderr()})")
        return self


def start_process(tmp_path, args, env=None, cwd=APPS_DIR):
    """Run `python -m headway.worker ARGS` on WORKER_PYTHON; stderr goes to a file the test can read."""
    stderr_path = tmp_path / f"worker-{time.monotonic_ns()}.err"
    with open(stderr_path, "wb") as stderr:
        proc = subprocess.Popen(
            [WORKER_PYTHON, "-m", "headway.worker", *args],
            cwd=cwd, env=python_env(**(env or {})),
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=stderr,
        )
    return proc, stderr_path
