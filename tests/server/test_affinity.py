"""--cpu-affinity: a pinned worker process runs, every thread of it, on one CPU of the set the
server was started with, worker N on the N-th in turn, as SCHED_BATCH, and keeps it when it is
started again; off leaves the workers the whole set and the default policy."""

import os
import signal

from conftest import ready_pids, wait_until

ALLOWED = sorted(os.sched_getaffinity(0))


def threads_of(pid):
    return [int(tid) for tid in os.listdir(f"/proc/{pid}/task")]


def cpus_of_threads(pid):
    """The CPU sets of every thread of process `pid`, as a set of frozensets."""
    return {frozenset(os.sched_getaffinity(tid)) for tid in threads_of(pid)}


def policies_of_threads(pid):
    return {os.sched_getscheduler(tid) for tid in threads_of(pid)}


def expected(index):
    """The CPU of worker `index` (from 1) when pinned."""
    return {frozenset({ALLOWED[(index - 1) % len(ALLOWED)]})}


def test_pinned_workers_run_each_on_one_cpu_in_turn_and_keep_it_when_restarted(serve):
    server = serve("-w", "3", "-t", "3", "--cpu-affinity", "pin", "probe:app")
    pids = ready_pids(server, 3)
    for index, pid in enumerate(pids, 1):
        # The main thread, the slot threads and the watchers, all started after the pin.
        assert len(threads_of(pid)) >= 4
        assert cpus_of_threads(pid) == expected(index), index
        assert policies_of_threads(pid) == {os.SCHED_BATCH}, index
    assert b"pinned one to a CPU" in server.log()

    os.kill(pids[1], signal.SIGKILL)
    wait_until(lambda: ready_pids(server, 3)[1] != pids[1], message="worker 2 started again")
    restarted = ready_pids(server, 3)[1]
    assert cpus_of_threads(restarted) == expected(2) and policies_of_threads(restarted) == {os.SCHED_BATCH}
    assert {server.get("/environ")[0] for _ in range(6)} == {200}


def test_workers_forked_from_a_preloaded_parent_are_pinned_too(serve, tmp_path):
    env = {"PRELOAD_COUNTER": str(tmp_path / "imports")}
    server = serve("-w", "2", "-t", "2", "--preload", "--cpu-affinity", "pin", "preloaded:app", env=env)
    for index, pid in enumerate(ready_pids(server, 2), 1):
        assert cpus_of_threads(pid) == expected(index), index
        assert policies_of_threads(pid) == {os.SCHED_BATCH}, index
    assert {server.get("/")[0] for _ in range(4)} == {200}


def test_off_leaves_the_workers_every_cpu(serve):
    server = serve("-w", "2", "-t", "2", "--cpu-affinity", "off", "probe:app")
    for pid in ready_pids(server, 2):
        assert cpus_of_threads(pid) == {frozenset(ALLOWED)}
        assert policies_of_threads(pid) == {os.SCHED_OTHER}
    assert b"pinned" not in server.log()
