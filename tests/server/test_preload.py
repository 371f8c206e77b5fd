"""--preload: the app is imported once, in a parent the workers are forked from; they share its
memory, a crashed worker is forked again from it, hooks run in each worker, a reload imports
the new code in a new parent first, and the workers live as long as the front, not as long as
that parent."""

import os
import shutil
import signal
import subprocess

import pytest

from conftest import APPS, REPO, ended, headway_binary, missing, parent_of, ready_pids, require, wait_until

MB = 1000 * 1000


def imports(counter):
    return counter.read_text().split() if counter.exists() else []


def memory(pid, field):
    """A field of /proc/PID/smaps_rollup, in bytes."""
    with open(f"/proc/{pid}/smaps_rollup") as rollup:
        for line in rollup:
            if line.startswith(f"{field}:"):
                return int(line.split()[1]) * 1024
    raise AssertionError(f"no {field} for {pid}")


def test_the_app_is_imported_once_and_its_pages_are_shared(serve, tmp_path):
    counter = tmp_path / "imports"
    preloaded = serve("-w", "4", "-t", "1", "--preload", "preloaded:app", env={"PRELOAD_COUNTER": str(counter)})
    workers = ready_pids(preloaded, 4)
    assert len(imports(counter)) == 1
    parent = int(imports(counter)[0])
    assert all(parent_of(pid) == parent for pid in workers)
    assert {preloaded.get("/")[0] for _ in range(8)} == {200}
    shared_pss = sum(memory(pid, "Pss") for pid in workers)
    shared_rss = sum(memory(pid, "Rss") for pid in workers)

    alone = serve("-w", "4", "-t", "1", "preloaded:app", env={"PRELOAD_COUNTER": str(tmp_path / "alone")})
    alone_workers = ready_pids(alone, 4)
    assert len(imports(tmp_path / "alone")) == 4
    alone_pss = sum(memory(pid, "Pss") for pid in alone_workers)
    # Each worker maps the 50 MB table: without --preload each has a copy of its own; with it,
    # the copy is the parent's, shared by all five processes.
    assert shared_rss > 4 * 50 * MB and alone_pss > 4 * 50 * MB
    assert shared_pss < alone_pss / 2, (shared_pss, alone_pss)


def test_a_crashed_worker_is_forked_again_from_the_same_parent(serve, tmp_path):
    counter = tmp_path / "imports"
    server = serve("-w", "2", "-t", "1", "--preload", "preloaded:app", env={"PRELOAD_COUNTER": str(counter)})
    before = ready_pids(server, 2)
    os.kill(before[0], signal.SIGKILL)
    wait_until(lambda: server.stats()["workers"][0]["pid"] not in (0, before[0])
               and server.stats()["workers"][0]["state"] == "ready", message="worker 1 forked again")
    after = ready_pids(server, 2)
    assert after[1] == before[1]
    assert parent_of(after[0]) == int(imports(counter)[0]) and len(imports(counter)) == 1
    assert server.stats()["workers"][0]["recycles"]["crash"] == 1
    assert {server.get("/")[0] for _ in range(4)} == {200}


@pytest.mark.parametrize("preload", [True, False], ids=["preload", "no-preload"])
def test_hooks_run_in_each_worker(serve, tmp_path, preload):
    hooks_log = tmp_path / "hooks"
    env = {"PRELOAD_COUNTER": str(tmp_path / "imports"), "HOOKS_LOG": str(hooks_log)}
    args = ["--preload"] if preload else []
    server = serve("-w", "2", "-t", "1", *args, "--hooks", "preload_hooks", "preloaded:app", env=env)
    pids = ready_pids(server, 2)
    post_forks = sorted(line.split()[1:] for line in hooks_log.read_text().splitlines())
    # Each worker's own pid, as the hook was given it and as it ran in it.
    assert post_forks == [["1", str(pids[0]), str(pids[0])], ["2", str(pids[1]), str(pids[1])]]
    server.signal(signal.SIGTERM)
    assert server.wait() == 0
    exits = sorted(line for line in hooks_log.read_text().splitlines() if line.startswith("on_exit"))
    assert exits == [f"on_exit 1 {pids[0]}", f"on_exit 2 {pids[1]}"]


def test_an_import_error_stops_the_boot_with_its_traceback(tmp_path):
    (tmp_path / "broken.py").write_text("import nonexistent_module_for_headway\n")
    result = subprocess.run([headway_binary(), "serve", "-b", "127.0.0.1:0", "--preload", "broken:app"],
                            cwd=tmp_path, capture_output=True, timeout=60,
                            env={**os.environ, "PYTHONPATH": str(REPO / "python")})
    assert result.returncode != 0
    assert b"Traceback" in result.stderr and b"nonexistent_module_for_headway" in result.stderr
    assert b"preloaded parent" in result.stderr


@pytest.mark.parametrize("preload", [True, False], ids=["preload", "no-preload"])
def test_hooks_that_do_not_import_stop_the_boot_with_their_traceback(tmp_path, preload):
    (tmp_path / "broken_hooks.py").write_text("import nonexistent_module_for_headway_hooks\n")
    args = ["--preload"] if preload else []
    result = subprocess.run([headway_binary(), "serve", "-b", "127.0.0.1:0", "-w", "1", *args,
                             "--hooks", "broken_hooks"],
                            cwd=tmp_path, capture_output=True, timeout=60,
                            env={**os.environ, "PYTHONPATH": str(REPO / "python")})
    assert result.returncode != 0
    assert b"Traceback" in result.stderr and b"nonexistent_module_for_headway_hooks" in result.stderr
    assert b"cannot import broken_hooks" in result.stderr


