"""Workers: started, restarted when they die, replaced when they hang, stopped gracefully;
any HTTP/1.1 server can be one (--cmd)."""

import hashlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time

import pytest

from conftest import (
    REPO,
    Load,
    Server,
    headway_binary,
    kill_worker_1_midway,
    parallel_gets,
    read_response,
    require,
    send_request,
    upload_head,
    upload_queued_early,
    wait_until,
)

TWINS = REPO / "python" / "headway" / "twins"


def test_killing_a_worker_fails_only_its_requests_and_it_comes_back(serve):
    server = serve("-w", "2", "-t", "2")
    before, results = kill_worker_1_midway(server, "/sleep/3000")
    statuses = sorted(status for status, _, _ in results)
    assert statuses == [200, 200, 502, 502]
    assert {headers["x-worker-pid"] for status, headers, _ in results if status == 200} == {str(before[2])}

    wait_until(lambda: server.stats()["workers"][0]["state"] == "ready", message="worker 1 to come back")
    after = {w["index"]: w for w in server.stats()["workers"]}
    assert after[1]["pid"] not in (0, before[1]) and after[1]["restarts"] == 1
    assert after[2]["pid"] == before[2] and after[2]["restarts"] == 0
    assert [status for status, _, _ in parallel_gets(server, ["/hello"] * 6)] == [200] * 6


def test_a_hung_worker_gets_504_and_is_replaced_once(serve):
    server = serve("-w", "1", "-t", "2", "--timeout", "1")
    pid = server.stats()["workers"][0]["pid"]
    # Both slots stuck: each request times out and reports the process, which is replaced once.
    results = parallel_gets(server, ["/sleep/5000", "/sleep/5000"])
    assert [(status, b"in time" in body) for status, _, body in results] == [(504, True)] * 2
    wait_until(lambda: server.stats()["workers"][0]["pid"] not in (0, pid), message="the worker to be replaced")
    fresh = server.stats()["workers"][0]["pid"]
    assert server.get("/hello")[0] == 200
    time.sleep(2)  # time for a stale report to have replaced the fresh process, as it once did
    worker = server.stats()["workers"][0]
    assert (worker["pid"], worker["restarts"], worker["recycles"]["timeout"]) == (fresh, 1, 1)


def test_reload_replaces_workers_one_at_a_time_without_failing_a_request(serve):
    server = serve("-w", "2", "-t", "2")
    old = {w["pid"] for w in server.stats()["workers"]}
    load = Load(server, "/sleep/20", clients=6)
    statuses = load.answers
    wait_until(lambda: len(statuses) > 20, message="load to start")
    server.signal(signal.SIGHUP)
    new_pids = lambda: {w["pid"] for w in server.stats()["workers"]}  # noqa: E731
    wait_until(lambda: not (new_pids() & old) and 0 not in new_pids() and b"reload done" in server.log(),
               timeout=60, message="both workers to be replaced")
    count = len(statuses)
    wait_until(lambda: len(statuses) > count + 20, message="load to go on after the reload")
    load.stop()
    assert set(statuses) == {200}
    assert [w["restarts"] for w in server.stats()["workers"]] == [0, 0], "a reload is not a crash"


def test_reload_stops_at_a_worker_that_cannot_start(serve, tmp_path):
    app = tmp_path / "flaky.py"
    app.write_text("def app(environ, start_response):\n    start_response('200 OK', [])\n    return [b'v1']\n")
    server = serve("-w", "2", "-t", "1", "--boot-timeout", "5", "flaky:app", cwd=tmp_path)
    app.write_text("raise RuntimeError('broken deploy')\n")
    server.signal(signal.SIGHUP)
    wait_until(lambda: b"reload stopped: worker 1" in server.log(), message="the reload to stop")
    workers = server.stats()["workers"]
    # The new process starts before the old one stops: both workers keep the old code and serve.
    assert [worker["state"] for worker in workers] == ["ready", "ready"]
    assert server.get("/")[2] == b"v1"


