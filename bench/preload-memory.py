#!/usr/bin/env python3
"""Memory of 4 workers with and without preloading: headway, headway --preload, gunicorn
--preload (Django, tests/apps/django_site.py); and for Ruby, on a Rails 6.1 app
(tests/apps/rails, in production as bench/rails.ru sets it up, as bench/versus.sh runs it too),
headway's Rack worker and Puma clustered, each without and with preloading (Puma's --preload is
its preload_app!).

    .venv/bin/python bench/preload-memory.py [ROUNDS]
    HEADWAY=target/release/headway .venv/bin/python bench/preload-memory.py (another headway than .venv's)

RACK_APP names another Rack app's config.ru (run from its folder; RACK_PATH the path asked for,
`/`), such as python/headway/twins/hello.ru. The Rack worker's extension is found as headway finds
it ($HEADWAY_RUBY_LIB, else the ruby/lib of the checkout headway was built from).

Each server is started alone, bound to 127.0.0.1, warmed with 50 requests, then the
proportional set size (PSS, /proc/PID/smaps_rollup: a shared page counts 1/N to each of its N
processes, so the sum is what the server really costs) of every process of its session is
summed: the front or master, the preloaded parent if any, and the workers. Memory does not
depend on CPU timing, so one quiet round is enough; ROUNDS > 1 reports the median. The table is
printed and written to bench/results/preload-memory.json for docs/benchmarks.md.
"""

import importlib.metadata
import os
import platform
import secrets
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import NamedTuple

import results  # bench/results.py, next to this script

REPO = Path(__file__).resolve().parents[1]
APPS = REPO / "tests" / "apps"
VENV_BIN = Path(sys.executable).parent
WORKERS = 4
# The Rack app of the Ruby rows, and the path they are warmed on.
RAILS_APP = REPO / "bench" / "rails.ru"
RACK_APP = Path(os.environ.get("RACK_APP") or RAILS_APP).resolve()
RACK_PATH = os.environ.get("RACK_PATH", "/")
# What bench/rails.ru reads: one secret for every worker, and where Rails logs.
RAILS_ENV = {"SECRET_KEY_BASE": secrets.token_hex(64),
             "RAILS_LOG_FILE": str(REPO / "bench" / "out" / "preload-memory-rails.log")}


class Server(NamedTuple):
    """A server to measure: its command ({port} filled in on each start), the path it is warmed
    on, the folder it runs in, how many processes it has once every worker is up, and the name of
    the same server without --preload, which its memory is compared with."""

    name: str
    command: list
    path: str
    cwd: Path
    processes: int
    without_preload: str = ""


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def get(port, path):
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: bench\r\nX-Forwarded-Proto: https\r\n"
                     f"Connection: close\r\n\r\n".encode())
        response = b""
        while chunk := sock.recv(65536):
            response += chunk
    return int(response.split(b" ", 2)[1])


def session_processes(sid):
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.getsid(int(entry)) == sid:
                    pids.append(int(entry))
            except OSError:
                pass
    return pids


