"""Adaptive W (`-w MIN:MAX`): the pool grows while requests wait for a slot, shrinks when idle,
stays within MIN, MAX and --max-memory, moves by hand (SIGTTIN, SIGTTOU, `headway workers`),
drains a worker it removes, and serves on when a worker added fails to start. Flag values are
short so each test takes seconds; the assertions are on /stats and status codes."""

import re
import signal
import subprocess
import sys
import threading

import pytest

from conftest import REPO, Load, headway_binary, parallel_gets, require, wait_until

TWINS = REPO / "python" / "headway" / "twins"
# The demo app (its /sleep/100) in each kind of worker: the bundled Python one, the Rack worker,
# and a --cmd server; the first two forked from a preloaded parent.
KINDS = {
    "python": ("--preload",),
    "rack": ("--preload", str(TWINS / "demo.ru")),
    "cmd": ("--cmd", f"node {TWINS / 'demo.js'}"),
}


def scaling(server):
    return server.stats()["scaling"]


def workers_now(server):
    return scaling(server)["workers"]


class Watch:
    """Reads W from /stats every 0.1 s until stopped: the fewest and the most seen."""

    def __init__(self, server):
        self.seen, self._stop = [], threading.Event()

        def watch():
            while not self._stop.wait(0.1):
                self.seen.append(workers_now(server))

        self._thread = threading.Thread(target=watch)
        self._thread.start()

    def stop(self):
        self._stop.set()
        self._thread.join(timeout=10)
        return min(self.seen), max(self.seen)


@pytest.mark.parametrize("kind", KINDS)
def test_grows_under_a_queue_that_waits_to_max_and_shrinks_to_min_when_idle(serve, kind):
    if kind != "python":
        require({"rack": "ruby", "cmd": "node"}[kind], "scripts/setup --test")
    # 2 slots, 8 clients asking for 100 ms each: requests wait for a slot all along.
    server = serve("-w", "1:3", "-t", "2", "--worker-idle-timeout", "1", *KINDS[kind])
    watch = Watch(server)
    load = Load(server, "/sleep/100", clients=8)
    try:
        wait_until(lambda: workers_now(server) == 3, timeout=30, message="W grown to MAX")
        wait_until(lambda: scaling(server)["events"]["queue_wait"] >= 2, message="two adds counted")
    finally:
        load.stop()
    wait_until(lambda: workers_now(server) == 1, timeout=30, message="W back to MIN")
    fewest, most = watch.stop()
    assert (fewest, most) == (1, 3), "never below MIN nor above MAX"
    assert set(load.answers) == {200}
    stats = server.stats()
    assert stats["scaling"]["events"]["idle"] >= 2
    assert stats["scaling"]["min"] == 1 and stats["scaling"]["max"] == 3
    assert stats["scaling"]["worker_seconds"] > stats["uptime_secs"] - 1, "one worker at least, all along"
    assert re.search(rb"adding (a worker|2 workers) \(1 to [23]\): requests waited", server.log())
    assert b"a worker's slots stood idle for --worker-idle-timeout" in server.log()
    metrics = server.metrics()
    assert "headway_workers 1\n" in metrics and "headway_workers_max 3\n" in metrics
    assert 'headway_scaling_events_total{cause="queue_wait"} ' in metrics
    assert "headway_slots_busy_ratio " in metrics and 'headway_queue_wait_recent_seconds{quantile="0.99"} ' in metrics


def test_adds_stop_at_the_memory_budget(serve):
    # One worker already passes a budget of 1 MiB: no add, however long requests wait.
    server = serve("-w", "1:3", "-t", "1", "--max-memory", "1MiB")
    load = Load(server, "/sleep/100", clients=4)
    try:
        wait_until(lambda: scaling(server)["events"]["memory_cap"] >= 1, message="an add refused by the budget")
        refused = server.log().count(b"would pass --max-memory")
        server.signal(signal.SIGTTIN)
        wait_until(lambda: server.log().count(b"would pass --max-memory") > refused, message="TTIN refused too")
    finally:
        load.stop()
    assert workers_now(server) == 1
    assert scaling(server)["events"]["signal"] == 0
    assert set(load.answers) == {200}


def test_ttin_and_ttou_move_w_within_min_and_max(serve):
    server = serve("-w", "2:3", "-t", "1")
    server.signal(signal.SIGTTIN)
    wait_until(lambda: [w["state"] for w in server.stats()["workers"]] == ["ready"] * 3, message="a third worker")
    server.signal(signal.SIGTTIN)
    wait_until(lambda: b"not adding a worker: 3 is the most (3)" in server.log(), message="TTIN refused at MAX")
    server.signal(signal.SIGTTOU)
    wait_until(lambda: len(server.stats()["workers"]) == 2, message="back to two")
    server.signal(signal.SIGTTOU)
    wait_until(lambda: b"not removing a worker: 2 is the fewest (2)" in server.log(), message="TTOU refused at MIN")
    assert workers_now(server) == 2
    assert scaling(server)["events"]["signal"] == 2
    assert server.get("/hello")[0] == 200