def test_a_reload_of_the_only_worker_serves_from_the_old_process_while_the_new_one_boots(serve, tmp_path):
    """gunicorn's order: the new process starts, on a socket of its own, while the old one serves;
    a one-process dyno never waits for a boot."""
    slow = tmp_path / "slow"
    worker = REPO / "tests" / "apps" / "slow_boot_worker.py"
    server = serve("-w", "1", "-t", "2", "--cmd", f"{sys.executable} {worker} {{socket}} {slow}")
    first = json.loads(server.get("/")[2])
    slow.write_text("")  # the next process takes two seconds to listen
    load = Load(server, "/", clients=2, record=lambda status, body: (status, status == 200 and json.loads(body)["pid"]))
    answers = load.answers
    wait_until(lambda: len(answers) > 10, message="load to start")
    hangup_at = len(answers)
    server.signal(signal.SIGHUP)
    wait_until(lambda: b"reload done" in server.log(), timeout=60, message="the reload")
    count = len(answers)
    wait_until(lambda: len(answers) > count + 10, message="load to go on after the reload")
    load.stop()
    assert {status for status, _ in answers} == {200}
    second = json.loads(server.get("/")[2])
    assert second["pid"] != first["pid"] and second["socket"] != first["socket"], "a process, a socket"
    # In order: the old process while the new one booted, then the new one alone.
    after_hangup = [pid for _, pid in answers[hangup_at:]]
    assert after_hangup.count(first["pid"]) >= 10, "the old process served during the two-second boot"
    assert after_hangup[-10:] == [second["pid"]] * 10
    assert server.stats()["workers"][0]["recycles"]["reload"] == 1


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_graceful_shutdown_finishes_queued_and_running_requests(serve, signum):
    server = serve("-w", "1", "-t", "2")
    socks = []
    for _ in range(5):  # 2 run, 3 wait in the queue
        sock = server.connect(timeout=60)
        send_request(sock, "GET", "/sleep/700")
        socks.append(sock)
    wait_until(lambda: server.stats()["queue"]["depth"] == 3, message="3 queued requests")
    server.signal(signum)
    statuses = [read_response(sock.makefile("rb"))[0] for sock in socks]
    assert statuses == [200] * 5
    assert server.wait(timeout=60) == 0
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", server.port), timeout=5)
    assert b"stopped" in server.log()


def test_idle_keep_alive_connections_do_not_delay_shutdown(serve):
    server = serve("-w", "1", "--keep-alive-timeout", "300")
    idle = server.connect()
    send_request(idle, "GET", "/hello")
    read_response(idle.makefile("rb"))
    server.signal(signal.SIGINT)
    assert server.wait(timeout=20) == 0
    assert idle.recv(10) == b""


@pytest.mark.parametrize("worker, said", [
    (["no_such_module:app"], "cannot import no_such_module:app: No module named 'no_such_module'"),
    (["--cmd", "echo boom >&2; exit 3"], "boom"),
], ids=["bundled", "cmd"])
def test_a_worker_that_fails_to_start_has_its_say_at_a_quieter_log_level(tmp_path, worker, said):
    """The worker's lines are logged at info; with --log-level warn the error that stops the start
    carries its last ones, instead of pointing at lines the log does not show."""
    result = subprocess.run([headway_binary(), "serve", "-w", "1", "-b", "127.0.0.1:0", "--log-level", "warn", *worker],
                            cwd=tmp_path, capture_output=True, text=True, timeout=60,
                            env={**os.environ, "PYTHONPATH": str(REPO / "python")})
    assert result.returncode == 1
    assert "before listening on its socket; its last output" in result.stderr
    assert said in result.stderr
    assert "is above" not in result.stderr


def test_app_that_cannot_be_imported_stops_startup_with_a_clear_message(tmp_path):
    result = subprocess.run([headway_binary(), "serve", "-w", "2", "-b", "127.0.0.1:0", "no_such_module:app"],
                            cwd=tmp_path, capture_output=True, text=True, timeout=60,
                            env={**os.environ, "PYTHONPATH": str(REPO / "python")})
    assert result.returncode == 1
    last_line = result.stderr.strip().splitlines()[-1]
    assert last_line.startswith("headway: worker 1 exited with exit status: 1 before listening on its socket")
    # Once, from the first worker, which starts alone; nothing but the missing module and the
    # interpreter that looked for it.
    assert result.stderr.count("cannot import no_such_module:app: No module named 'no_such_module'") == 1
    assert "worker 2" not in result.stderr and "Traceback" not in result.stderr
    assert "--python or $HEADWAY_PYTHON names another" in result.stderr