def pss(pid):
    try:
        with open(f"/proc/{pid}/smaps_rollup") as rollup:
            for line in rollup:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def measure(server):
    """Starts `server` alone on a free port, warms it and returns its PSS in bytes (all its
    processes summed), how many processes it had and the statuses it answered."""
    port = free_port()
    command = [part.format(port=port) for part in server.command]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(APPS), str(REPO / "python")]), **RAILS_ENV)
    process = subprocess.Popen(command, cwd=server.cwd, env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                status = get(port, server.path)
                break
            except OSError:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise SystemExit(f"{server.name} did not start") from None
                time.sleep(0.1)
        statuses = {get(port, server.path) for _ in range(50)} | {status}
        # Every worker process up (Puma and gunicorn fork theirs after they listen).
        while len(session_processes(process.pid)) < server.processes and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(1)
        pids = session_processes(process.pid)
        return sum(pss(pid) for pid in pids), len(pids), statuses
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def version_of(command):
    """What `command` prints as its version, without the tool's name; "?" when it cannot run."""
    try:
        text = subprocess.run(command, capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "?"
    return text.split(" ", 1)[1].removeprefix("version ") if " " in text else text


def ruby_rows(serve):
    """The Ruby servers on RACK_APP: headway's Rack worker and Puma clustered, each without and
    with preloading, one thread a worker as the others."""
    puma = ["puma", "-w", str(WORKERS), "-t", "1:1", "-b", "tcp://127.0.0.1:{port}", str(RACK_APP)]
    app = ("rails" if RACK_APP == RAILS_APP
           else RACK_APP.parent.name if RACK_APP.name == "config.ru" else f"Rack {RACK_APP.stem}")
    without = f"Puma -w {WORKERS} ({app})"
    mine = f"headway ({app})"
    return [
        Server(mine, [*serve, str(RACK_APP)], RACK_PATH, RACK_APP.parent, 1 + WORKERS),
        Server(f"headway --preload ({app})", [*serve, "--preload", str(RACK_APP)], RACK_PATH, RACK_APP.parent,
               2 + WORKERS, mine),
        Server(without, puma, RACK_PATH, RACK_APP.parent, 1 + WORKERS),
        Server(f"Puma -w {WORKERS} --preload ({app})", [*puma[:-1], "--preload", puma[-1]], RACK_PATH,
               RACK_APP.parent, 1 + WORKERS, without),
    ]


def summary(servers, mib, rounds, failed):
    """The result's summary from its figures: what --preload saved each server that has both
    modes, and the others' memory for scale."""
    paired = {server.without_preload for server in servers}
    saved = [f"of {server.without_preload} from {mib[server.without_preload]:.1f} to "
             f"{mib[server.name]:.1f} MiB ({mib[server.name] / mib[server.without_preload]:.2f}x)"
             for server in servers if server.without_preload]
    alone = [f"{server.name} used {mib[server.name]:.1f} MiB" for server in servers
             if not server.without_preload and server.name not in paired]
    text = f"With {WORKERS} workers, --preload took the memory (PSS, all processes summed) "
    text += " and ".join(saved)
    text += "".join(f"; {each}" for each in alone)
    text += f" (medians of {rounds} rounds)." if rounds > 1 else "."
    if failed:
        text += f" Not every answer was a 200: {', '.join(failed)}."
    return text


def main():
    Path(RAILS_ENV["RAILS_LOG_FILE"]).parent.mkdir(parents=True, exist_ok=True)
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 1
    headway = os.environ.get("HEADWAY") or shutil.which("headway", path=str(VENV_BIN)) or "headway"
    django = "django_site:application"
    serve = [headway, "serve", "-w", str(WORKERS), "-t", "1", "-b", "127.0.0.1:{port}"]
    gunicorn = [str(VENV_BIN / "gunicorn"), "-w", str(WORKERS), "-b", "127.0.0.1:{port}"]
    servers = [
        Server("headway (Django)", [*serve, django], "/whoami", APPS, 1 + WORKERS),
        Server("headway --preload (Django)", [*serve, "--preload", django], "/whoami", APPS, 2 + WORKERS,
               "headway (Django)"),
        Server("gunicorn (Django)", [*gunicorn, django], "/whoami", APPS, 1 + WORKERS),
        Server("gunicorn --preload (Django)", [*gunicorn, "--preload", django], "/whoami", APPS, 1 + WORKERS,
               "gunicorn (Django)"),
        *ruby_rows(serve),
    ]
    print("| server | processes | PSS, all processes (MiB) | vs without --preload | statuses |")
    print("|---|---|---|---|---|")
    mib = {}
    rows = []
    failed = []
    for server in servers:
        measured = [measure(server) for _ in range(rounds)]
        mib[server.name] = statistics.median(pss for pss, _, _ in measured) / 2**20
        processes, statuses = measured[-1][1], sorted(set().union(*(answered for _, _, answered in measured)))
        ratio = round(mib[server.name] / mib[server.without_preload], 2) if server.without_preload else "-"
        each_round = [" ".join(f"{pss / 2**20:.1f}" for pss, _, _ in measured)] if rounds > 1 else []
        rows.append([server.name, processes, round(mib[server.name], 1), *each_round, ratio,
                     " ".join(map(str, statuses))])
        if statuses != [200]:
            failed.append(server.name)
        print(f"| {server.name} | {processes} | {mib[server.name]:.1f} | {ratio} | {statuses} |", flush=True)

    ruby_app = RACK_APP.relative_to(REPO) if RACK_APP.is_relative_to(REPO) else RACK_APP
    versions = {"headway": version_of([headway, "--version"]),
                "Django": importlib.metadata.version("Django"),
                "gunicorn": importlib.metadata.version("gunicorn"),
                "puma": version_of(["puma", "--version"]),
                "ruby": version_of(["ruby", "--version"]).split(" ")[0],
                "python": platform.python_version()}
    columns = ["server", "processes", "PSS MiB", *(["PSS MiB, each round"] if rounds > 1 else []),
               "vs without --preload", "statuses"]
    print(results.write(
        "preload-memory", title=f"Memory of {WORKERS} workers with and without --preload", order=85,
        command=".venv/bin/python bench/preload-memory.py" + (f" {rounds}" if rounds > 1 else ""),
        summary=summary(servers, mib, rounds, failed), versions=versions,
        tables=[{"title": f"Median of {rounds} rounds" if rounds > 1 else "One round",
                 "columns": columns, "rows": rows}],
        notes=[f"Each server runs {WORKERS} workers of one thread of the one-module Django project of the tests "
               f"(`tests/apps/django_site.py`), warmed with 50 requests. The Ruby rows run `{ruby_app}`: headway's "
               "Rack worker without and with --preload (config.ru loaded once, the heap compacted, the workers "
               "forked) and Puma clustered without and with `preload_app!` (`puma --preload`). Puma cannot run "
               "Django: the Ruby rows compare with each other, not with the Django rows.",
               "PSS (`/proc/PID/smaps_rollup`) counts a page shared by N processes 1/N to each, so the sum over "
               "the server's session (front or master, preloaded parent, workers) is what the server costs. "
               "Memory does not depend on CPU timing: one quiet round is enough."]))


if __name__ == "__main__":
    main()