def test_a_fixed_count_moves_by_hand_only(serve):
    server = serve("-w", "1", "-t", "1")
    server.signal(signal.SIGTTIN)
    wait_until(lambda: workers_now(server) == 2, message="a second worker")
    assert scaling(server)["automatic"] is False
    server.signal(signal.SIGTTOU)
    wait_until(lambda: len(server.stats()["workers"]) == 1, message="back to one")


def test_a_range_tells_each_worker_the_most_there_may_be(serve):
    # WSGI's wsgi.multiprocess is whether other processes may run the app: with -w 1:3 they may.
    server = serve("-w", "1:3", "-t", "1")
    pid = server.stats()["workers"][0]["pid"]
    with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
        arguments = cmdline.read().split(b"\0")
    assert arguments[arguments.index(b"--workers") + 1] == b"3"


def workers_command(server, change):
    return subprocess.run([headway_binary(), "workers", change, "--control", server.control],
                          capture_output=True, text=True, timeout=30)


def test_the_control_command_adds_and_removes_within_the_range(serve):
    server = serve("-w", "1:2", "-t", "1")
    added = workers_command(server, "add")
    assert added.returncode == 0 and "adding a worker (1 to 2)" in added.stdout, added
    wait_until(lambda: [w["state"] for w in server.stats()["workers"]] == ["ready"] * 2, message="two ready")
    refused = workers_command(server, "add")
    assert refused.returncode != 0 and "2 is the most (2)" in refused.stderr, refused
    removed = workers_command(server, "remove")
    assert removed.returncode == 0 and "removing worker" in removed.stdout, removed
    wait_until(lambda: len(server.stats()["workers"]) == 1, message="back to one")
    assert workers_command(server, "remove").returncode != 0
    assert scaling(server)["events"]["control"] == 2


def test_no_request_fails_while_a_worker_is_removed(serve):
    server = serve("-w", "1:2", "-t", "2")
    assert workers_command(server, "add").returncode == 0
    wait_until(lambda: [w["state"] for w in server.stats()["workers"]] == ["ready"] * 2, message="two ready")
    results = []
    thread = threading.Thread(target=lambda: results.extend(parallel_gets(server, ["/sleep/1000"] * 6)))
    thread.start()
    # Every slot busy, two requests waiting: the worker removed has requests of its own to finish.
    wait_until(lambda: server.stats()["slots"]["busy"] == 4, message="every slot busy")
    assert workers_command(server, "remove").returncode == 0
    thread.join(timeout=60)
    assert [status for status, _, _ in results] == [200] * 6
    wait_until(lambda: len(server.stats()["workers"]) == 1, message="the removed worker gone")
    assert b"left the pool" in server.log()


def test_a_worker_that_fails_to_start_does_not_stop_the_others(serve):
    # Only worker 1 starts; any other exits at once, as a broken deploy would.
    worker = f"test \"$HEADWAY_WORKER\" = 1 || exit 3; exec {sys.executable} slow_exit_worker.py {{socket}} /dev/null"
    server = serve("-w", "1:2", "-t", "1", "--cmd", worker)
    server.signal(signal.SIGTTIN)
    wait_until(lambda: b"a worker added did not start" in server.log(), message="the add failed")
    assert server.get("/")[0] == 200
    assert [w["index"] for w in server.stats()["workers"]] == [1]
    # Under a queue that waits the pool tries again, with pauses, and serves on meanwhile: four
    # clients of 50 ms requests on one slot always have three waiting.
    load = Load(server, "/?ms=50", clients=4)
    try:
        wait_until(lambda: server.log().count(b"a worker added did not start") >= 2, message="another try")
    finally:
        load.stop()
    assert set(load.answers) == {200}
    assert workers_now(server) == 1


@pytest.mark.parametrize("args, message", [
    (["-w", "4:2"], "--workers MIN:MAX must have MIN at most MAX, not 4:2"),
    (["-w", "0:2"], "--workers must be between 1 and 1024, not 0:2"),
    (["-w", "2:"], "'2:' is not N or MIN:MAX"),
    (["--max-memory", "0"], "--max-memory must be more than 0"),
    (["--worker-idle-timeout", "0"], "--worker-idle-timeout must be more than 0"),
    (["--scale-up-wait", "soon"], "'soon' is not a number of seconds or auto"),
])
def test_wrong_scaling_flags_get_one_clear_line(args, message):
    result = subprocess.run([headway_binary(), "serve", *args], capture_output=True, text=True, timeout=30)
    assert result.returncode != 0
    assert message in result.stderr, result.stderr