def test_a_module_alone_is_its_application_and_one_without_it_says_so_once(tmp_path):
    (tmp_path / "site_wsgi.py").write_text("app = None\n")
    result = subprocess.run([headway_binary(), "serve", "-w", "2", "-b", "127.0.0.1:0", "site_wsgi"],
                            cwd=tmp_path, capture_output=True, text=True, timeout=60,
                            env={**os.environ, "PYTHONPATH": str(REPO / "python")})
    assert result.returncode == 1
    assert result.stderr.count("site_wsgi has no attribute 'application' (an APP without ':callable' is "
                               "site_wsgi:application; name yours)") == 1


def test_a_python_that_cannot_be_run_is_named(tmp_path):
    not_runnable = tmp_path / "python3"
    not_runnable.write_text("")
    for python, problem in [(tmp_path / "nowhere" / "python3", "no such file"),
                            (not_runnable, "not an executable file"),
                            ("python3.no-such-version", "not found on PATH")]:
        result = subprocess.run([headway_binary(), "serve", "-b", "127.0.0.1:0", "--python", str(python)],
                                capture_output=True, text=True, timeout=30)
        assert result.returncode == 1
        assert f"--python {python} (or $HEADWAY_PYTHON): {problem}" in result.stderr


def test_the_log_is_one_format_with_each_workers_lines_and_slots(tmp_path):
    """Every line on stderr is the front's JSON, the worker's own lines and an app's prints
    included, each saying which worker; each worker's slots are logged once it knows them."""
    (tmp_path / "noisy.py").write_text(
        "import sys\n"
        "print('printed by the app at import', file=sys.stderr)\n"
        "def app(environ, start_response):\n"
        "    start_response('200 OK', [('Content-Length', '2')])\n"
        "    return [b'ok']\n")
    server = Server(["-w", "2", "--log-format", "json", "noisy:app"], cwd=tmp_path)
    try:
        assert server.get("/")[0] == 200
        server.signal(signal.SIGTERM)
        assert server.wait() == 0
        lines = server.log().decode().splitlines()
    finally:
        server.stop()
    events = [json.loads(line) for line in lines]  # no line in another format
    starting = next(event for event in events if event["message"].startswith("starting"))
    assert "slot" not in starting["message"], "-t auto: the slots are not known before the workers say"
    printed = [event for event in events if event["message"] == "printed by the app at import"]
    assert sorted(event["span"]["n"] for event in printed) == [1, 2]
    serving = [event for event in events if "listening, 5 slot(s) of a WSGI app" in event["message"]]
    assert len(serving) == 2


@pytest.mark.parametrize("args, message", [
    (["--threads", "0"], "--threads must be between 1 and 1024"),
    (["--bind", "nowhere"], "--bind 'nowhere' is not HOST:PORT or unix:PATH"),
    (["--max-body", "lots"], "'lots' is not a size"),
    (["--queue-timeout", "soon"], "'soon' is not a number of seconds"),
    (["--frobnicate"], "unexpected argument '--frobnicate'"),
    (["--port", "8000"], "the address is one flag: '-b HOST:PORT' (--bind), e.g. -b 0.0.0.0:8000, not --port"),
    (["--host=0.0.0.0"], "the address is one flag: '-b HOST:PORT' (--bind), e.g. -b 0.0.0.0:8000, not --host"),
])
def test_wrong_flags_get_one_clear_line(args, message):
    result = subprocess.run([headway_binary(), "serve", *args], capture_output=True, text=True, timeout=30)
    assert result.returncode != 0
    assert message in result.stderr
    assert "panicked" not in result.stderr