def test_a_reload_forks_from_a_new_parent_and_keeps_the_old_one_if_the_new_code_breaks(serve, tmp_path):
    shutil.copy(APPS / "preloaded.py", tmp_path / "preloaded.py")
    counter = tmp_path / "imports"
    server = serve("-w", "2", "-t", "1", "--preload", "preloaded:app", cwd=tmp_path,
                   env={"PRELOAD_COUNTER": str(counter), "PYTHONDONTWRITEBYTECODE": "1"})
    first = ready_pids(server, 2)
    server.signal(signal.SIGHUP)
    wait_until(lambda: server.log().count(b"reload done") == 1, message="the reload")
    second = ready_pids(server, 2)
    assert not set(first) & set(second) and len(imports(counter)) == 2
    assert all(parent_of(pid) == int(imports(counter)[1]) for pid in second)

    (tmp_path / "preloaded.py").write_text("raise RuntimeError('broken on purpose')\n")
    server.signal(signal.SIGHUP)
    wait_until(lambda: b"keep the old code" in server.log(), message="the failed reload")
    assert b"broken on purpose" in server.log()
    assert ready_pids(server, 2) == second
    assert {server.get("/")[0] for _ in range(4)} == {200}


def test_workers_outlive_their_parent_and_the_next_fork_imports_the_app_again(serve, tmp_path):
    counter = tmp_path / "imports"
    server = serve("-w", "2", "-t", "1", "--preload", "preloaded:app", env={"PRELOAD_COUNTER": str(counter)})
    before = ready_pids(server, 2)
    parent = int(imports(counter)[0])
    os.kill(parent, signal.SIGKILL)  # as the OOM killer would
    wait_until(lambda: ended(parent), message="the preloaded parent to end")
    # Its workers are tied to the front, not to it: they keep serving, nothing is lost.
    assert {server.get("/")[0] for _ in range(8)} == {200}
    assert ready_pids(server, 2) == before

    # A worker that then needs forking has a new parent made for it, which imports the app.
    os.kill(before[0], signal.SIGKILL)
    wait_until(lambda: server.stats()["workers"][0]["pid"] not in (0, before[0])
               and server.stats()["workers"][0]["state"] == "ready", message="worker 1 forked again")
    after = ready_pids(server, 2)
    assert after[1] == before[1]
    assert len(imports(counter)) == 2 and parent_of(after[0]) == int(imports(counter)[1])
    assert b"preloaded parent (pid %d) is gone" % parent in server.log()
    assert {server.get("/")[0] for _ in range(4)} == {200}


@pytest.mark.parametrize("preload", [True, False], ids=["preload", "no-preload"])
def test_the_workers_end_when_the_front_is_killed(serve, tmp_path, preload):
    counter = tmp_path / "imports"
    args = ["--preload"] if preload else []
    server = serve("-w", "2", "-t", "1", *args, "preloaded:app", env={"PRELOAD_COUNTER": str(counter)})
    workers = ready_pids(server, 2)
    processes = workers + ([int(imports(counter)[0])] if preload else [])
    server.signal(signal.SIGKILL)  # no chance to stop anything itself
    server.wait()
    wait_until(lambda: all(ended(pid) for pid in processes), message="every worker process to end")


def children(pid):
    """The pids of process `pid`'s children."""
    found = []
    for task in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{task}/children") as listed:
            found += [int(child) for child in listed.read().split()]
    return found


PID_NAMESPACE = ["unshare", "--pid", "--fork", "--mount-proc", "--kill-child"]


def test_as_pid_1_the_front_reaps_the_workers_a_dead_parent_left(serve, tmp_path):
    """In a container headway is PID 1, and the workers of a preloaded parent that died are
    handed to it: each is reaped when it exits, not left a zombie."""
    require("unshare", "util-linux")
    if subprocess.run([*PID_NAMESPACE, "true"], capture_output=True).returncode != 0:
        missing("a PID namespace (unshare needs privileges)")
    counter = tmp_path / "imports"
    server = serve("-w", "2", "-t", "1", "--preload", "preloaded:app", env={"PRELOAD_COUNTER": str(counter)},
                   wrapper=PID_NAMESPACE)
    ready_pids(server, 2)  # pids as the namespace numbers them; below, as this one does
    [front] = children(server.process.pid)
    [parent] = children(front)
    workers = children(parent)
    assert len(workers) == 2
    os.kill(parent, signal.SIGKILL)
    wait_until(lambda: set(workers) <= set(children(front)), message="the workers to be handed to the front")
    os.kill(workers[0], signal.SIGKILL)
    wait_until(lambda: not os.path.exists(f"/proc/{workers[0]}"), message="the killed worker to be reaped")
    wait_until(lambda: len(imports(counter)) == 2 and server.stats()["workers"][0]["state"] == "ready",
               message="worker 1 forked from a new parent")
    assert {server.get("/")[0] for _ in range(4)} == {200}
    os.kill(front, signal.SIGTERM)  # unshare passes no signal on
    assert server.wait() == 0
