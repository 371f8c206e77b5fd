"""The demo app's twins answer like the WSGI demo: same statuses, bodies and headers.

Each twin runs on the server the lab uses for it (Puma, Node, uvicorn, granian) on a unix
socket; every route is asked once of the twin and of the headway worker serving the WSGI
demo, and the answers must match. A server that is not installed skips its case (fails it under CI). The Flask
app of the lab's throughput scenario must answer its three routes like the demo too.
"""

import importlib.util
import shutil
import socket
import subprocess
import sys
import time

import pytest

from conftest import missing, require, require_module
from worker_client import REPO, TIMEOUT, Client, python_env, wait_until_accepting

TWINS = REPO / "python" / "headway" / "twins"

TARGETS = [
    "/", "/hello", "/fixed", "/sleep/20", "/sleep/%32%30", "/sleep/600001", "/sleep/abc",
    "/fake_work?cpu_ms=5&iowait_ms=5&bytes=1234", "/fake_work?cpu_ms=1&iowait_ms=0&bytes=0",
    "/fake_work?cpu_ms=x", "/fake_work?iowait_ms=", "/fake_work?bytes=10485761",
    "/random?max_ms=abc", "/nowhere", "/hello/", "/json", "/json?indent=2", "/fortunes",
]


def _python_module(name):
    return importlib.util.find_spec(name) is not None


# name -> (how to tell it is installed, command for a socket path, extra environment)
SERVERS = {
    "puma": (lambda: shutil.which("puma"),
             lambda sock: ["puma", "-t", "2:2", "-b", "unix://" + sock, str(TWINS / "demo.ru")], {}),
    "node": (lambda: shutil.which("node"),
             lambda sock: ["node", str(TWINS / "demo.js")], {"HEADWAY_SOCKET": None}),
    "uvicorn": (lambda: _python_module("uvicorn"),
                lambda sock: [sys.executable, "-m", "uvicorn", "--no-access-log", "--uds", sock,
                              "headway.twins.demo_asgi:app"], {}),
    "granian-asgi": (lambda: _python_module("granian"),
                     lambda sock: [sys.executable, "-m", "granian", "--interface", "asgi", "--uds", sock,
                                   "headway.twins.demo_asgi:app"], {}),
    "granian-wsgi": (lambda: _python_module("granian"),
                     lambda sock: [sys.executable, "-m", "granian", "--interface", "wsgi", "--uds", sock,
                                   "headway.demo:app"], {}),
}


class Server:
    """A peer server process; stopped with SIGTERM (then killed) at the end of the test."""

    def __init__(self, command, env, log_path):
        self.log_path = log_path
        with open(log_path, "wb") as log:
            self.proc = subprocess.Popen(command, env=env, cwd=REPO / "python",
                                         stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)

    def log(self):
        return self.log_path.read_text(errors="replace")

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(TIMEOUT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(TIMEOUT)


@pytest.fixture
def run_server(tmp_path):
    servers = []

    def run(command, env, address):
        server = Server(command, env, tmp_path / f"server{len(servers)}.log")
        servers.append(server)
        wait_until_accepting(address, server.proc, lambda: f"{command[0]} (log: {server.log()})")
        return server

    yield run
    for server in servers:
        server.stop()


def answers(address):
    client = Client(address)
    try:
        return {target: client.request("GET", target) for target in TARGETS + ["/random?max_ms=20"]}
    finally:
        client.close()


def comparable(response):
    return (response.status, response.body, response.header("Content-Type"), response.header("Content-Length"))


@pytest.mark.parametrize("name", sorted(SERVERS))
def test_twin_answers_like_the_wsgi_demo(name, run_server, start_worker, socket_dir):
    installed, command, extra_env = SERVERS[name]
    if not installed():
        missing(f"{name} is not installed here")
    sock = str(socket_dir / (name + ".sock"))
    env = python_env(**{key: value or sock for key, value in extra_env.items()})
    server = run_server(command(sock), env, sock)
    twin = answers(sock)
    demo = answers(start_worker(None, 1).socket_path)
    for target in TARGETS:
        assert comparable(twin[target]) == comparable(demo[target]), target
        assert twin[target].header("X-Worker-Pid").isdigit(), target
    slept = twin["/random?max_ms=20"].body
    assert slept.startswith(b"slept ") and slept.endswith(b" ms\n") and 0 <= int(slept.split()[1]) <= 20
    if not name.startswith("granian"):  # granian serves from a child process
        assert twin["/hello"].header("X-Worker-Pid") == str(server.proc.pid)


def test_flask_app_answers_like_the_wsgi_demo(start_worker):
    require_module("flask")
    flask = answers(start_worker("headway.twins.flask_bench:app", 1).socket_path)
    demo = answers(start_worker(None, 1).socket_path)
    for target in ["/hello", "/json", "/fortunes"]:
        assert comparable(flask[target]) == comparable(demo[target]), target
        assert flask[target].header("X-Worker-Pid").isdigit(), target
    assert b"&lt;script&gt;" in flask["/fortunes"].body, "the template escapes the fortunes"


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def pids_of_new_connections(address, count):
    pids = []
    for _ in range(count):
        client = Client(address)
        response = client.request("GET", "/hello")
        client.close()
        assert response.body == b"Hello, world!\n"
        pids.append(response.header("X-Worker-Pid"))
    return pids


def test_node_twin_cluster_on_tcp(run_server):
    require("node", "apt-get install nodejs")
    port = free_port()
    env = python_env(PORT=str(port), WEB_CONCURRENCY="2")
    env.pop("HEADWAY_SOCKET", None)
    server = run_server(["node", str(TWINS / "demo.js")], env, ("127.0.0.1", port))
    # The port accepts once the first process listens; the second joins a moment later.
    seen = set()
    deadline = time.monotonic() + TIMEOUT
    while len(seen) < 2 and time.monotonic() < deadline:
        seen.update(pids_of_new_connections(("127.0.0.1", port), 4))
    assert len(seen) == 2
    assert str(server.proc.pid) not in seen


def test_puma_twin_on_tcp(run_server):
    require("puma", "apt-get install puma ruby-rack")
    port = free_port()
    command = ["puma", "-t", "2:2", "-b", f"tcp://127.0.0.1:{port}", str(TWINS / "demo.ru")]
    server = run_server(command, python_env(), ("127.0.0.1", port))
    assert pids_of_new_connections(("127.0.0.1", port), 2) == [str(server.proc.pid)] * 2
