"""The worker as a process: the CLI, app loading, T slots and no more, signals."""

import json
import signal
import socket
import subprocess
import threading
import time

import pytest

from worker_client import TIMEOUT, WORKER_PYTHON, Worker, start_process

HELLO = b"Hello, world!\n"


def test_never_more_than_t_requests_at_once(start_worker):
    threads = 3
    worker = start_worker("worker_apps:app", threads)
    clients = [worker.client() for _ in range(threads + 2)]
    answers = []

    def ask(client):
        # A slot keeps its connection until the client closes it: each asker lets go after
        # its answer, which is what frees a slot for the connections waiting in the backlog.
        answers.append(client.request("GET", "/concurrency?ms=300", [("Connection", "close")]).body)

    askers = [threading.Thread(target=ask, args=(client,)) for client in clients]
    for asker in askers:
        asker.start()
    for asker in askers:
        asker.join(TIMEOUT)
    assert answers == [b"done\n"] * (threads + 2)  # the two extra connections waited, then were served
    report = json.loads(worker.get("/concurrency?report=1").body)
    assert report == {"max": threads, "running": 0}


def test_a_connection_beyond_t_waits_for_a_free_slot(start_worker):
    worker = start_worker(None, 1)
    first = worker.client()
    assert first.request("GET", "/hello").body == HELLO
    second = worker.client()  # connects (backlog) but no thread serves it while `first` is open
    second.sock.settimeout(0.3)
    second.send(b"GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
    with pytest.raises(socket.timeout):
        second.sock.recv(1)
    first.close()
    second.sock.settimeout(TIMEOUT)
    assert second.read_response().body == HELLO


def test_sigterm_lets_the_request_in_flight_finish(start_worker, tmp_path):
    worker = start_worker("worker_apps:app", 2)
    idle = worker.client()
    assert idle.request("GET", "/closed").status == 200  # an idle keep-alive connection
    mark = tmp_path / "started"
    busy = worker.client()
    busy.send(b"GET /concurrency?ms=500&mark=%s HTTP/1.1\r\nHost: x\r\n\r\n" % str(mark).encode())
    deadline = time.monotonic() + TIMEOUT
    while not mark.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert mark.exists()
    worker.proc.send_signal(signal.SIGTERM)
    assert idle.is_closed()  # closed at once, while the other request is still running
    assert worker.proc.poll() is None
    response = busy.read_response()
    assert response.status == 200 and response.body == b"done\n"
    assert response.header("Connection") == "close"
    assert worker.proc.wait(TIMEOUT) == 0
    assert not worker.socket_path.exists()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_signal_on_an_idle_worker_exits_0(start_worker, signum):
    worker = start_worker(None, 2)
    assert worker.get("/hello").body == HELLO
    assert worker.stop(signum) == 0
    assert "Traceback" not in worker.stderr()


def run_to_exit(tmp_path, args, **kwargs):
    proc, stderr_path = start_process(tmp_path, args, **kwargs)
    stdout, _ = proc.communicate(timeout=TIMEOUT)
    return proc.returncode, stdout, stderr_path.read_text()


# What a failed import's line ends with: which interpreter, and how to name another.
WHICH_PYTHON = "(with {python}, Python {version}; --python or $HEADWAY_PYTHON names another)"


@pytest.mark.parametrize("app, reason", [
    ("no_such_module:app", "No module named 'no_such_module' " + WHICH_PYTHON),
    ("no_such_module.wsgi:app", "No module named 'no_such_module' " + WHICH_PYTHON),
    ("broken_app:app", "this module fails to import on purpose"),
    ("worker_apps:no_such_name", "worker_apps has no attribute 'no_such_name'"),
    ("worker_apps:ROUTES.missing", "worker_apps has no attribute 'ROUTES.missing'"),
    ("worker_apps:_lock", "worker_apps:_lock is not callable"),
    ("worker_apps", "worker_apps has no attribute 'application' (an APP without ':callable' is "
                    "worker_apps:application; name yours)"),
    ("worker_apps:", "expected module:callable, got 'worker_apps:'"),
])
def test_bad_app_exits_1_with_one_line(tmp_path, socket_dir, app, reason):
    path = socket_dir / "w.sock"
    status, stdout, stderr = run_to_exit(tmp_path, ["--socket", str(path), app])
    assert status == 1
    version = subprocess.run([WORKER_PYTHON, "-c", "import platform; print(platform.python_version())"],
                             capture_output=True, text=True, check=True).stdout.strip()
    python = subprocess.run([WORKER_PYTHON, "-c", "import sys; print(sys.executable)"],
                            capture_output=True, text=True, check=True).stdout.strip()
    reason = reason.format(python=python, version=version)
    assert stderr.splitlines()[-1] == f"headway worker: cannot import {app}: {reason}"
    assert stdout == b""
    assert not path.exists()  # never listened


def test_import_error_prints_the_traceback(tmp_path, socket_dir):
    _, _, stderr = run_to_exit(tmp_path, ["--socket", str(socket_dir / "w.sock"), "broken_app:app"])
    assert "Traceback (most recent call last)" in stderr and "broken_app.py" in stderr


def test_an_app_module_that_is_nowhere_gets_one_line_and_no_traceback(tmp_path, socket_dir):
    _, _, stderr = run_to_exit(tmp_path, ["--socket", str(socket_dir / "w.sock"), "no_such_module:app"])
    assert stderr.splitlines() == [line for line in stderr.splitlines() if line.startswith("headway worker: ")]
    assert "Traceback" not in stderr


def test_a_missing_package_of_the_app_shows_where_it_is_imported_and_which_python(tmp_path, socket_dir):
    (tmp_path / "needs_missing.py").write_text("import no_such_package_x\napp = None\n")
    _, _, stderr = run_to_exit(tmp_path, ["--socket", str(socket_dir / "w.sock"), "needs_missing:app"],
                               cwd=tmp_path)
    assert "Traceback (most recent call last)" in stderr and "needs_missing.py" in stderr
    assert stderr.splitlines()[-1].endswith("--python or $HEADWAY_PYTHON names another)")


def test_a_module_alone_serves_its_application(tmp_path, socket_dir):
    assert body_of_a_written_app(tmp_path, socket_dir, "site_wsgi", "application", "site_wsgi") == b"site_wsgi"


def test_factory_form_and_socket_from_the_environment(tmp_path, socket_dir):
    path = socket_dir / "env.sock"
    proc, stderr_path = start_process(tmp_path, ["worker_apps:make_app()"], env={"HEADWAY_SOCKET": str(path)})
    worker = Worker(proc, path, stderr_path).wait_ready()
    try:
        assert worker.get("/closed").status == 200
        assert worker.stop() == 0
    finally:
        proc.kill()
        proc.wait(TIMEOUT)
        proc.stdout.close()
    lines = stderr_path.read_text().splitlines()
    assert lines == [f"headway worker: pid {proc.pid} serving worker_apps:make_app() on {path} with 1 threads"]


def test_a_stale_socket_file_is_replaced(start_worker, socket_dir):
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(str(socket_dir / "w0.sock"))
    stale.close()  # the file stays, nobody listens: what a killed worker leaves behind
    worker = start_worker(None, 1)
    assert worker.get("/hello").body == HELLO


def test_a_regular_file_at_the_socket_path_is_not_replaced(tmp_path, socket_dir):
    path = socket_dir / "file"
    path.write_text("precious")
    status, _, stderr = run_to_exit(tmp_path, ["--socket", str(path)])
    assert status == 1
    assert stderr.splitlines()[-1] == f"headway worker: {path} exists and is not a socket; not replacing it"
    assert path.read_text() == "precious"


@pytest.mark.parametrize("args, message", [
    ([], "--socket PATH is required (or set HEADWAY_SOCKET)"),
    (["--socket", "x", "--threads", "0"], "argument --threads: expected a positive integer, got '0'"),
    (["--socket", "x", "--bogus"], "unrecognized arguments: --bogus"),
])
def test_bad_command_line_exits_2_with_a_message(tmp_path, args, message):
    env = {"HEADWAY_SOCKET": ""}
    status, _, stderr = run_to_exit(tmp_path, args, env=env)
    assert status == 2
    assert stderr.splitlines()[-1].endswith(message)
    assert "Traceback" not in stderr


def test_app_directory_is_importable_from_the_working_directory(tmp_path, socket_dir):
    assert body_of_a_written_app(tmp_path, socket_dir, "here_app", "app", "here_app:app") == b"here_app"


def body_of_a_written_app(tmp_path, socket_dir, module, callable_name, spec):
    """Writes `module`.py in `tmp_path`, a WSGI app `callable_name` that answers its module's name,
    serves `spec` from there and returns the body of a GET; the worker must then stop cleanly."""
    (tmp_path / f"{module}.py").write_text(
        f"def {callable_name}(environ, start_response):\n"
        f"    start_response('200 OK', [('Content-Length', '{len(module)}')])\n"
        f"    return [b'{module}']\n")
    path = socket_dir / "w.sock"
    proc, stderr_path = start_process(tmp_path, ["--socket", str(path), spec], cwd=tmp_path)
    worker = Worker(proc, path, stderr_path).wait_ready()
    try:
        return worker.get("/").body
    finally:
        assert worker.stop() == 0
        proc.stdout.close()

