"""Worker lifecycle: recycling after --max-requests or above --max-worker-memory, counted by
cause; no request fails while a worker is replaced."""

import subprocess
import threading

from conftest import REPO, headway_binary, read_response, send_request, wait_until

TWINS = REPO / "python" / "headway" / "twins"


def recycles(server, cause):
    return sum(worker["recycles"][cause] for worker in server.stats()["workers"])


def run_clients(server, clients, requests_each, path="/hello"):
    """`clients` keep-alive connections sending `requests_each` requests one after the other;
    returns every status (None for a connection that broke)."""
    statuses = []

    def client():
        with server.connect(timeout=60) as sock:
            stream = sock.makefile("rb")
            for _ in range(requests_each):
                try:
                    send_request(sock, "GET", path)
                    statuses.append(read_response(stream)[0])
                except (ConnectionError, OSError):
                    statuses.append(None)
                    return

    threads = [threading.Thread(target=client) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    return statuses


def test_max_requests_recycles_workers_with_no_failed_request(serve):
    server = serve("-w", "2", "-t", "2", "--max-requests", "50", "--max-requests-jitter", "10")
    statuses = run_clients(server, clients=4, requests_each=250, path="/sleep/20")
    assert len(statuses) == 1000 and set(statuses) == {200}
    wait_until(lambda: all(w["state"] == "ready" for w in server.stats()["workers"]), message="workers ready")
    recycled = recycles(server, "max_requests")
    # Every process serves at least 50, so 1000 requests recycle at most 20 times; at 50-60 each,
    # and more while its replacement starts (it serves on meanwhile), they make 5 or more.
    assert 5 <= recycled <= 20, recycled
    workers = server.stats()["workers"]
    assert [w["restarts"] for w in workers] == [0, 0], "a recycle is not a crash"
    assert sum(w["recycles"]["crash"] + w["recycles"]["timeout"] for w in workers) == 0


def requests_until_recycled(server, times, limit=2000):
    """Requests one after the other until the workers were recycled `times` times (a process
    serves on while its replacement starts, so how many that takes depends on the boot);
    returns every status."""
    statuses = []
    while recycles(server, "max_requests") < times:
        assert len(statuses) < limit, f"{times} recycles in {limit} requests"
        statuses.append(server.get("/hello")[0])
    return statuses


def test_max_requests_counts_for_cmd_workers_too(serve):
    server = serve("-w", "1", "-t", "1", "--max-requests", "5", "--cmd", f"node {TWINS / 'demo.js'}")
    statuses = requests_until_recycled(server, 2)
    assert set(statuses) == {200} and len(statuses) >= 10


def test_memory_limit_recycles_a_leaking_worker(serve):
    server = serve("-w", "1", "-t", "1", "--max-worker-memory", "120MiB", "leaky:app")
    first = server.stats()["workers"][0]["pid"]
    statuses = []

    def leaked_and_recycled():
        status, _, _ = server.get("/leak")
        statuses.append(status)
        return recycles(server, "memory") >= 1

    # 16 MiB a request passes the limit by the 8th; the front reads memory once a second and
    # recycles after three readings above it. Bounded: 150 requests, 0.1 s apart at most.
    wait_until(leaked_and_recycled, timeout=60, interval=0.1, message="a memory recycle")
    assert set(statuses) == {200}
    wait_until(lambda: server.stats()["workers"][0]["state"] == "ready", message="the new worker")
    worker = server.stats()["workers"][0]
    assert worker["pid"] != first and worker["restarts"] == 0
    assert worker["rss_bytes"] < 120 << 20, "the new process starts small"
    status, _, _ = server.get("/hello")
    assert status == 200


def test_recycles_by_cause_are_in_metrics(serve):
    server = serve("-w", "1", "-t", "1", "--max-requests", "2")
    assert set(requests_until_recycled(server, 2)) == {200}
    count = recycles(server, "max_requests")  # no request is made any more: it stays
    metrics = server.metrics()
    assert f'headway_worker_recycles_total{{worker="1",cause="max_requests"}} {count}' in metrics
    assert 'headway_worker_recycles_total{worker="1",cause="crash"} 0' in metrics
    text = server.stats_command()
    assert f"recycles     {count} max requests, 0 memory, 0 timeout, 0 crash, 0 reload" in text


RELOADABLE = '''
import os

def app(environ, start_response):
    body = {body!r}
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body))),
                              ("X-Worker-Pid", str(os.getpid()))])
    return [body]
'''


def test_reload_picks_up_an_edit_and_survives_a_syntax_error(serve, tmp_path):
    app = tmp_path / "reloadable.py"
    app.write_text(RELOADABLE.format(body=b"first"))
    # No bytecode cache: two edits within a second could otherwise look unchanged to Python.
    server = serve("-w", "2", "-t", "1", "--reload", "reloadable:app", cwd=tmp_path,
                   env={"PYTHONDONTWRITEBYTECODE": "1"})
    assert server.get("/")[2] == b"first"

    app.write_text(RELOADABLE.format(body=b"second"))
    wait_until(lambda: server.get("/")[2] == b"second" and b"reload done" in server.log(), timeout=30,
               interval=0.2, message="the edit to be served")
    pids = {w["pid"] for w in server.stats()["workers"]}

    app.write_text("def app(environ, start_response:\n")  # a syntax error
    wait_until(lambda: b"not reloading" in server.log(), timeout=30, interval=0.1, message="the failed check")
    assert b"SyntaxError" in server.log()
    assert [server.get("/")[:3:2] for _ in range(4)] == [(200, b"second")] * 4
    assert {w["pid"] for w in server.stats()["workers"]} == pids, "the workers were left alone"

    app.write_text(RELOADABLE.format(body=b"third, fixed"))
    # The fix is served as soon as one new worker is up; the recycles are counted once both are.
    wait_until(lambda: server.get("/")[2] == b"third, fixed" and server.log().count(b"reload done") >= 2,
               timeout=30, interval=0.2, message="the fix")
    assert sum(w["recycles"]["reload"] for w in server.stats()["workers"]) >= 4


def test_lifecycle_flags_are_checked_before_anything_starts(tmp_path):
    for args, message in [
        (["--reload", "--reload-dir", str(tmp_path / "missing")], b"--reload-dir"),
        (["--reload", "--reload-include", "[*.py"], b"--reload-include"),
        (["--max-requests-jitter", "5"], b"--max-requests-jitter needs --max-requests"),
        (["--max-worker-memory", "lots"], b"--max-worker-memory"),
        (["--reload-dir", str(tmp_path)], b"--reload-dir and --reload-include need --reload"),
        (["--hooks", "preload_hooks", "--cmd", "true"], b"--hooks runs in the bundled worker"),
    ]:
        result = subprocess.run([headway_binary(), "serve", "-b", "127.0.0.1:0", *args], capture_output=True,
                                timeout=30)
        assert result.returncode != 0 and message in result.stderr, (args, result.stderr)
