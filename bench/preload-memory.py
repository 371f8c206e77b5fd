#!/usr/bin/env python3
"""Memory of 4 workers with and without preloading: headway, headway --preload, gunicorn
--preload (Django, tests/apps/django_site.py) and Puma clustered with preload_app! (--preload;
the Rack twin of the demo app, python/headway/twins/demo.ru, as Puma cannot run Django).

    .venv/bin/python bench/preload-memory.py [ROUNDS]

Each server is started alone, bound to 127.0.0.1, warmed with 50 requests, then the
proportional set size (PSS, /proc/PID/smaps_rollup: a shared page counts 1/N to each of its N
processes, so the sum is what the server really costs) of every process of its session is
summed: the front or master, the preloaded parent if any, and the workers. Memory does not
depend on CPU timing, so one quiet round is enough; ROUNDS > 1 reports the median.
"""

import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
APPS = REPO / "tests" / "apps"
VENV_BIN = Path(sys.executable).parent
WORKERS = 4


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


def measure(name, command, path, cwd, expected_processes):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(APPS), str(REPO / "python")]))
    process = subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                status = get(PORT, path)
                break
            except OSError:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise SystemExit(f"{name} did not start") from None
                time.sleep(0.1)
        statuses = {get(PORT, path) for _ in range(50)} | {status}
        # Every worker process up (Puma and gunicorn fork theirs after they listen).
        while len(session_processes(process.pid)) < expected_processes and time.monotonic() < deadline:
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


def main():
    global PORT
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 1
    headway = shutil.which("headway", path=str(VENV_BIN)) or "headway"
    django = "django_site:application"
    servers = [
        ("headway (Django)", [headway, "serve", "-w", "4", "-t", "1", "-b", "127.0.0.1:{port}", django], "/whoami",
         APPS, 1 + WORKERS),
        ("headway --preload (Django)", [headway, "serve", "-w", "4", "-t", "1", "-b", "127.0.0.1:{port}",
                                        "--preload", django], "/whoami", APPS, 2 + WORKERS),
        ("gunicorn (Django)", [str(VENV_BIN / "gunicorn"), "-w", "4", "-b", "127.0.0.1:{port}", django], "/whoami",
         APPS, 1 + WORKERS),
        ("gunicorn --preload (Django)", [str(VENV_BIN / "gunicorn"), "-w", "4", "-b", "127.0.0.1:{port}",
                                         "--preload", django], "/whoami", APPS, 1 + WORKERS),
        ("Puma -w 4 --preload (Rack twin)", ["puma", "-w", "4", "-t", "1:1", "--preload", "-b",
                                             "tcp://127.0.0.1:{port}", str(REPO / "python/headway/twins/demo.ru")],
         "/hello", REPO, 1 + WORKERS),
    ]
    print("| server | processes | PSS, all processes (MiB) | statuses |")
    print("|---|---|---|---|")
    for name, command, path, cwd, expected in servers:
        results = []
        for _ in range(rounds):
            PORT = free_port()
            results.append(measure(name, [part.format(port=PORT) for part in command], path, cwd, expected))
        total = statistics.median(result[0] for result in results)
        processes, statuses = results[-1][1], sorted(results[-1][2])
        print(f"| {name} | {processes} | {total / 2**20:.1f} | {statuses} |", flush=True)


PORT = 0

if __name__ == "__main__":
    main()
