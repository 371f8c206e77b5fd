"""The tests' fixtures and helpers, for every folder under tests/.

- End to end (`serve`): start the real `headway serve`, talk raw HTTP. The binary is found in
  $HEADWAY_BIN, else `headway` on PATH (a `pip install .`), else the cargo build in target/.
  Tests bind only to 127.0.0.1 with port 0 and read the port the server logs.
- The worker on its own (`start_worker`, `apps_worker`): `python -m headway.worker` on a unix
  socket, through worker_client.py.
- `require(tool)`: a test that needs a tool `scripts/setup --test` installs is skipped without
  it on a developer's machine, and fails under CI, where its absence is a broken setup; `missing`
  does the same for any other want (a package, a limit of the machine's). No test skips otherwise,
  so none passes by accident in CI.

Every wait is bounded.
"""

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from worker_client import TIMEOUT, Worker, start_process

REPO = Path(__file__).resolve().parents[1]
APPS = REPO / "tests" / "apps"
# Workers that answer `/spaced` with header values that have blanks around them (Django's WSGI
# handler writes `Set-Cookie` so): the bundled one and a --cmd one.
SPACED_HEADER_WORKERS = {
    "bundled": ["probe:app"],
    "cmd": ["--cmd", f"{sys.executable} {APPS / 'unruly_worker.py'} {{socket}}"],
}
# The desync suite's echo apps: any path, each request appended to $ECHO_LOG and echoed as JSON.
ECHO_APPS = REPO / "tests" / "desync" / "apps"


def headway_binary():
    explicit = os.environ.get("HEADWAY_BIN")
    if explicit:
        return explicit
    for candidate in (REPO / "target" / "release" / "headway", REPO / "target" / "debug" / "headway"):
        if candidate.is_file():
            return str(candidate)
    on_path = shutil.which("headway")
    if on_path:
        return on_path
    pytest.fail("no headway binary: set HEADWAY_BIN, pip install ., or cargo build")


