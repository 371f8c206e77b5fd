"""Worker lifecycle: recycling after --max-requests or above --max-worker-memory, counted by
cause; no request fails while a worker is replaced."""

import threading

from conftest import REPO, read_response, send_request, wait_until

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
    # Every process serves at least 50, so 1000 requests recycle at most 20 times; at 50-60 each
    # (and a few more while another worker is away) they make about 16.
    assert 10 <= recycled <= 20, recycled
    workers = server.stats()["workers"]
    assert [w["restarts"] for w in workers] == [0, 0], "a recycle is not a crash"
    assert sum(w["recycles"]["crash"] + w["recycles"]["timeout"] for w in workers) == 0


def test_max_requests_counts_for_cmd_workers_too(serve):
    server = serve("-w", "1", "-t", "1", "--max-requests", "5", "--cmd", f"node {TWINS / 'demo.js'}")
    statuses = run_clients(server, clients=1, requests_each=12)
    assert statuses == [200] * 12
    wait_until(lambda: recycles(server, "max_requests") >= 2, message="two recycles")


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
    import urllib.request

    server = serve("-w", "1", "-t", "1", "--max-requests", "2")
    assert run_clients(server, clients=1, requests_each=5) == [200] * 5
    wait_until(lambda: recycles(server, "max_requests") >= 2, message="two recycles")
    with urllib.request.urlopen(f"http://{server.control}/metrics", timeout=10) as response:
        metrics = response.read().decode()
    assert 'headway_worker_recycles_total{worker="1",cause="max_requests"} 2' in metrics
    assert 'headway_worker_recycles_total{worker="1",cause="crash"} 0' in metrics
