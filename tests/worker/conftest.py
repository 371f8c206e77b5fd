"""Fixtures for the worker tests (helpers in worker_client.py)."""

import shutil
import sys
import tempfile
from pathlib import Path

import pytest

# The test modules import worker_client (and the worker imports worker_apps) from this
# directory, whichever --import-mode pytest runs with.
sys.path.insert(0, str(Path(__file__).resolve().parent))

from worker_client import TIMEOUT, Worker, start_process  # noqa: E402


@pytest.fixture
def socket_dir():
    """A short directory for unix sockets (a socket path must stay under ~100 bytes)."""
    path = Path(tempfile.mkdtemp(prefix="hw-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


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