class Server:
    """A running `headway serve`, its logs collected from stderr."""

    def __init__(self, args, cwd=APPS, env=None, ready_timeout=60, wrapper=()):
        """`wrapper`: a command that runs headway, before it on the command line (`unshare ...`)."""
        # Both ports chosen by the kernel and read from the log: a port found free and passed on
        # could be taken by another connection before headway binds it.
        command = [*wrapper, headway_binary(), "serve", "-b", "127.0.0.1:0", "--control", "127.0.0.1:0", *args]
        environment = dict(os.environ)
        # Running from the source tree: let the worker import the headway package.
        environment["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO / "python"), environment.get("PYTHONPATH")]))
        environment.setdefault("HEADWAY_PYTHON", sys.executable)
        # The Rack worker's Ruby side and extension, from the source tree too.
        environment.setdefault("HEADWAY_RUBY_LIB", str(REPO / "ruby" / "lib"))
        environment.update(env or {})
        self.log_file = tempfile.NamedTemporaryFile(prefix=f"headway-test-{os.getpid()}-", suffix=".log", delete=False)
        self.log_path = Path(self.log_file.name)
        self.process = subprocess.Popen(command, cwd=cwd, env=environment, stdout=self.log_file,
                                        stderr=subprocess.STDOUT, start_new_session=True)
        self.port = self._wait_for_port(ready_timeout)
        # Logged before the public address, so there by now.
        self.control = "127.0.0.1:" + re.search(rb"stats on http://127\.0\.0\.1:(\d+)/stats", self.log())[1].decode()

    def _wait_for_port(self, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            match = re.search(rb"listening on https?://127\.0\.0\.1:(\d+)", self.log())
            if match:
                return int(match.group(1))
            if self.process.poll() is not None:
                raise AssertionError(f"headway exited with {self.process.returncode}:\n{self.log().decode()}")
            time.sleep(0.05)
        self.stop()
        raise AssertionError(f"headway did not start within {timeout}s:\n{self.log().decode()}")

    def log(self):
        return self.log_path.read_bytes()

    def connect(self, timeout=30):
        sock = socket.create_connection(("127.0.0.1", self.port), timeout=timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock

    def get(self, path, headers=None, timeout=30):
        """One request on a new connection; returns (status, headers, body)."""
        with self.connect(timeout) as sock:
            send_request(sock, "GET", path, headers=headers, close=True)
            return read_response(sock.makefile("rb"))

    def stats(self):
        import json
        import urllib.request
        with urllib.request.urlopen(f"http://{self.control}/stats", timeout=10) as response:
            return json.load(response)

    def metrics(self):
        """The control endpoint's `/metrics` page (Prometheus text)."""
        import urllib.request
        with urllib.request.urlopen(f"http://{self.control}/metrics", timeout=10) as response:
            return response.read().decode()

    def stats_command(self, *args):
        """What `headway stats` prints for this server."""
        return subprocess.run([headway_binary(), "stats", "--control", self.control, *args],
                              capture_output=True, text=True, timeout=30, check=True).stdout

    def signal(self, signum):
        self.process.send_signal(signum)

    def wait(self, timeout=60):
        return self.process.wait(timeout=timeout)

    def stop(self):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=10)
        self.log_file.close()
        self.log_path.unlink(missing_ok=True)


@pytest.fixture
def serve():
    """Starts servers for a test: `serve('-w', '1', 'probe:app')`; all stopped afterwards."""
    servers = []

    def start(*args, **kwargs):
        server = Server(list(args), **kwargs)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def request_bytes(method, path, headers=None, body=b"", close=False, version="HTTP/1.1", host="test"):
    """A request's bytes: `headers` as given, `Host: host` first unless `host` is None, a
    Content-Length for `body` unless the headers frame it, and `Connection: close` if `close`."""
    lines = [f"{method} {path} {version}", *([f"Host: {host}"] if host is not None else [])]
    for name, value in (headers or {}).items():
        lines.append(f"{name}: {value}")
    if body and not any(name.lower() in ("content-length", "transfer-encoding") for name in (headers or {})):
        lines.append(f"Content-Length: {len(body)}")
    if close:
        lines.append("Connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def send_request(sock, method, path, **kwargs):
    sock.sendall(request_bytes(method, path, **kwargs))


def read_response(stream, method="GET"):
    """Reads one response from a file-like socket stream: (status, headers, body).

    Header names are lower-cased; repeated headers are joined with ', '. Handles
    Content-Length, chunked and close-delimited bodies, and 1xx interim responses (skipped).
    """
    while True:
        status_line = stream.readline()
        if not status_line:
            raise ConnectionError("connection closed before a response")
        status = int(status_line.split()[1])
        headers = {}
        while True:
            line = stream.readline()
            if line in (b"\r\n", b"\n", b""):
                break
            name, _, value = line.decode("latin-1").partition(":")
            key = name.strip().lower()
            headers[key] = f"{headers[key]}, {value.strip()}" if key in headers else value.strip()
        if 100 <= status < 200:
            continue
        break
    if method == "HEAD" or status in (204, 304):
        return status, headers, b""
    if headers.get("transfer-encoding", "").lower() == "chunked":
        body = bytearray()
        while True:
            size = int(stream.readline().split(b";")[0], 16)
            if size == 0:
                while stream.readline() not in (b"\r\n", b""):
                    pass
                return status, headers, bytes(body)
            body += stream.read(size)
            stream.read(2)
    if "content-length" in headers:
        return status, headers, stream.read(int(headers["content-length"]))
    return status, headers, stream.read()


def exchange(server, method, path, headers=None, body=b""):
    """One request on a new connection: (status, headers, body)."""
    with server.connect() as sock:
        send_request(sock, method, path, headers=headers, body=body, close=True)
        return read_response(sock.makefile("rb"), method=method)


def gated_response(server, path):
    """The bytes of the response to GET `path`, whose app writes "first\n" and then "second\n"
    only once /release was asked: checks that the first piece came out on its own."""
    with server.connect() as sock:
        send_request(sock, "GET", path, close=True)
        received = b""
        while b"first\n" not in received:  # the first piece is out while the second waits
            data = sock.recv(4096)
            assert data, received
            received += data
        assert b"second" not in received
        assert server.get("/release")[0] == 200
        while data := sock.recv(4096):
            received += data
    return received


def wait_until(predicate, timeout=30, interval=0.02, message="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {message}")


def upload_head(length, version="1.1"):
    """The head of an upload of `length` bytes to `/digest`."""
    return f"POST /digest HTTP/{version}\r\nHost: a\r\nContent-Length: {length}\r\n\r\n".encode()


def upload_queued_early(server, head, start):
    """A connection that sent `head` and the body's `start` and whose upload the front queued before
    its end (the slot taken). The front takes a body as fast only when its first megabytes arrive
    at 64 MB/s or more, which a machine busy with other work can deny an attempt (the front's
    reads delayed), so up to three are made; an upload not queued early never takes the slot."""
    for _ in range(3):
        sock = server.connect(timeout=60)
        sock.sendall(head + start)
        try:
            wait_until(lambda: server.stats()["slots"]["busy"] == 1, timeout=5, message="the upload to take the slot")
            return sock
        except AssertionError:
            sock.close()
    raise AssertionError("the upload never took the slot before its end")


def ready_pids(server, workers):
    """The pids of the server's workers, in their order, once all `workers` are ready."""

    def pids():
        found = [w["pid"] for w in server.stats()["workers"] if w["state"] == "ready"]
        return found if len(found) == workers else None

    return wait_until(pids, message=f"{workers} ready workers")


def parent_of(pid):
    """The parent's pid of process `pid` (/proc/PID/stat's fourth field)."""
    with open(f"/proc/{pid}/stat") as stat:
        return int(stat.read().rsplit(")", 1)[1].split()[1])


def ended(pid):
    """Whether process `pid` has exited (a zombie its parent has not reaped counts)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True


class Load:
    """`clients` keep-alive connections asking for `path`, one request after the other, until
    stopped; `answers` gets `record(status, body)` of each response, as it comes."""

    def __init__(self, server, path, clients, record=lambda status, body: status):
        self.answers, self._stop = [], threading.Event()

        def client():
            with server.connect(timeout=60) as sock:
                stream = sock.makefile("rb")
                while not self._stop.is_set():
                    send_request(sock, "GET", path)
                    status, _, body = read_response(stream)
                    self.answers.append(record(status, body))

        self._clients = [threading.Thread(target=client) for _ in range(clients)]
        for thread in self._clients:
            thread.start()

    def stop(self):
        self._stop.set()
        for thread in self._clients:
            thread.join(timeout=60)


def kill_worker_1_midway(server, slow_path):
    """With 2 workers of 2 slots, four requests of `slow_path` at once (two on each worker: the
    queue spreads work over the least busy), then SIGKILL to worker 1. Returns the workers' pids
    before, by index, and the four (status, headers, body) once answered."""
    before = {w["index"]: w["pid"] for w in server.stats()["workers"]}
    results = []
    thread = threading.Thread(target=lambda: results.extend(parallel_gets(server, [slow_path] * 4)))
    thread.start()
    wait_until(lambda: [w["busy"] for w in server.stats()["workers"]] == [2, 2], message="2 requests per worker")
    os.kill(before[1], signal.SIGKILL)
    thread.join(timeout=90)
    return before, results


def parallel_gets(server, paths):
    """Sends each path on its own connection at once; returns [(status, headers, body)] in order."""
    results = [None] * len(paths)

    def fetch(index, path):
        try:
            results[index] = server.get(path, timeout=60)
        except (ConnectionError, OSError) as error:
            results[index] = (None, {}, str(error).encode())

    threads = [threading.Thread(target=fetch, args=item) for item in enumerate(paths)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=90)
    return results


def require(tool, install):
    """Skips the test when `tool` (a command on PATH, or a path) is missing on a developer's
    machine; under CI, where `scripts/setup --test` must have installed it, fails it instead.
    `install` says how to get it."""
    if shutil.which(tool) or os.path.exists(tool):
        return
    missing(f"{tool} is not installed ({install})")


def missing(what):
    """Skips the test for want of `what` on a developer's machine; under CI (CI set), where
    scripts/setup --test and scripts/test provide everything the tests need, fails it instead."""
    if os.environ.get("CI"):
        pytest.fail(f"{what}: under CI, scripts/test (and its scripts/setup --test) should have provided it")
    pytest.skip(what)


def require_module(name):
    """`require` for a Python package the tests' requirements install."""
    try:
        __import__(name)
    except ImportError:
        require(f"the Python package {name}", "pip install -r requirements-test.txt")


@pytest.fixture
def socket_dir():
    """A short directory for unix sockets (a socket path must stay under ~100 bytes)."""
    path = Path(tempfile.mkdtemp(prefix="hw-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="module")
def ca():
    """A throwaway certificate authority for a test module's HTTPS servers and clients."""
    import trustme

    return trustme.CA()


@pytest.fixture
def tls_files(ca, tmp_path):
    """`--certfile` and `--keyfile` for a certificate `ca` issued for 127.0.0.1 and localhost."""
    cert = ca.issue_cert("127.0.0.1", "localhost")
    chain, key = tmp_path / "server.crt", tmp_path / "server.key"
    cert.cert_chain_pems[0].write_to_path(str(chain))
    cert.private_key_pem.write_to_path(str(key))
    return ["--certfile", str(chain), "--keyfile", str(key)]


@pytest.fixture
def start_worker(tmp_path, socket_dir):
    """start_worker(app=None, threads=2, *extra) -> a Worker that accepts connections."""
    started = []

    def start(app=None, threads=2, *extra):
        socket_path = socket_dir / f"w{len(started)}.sock"
        args = ["--socket", str(socket_path), "--threads", str(threads), *extra]
        if app is not None:
            args.append(app)
        proc, stderr_path = start_process(tmp_path, args)
        worker = Worker(proc, socket_path, stderr_path)
        started.append(worker)
        return worker.wait_ready()

    yield start
    for worker in started:
        if worker.proc.poll() is None:
            worker.proc.kill()
        worker.proc.wait(TIMEOUT)
        worker.proc.stdout.close()


@pytest.fixture
def apps_worker(start_worker):
    """A worker serving tests/worker/worker_apps.py with 2 threads."""
    return start_worker("worker_apps:app", 2)