def test_port_in_use_is_reported(serve):
    server = serve("-w", "1")
    result = subprocess.run([headway_binary(), "serve", "-w", "1", "-b", f"127.0.0.1:{server.port}"],
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 1
    assert f"cannot listen on http://127.0.0.1:{server.port}: Address already in use" in result.stderr


def test_unix_socket_bind(serve, tmp_path):
    path = tmp_path / "public.sock"
    server = serve("-w", "1", "-b", f"unix:{path}")
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(30)
        sock.connect(str(path))
        send_request(sock, "GET", "/hello", close=True)
        assert read_response(sock.makefile("rb"))[2] == b"Hello, world!\n"
    server.stop()
    assert not path.exists(), "the socket file is removed at exit"


def test_web_concurrency_sets_the_number_of_workers(serve):
    server = serve("-t", "2", env={"WEB_CONCURRENCY": "3"})
    assert [w["index"] for w in server.stats()["workers"]] == [1, 2, 3]
    assert server.stats()["slots"]["total"] == 6


def test_stats_command_prints_the_stats(serve):
    server = serve("-w", "2", "-t", "3")
    server.get("/hello")
    text = server.stats_command()
    assert "queue        depth 0" in text
    assert "slots        0 busy of 6" in text
    assert "responses    200: 1" in text
    stats = json.loads(server.stats_command("--json"))
    assert [w["index"] for w in stats["workers"]] == [1, 2]
    prometheus = server.metrics()
    assert "headway_queue_depth 0" in prometheus
    assert 'headway_responses_total{code="200"} 1' in prometheus
    assert server.get("/stats")[0] == 404, "stats are not on the public port"


def test_stats_command_reports_an_unreachable_server():
    result = subprocess.run([headway_binary(), "stats", "--control", "127.0.0.1:9"],
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 1
    assert result.stderr.startswith("headway: cannot read stats from http://127.0.0.1:9")


def test_puma_in_single_mode_as_the_worker(serve):
    require("puma", "apt-get install puma ruby-rack")
    server = serve("-w", "2", "-t", "5", "--cmd", f"puma -t 5:5 -b unix://{{socket}} {TWINS / 'demo.ru'}")
    pids = {str(w["pid"]) for w in server.stats()["workers"]}
    results = parallel_gets(server, ["/hello"] * 10 + ["/sleep/50"] * 10)
    assert [status for status, _, _ in results] == [200] * 20
    assert results[0][2] == b"Hello, world!\n"
    # Each worker is `sh -c puma ...`, so the pid that answers is in the worker's process group.
    answering = {headers["x-worker-pid"] for _, headers, _ in results}
    groups = {str(os.getpgid(int(pid))) for pid in answering}
    assert groups <= pids


def test_worker_closing_idle_slot_connections_costs_no_request(serve, tmp_path):
    """Puma closes keep-alive connections idle longer than its persistent_timeout (20 s by
    default, 1 s here). The slots must reconnect on their own: no request may fail for it."""
    require("puma", "apt-get install puma ruby-rack")
    config = tmp_path / "puma.rb"
    config.write_text("persistent_timeout 1\n")
    server = serve("-w", "1", "-t", "3", "--cmd", f"puma -C {config} -t 3:3 -b unix://{{socket}} {TWINS / 'demo.ru'}")
    for _ in range(3):
        assert [status for status, _, _ in parallel_gets(server, ["/hello"] * 6)] == [200] * 6
        time.sleep(2.5)  # longer than Puma's persistent_timeout: every slot connection is closed
    assert server.stats()["responses"] == {"200": 18}


@pytest.mark.parametrize("path, seen", [("/stream", "stream cut"), ("/wait", "wait: connection closed")],
                         ids=["streaming", "before-the-head"])
def test_a_cmd_worker_hears_that_the_client_left(serve, tmp_path, path, seen):
    """The bundled worker's app hears `http.disconnect`; any other server hears the front close
    its connection, as behind a proxy, and the slot goes back to work."""
    notes = tmp_path / "notes"
    worker = REPO / "tests" / "apps" / "hangup_worker.py"
    server = serve("-w", "1", "-t", "1", "--cmd", f"{sys.executable} {worker} {{socket}} {notes}")
    with server.connect() as client:
        send_request(client, "GET", path)
        if path == "/stream":
            assert client.recv(4096).startswith(b"HTTP/1.1 200")
        else:
            wait_until(lambda: server.stats()["workers"][0]["busy"] == 1, message="the request to start")
    wait_until(lambda: notes.exists() and seen in notes.read_text(), message=f"the worker to see {seen!r}")
    assert notes.read_text() == f"{seen}\n"
    # The one slot connects again and serves the next request; nothing failed on the way.
    assert server.get("/")[::2] == (200, b"ok")
    assert server.stats()["workers"][0]["restarts"] == 0


def test_a_cmd_worker_reads_a_fast_upload_as_it_arrives_and_hears_when_its_client_leaves(serve, tmp_path):
    """A large body sent fast queues before its end (docs/design/early-uploads.md), for an HTTP
    worker too: the worker gets every byte in order, and when a client leaves mid-body, the front
    closes the worker's connection, as behind a proxy."""
    notes = tmp_path / "notes"
    worker = REPO / "tests" / "apps" / "hangup_worker.py"
    server = serve("-w", "1", "-t", "1", "--max-body", "64MiB", "--request-buffer", "1MiB",
                   "--cmd", f"{sys.executable} {worker} {{socket}} {notes}")
    body = os.urandom(16 << 20)
    head = upload_head(len(body))
    with upload_queued_early(server, head, body[:8 << 20]) as client:
        client.sendall(body[8 << 20:])
        status, _, reply = read_response(client.makefile("rb"))
    assert status == 200 and json.loads(reply) == {"length": len(body), "sha256": hashlib.sha256(body).hexdigest()}
    # An attempt above that was queued late and left noted a cut of its own: only what follows counts.
    noted = len(notes.read_text()) if notes.exists() else 0
    with upload_queued_early(server, head, body[:4 << 20]):
        pass
    wait_until(lambda: notes.exists() and "upload cut" in notes.read_text()[noted:],
               message="the worker to see the body cut")
    assert server.get("/")[::2] == (200, b"ok")
    assert server.stats()["workers"][0]["restarts"] == 0


def test_a_cmd_worker_response_nobody_asked_for_reaches_no_client(serve):
    """A worker that writes a second response 0.3 s after answering: the slot's connection holds
    bytes nobody asked for, so it is closed and counted, and the next request goes on a new one
    and gets its own answer, whether it comes after the stray bytes or before them."""
    worker = REPO / "tests" / "apps" / "unruly_worker.py"
    server = serve("-w", "1", "-t", "1", "--cmd", f"{sys.executable} {worker} {{socket}}")
    answers = []
    with server.connect() as client:
        stream = client.makefile("rb")

        def get(path):
            send_request(client, "GET", path)
            answers.append(read_response(stream)[::2])

        get("/stray")
        time.sleep(0.6)  # the stray response arrives while the slot is idle
        get("/after-the-stray")
        get("/stray")
        get("/before-the-stray")  # answered at once; the stray follows on the idle connection
        time.sleep(0.6)
        get("/doubled")  # the stray right behind the answer
        get("/last")
    assert answers == [(200, path) for path in (b"/stray", b"/after-the-stray", b"/stray", b"/before-the-stray",
                                                b"/doubled", b"/last")]
    stats = server.stats()
    assert stats["workers"][0]["unrequested"] == 3
    assert stats["workers"][0]["restarts"] == 0
    assert 'headway_worker_unrequested_total{worker="1"} 3' in server.metrics()
    warnings = re.findall(rb"WARN the worker sent bytes no request asked for; closing its connection worker=1\n",
                          server.log())
    assert len(warnings) == 3


def test_a_cmd_worker_shuts_down_gracefully_not_killed(serve, tmp_path):
    """A --cmd worker runs as `sh -c COMMAND`: the shell dies at once on SIGTERM while the
    server it started takes a moment to stop. The front must wait for the whole process group,
    so the server finishes its own shutdown instead of being SIGKILLed with the shell."""
    marker = tmp_path / "stopped"
    worker = REPO / "tests" / "apps" / "slow_exit_worker.py"
    server = serve("-w", "1", "-t", "2", "--cmd", f"{sys.executable} {worker} {{socket}} {marker}")
    assert server.get("/")[2] == b"ok"
    server.signal(signal.SIGTERM)
    assert server.wait(timeout=60) == 0
    assert marker.read_text() == "stopped cleanly\n"


def test_node_http_server_as_the_worker(serve):
    require("node", "apt-get install nodejs")
    server = serve("-w", "2", "-t", "4", "--cmd", f"node {TWINS / 'demo.js'}")
    results = parallel_gets(server, ["/hello"] * 8 + ["/sleep/30"] * 8)
    assert [status for status, _, _ in results] == [200] * 16
    assert results[0][2] == b"Hello, world!\n"
    assert len({headers["x-worker-pid"] for _, headers, _ in results}) == 2
