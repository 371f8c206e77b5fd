"""Lanes end to end, with the demo app's /sleep routes on one slot: fast requests start before
slow ones that arrived earlier, every request is answered, each kind keeps its arrival order; a
--lane pattern needs nothing learned first; with --no-lanes every request starts in arrival order.

The order of service is read from the access log: with one slot, a request's response is sent
(and logged) long before the next request, which started after it, has run."""

import json
import subprocess

from conftest import headway_binary, read_response, send_request, wait_until


def logged(log, count):
    """The first `count` lines of the access log, once they are there: a response reaches its
    client a moment before its line reaches the file."""

    def lines():
        found = log.read_text().splitlines() if log.exists() else []
        return found if len(found) >= count else None

    return wait_until(lines, message=f"{count} access log lines")[:count]


def logged_json(log, count):
    return [json.loads(line) for line in logged(log, count)]


def occupy_the_slot(server, path):
    """Sends `path` on a connection of its own and waits until it holds the only slot."""
    sock = server.connect()
    send_request(sock, "GET", path)
    wait_until(lambda: server.stats()["slots"]["busy"] == 1, message="the slot to be busy")
    return sock


def enqueue_in_order(server, paths):
    """Sends each path on a connection of its own, the next only once the previous one waits in
    the queue, so that they wait in this order; returns the sockets."""
    socks = []
    for path in paths:
        sock = server.connect()
        send_request(sock, "GET", path)
        socks.append(sock)
        wait_until(lambda: server.stats()["queue"]["depth"] == len(socks), message=f"{path} to wait")
    return socks


def statuses(socks):
    return [read_response(sock.makefile("rb"))[0] for sock in socks]


def test_fast_requests_start_before_slow_ones_that_came_first(serve, tmp_path):
    log = tmp_path / "access.log"
    server = serve("-w", "1", "-t", "1", "--access-log", str(log), "--access-log-format", "json")
    # The lanes learn each route from its finished requests: the first /sleep/2000 takes the fast
    # lane (nothing is known of it yet), the second the slow one.
    taught = ["/sleep/10"] * 5 + ["/sleep/2000"] * 2
    assert [server.get(path)[0] for path in taught] == [200] * len(taught)
    lanes = {lane["name"]: [route["route"] for route in lane["routes"]] for lane in server.stats()["queue"]["lanes"]}
    assert lanes == {"fast": ["GET /sleep/10"], "slow": ["GET /sleep/2000"]}

    blocker = occupy_the_slot(server, "/sleep/200?blocker")
    queued = enqueue_in_order(server, ["/sleep/2000?s1", "/sleep/10?f1", "/sleep/10?f2", "/sleep/10?f3"])
    assert statuses([blocker, *queued]) == [200] * 5

    served = logged_json(log, len(taught) + 5)[len(taught):]
    assert [(entry["path"], entry["lane"], entry["status"]) for entry in served] == [
        ("/sleep/200?blocker", "fast", 200),  # a route not measured yet is fast
        ("/sleep/10?f1", "fast", 200),
        ("/sleep/10?f2", "fast", 200),
        ("/sleep/10?f3", "fast", 200),
        ("/sleep/2000?s1", "slow", 200),
    ]
    metrics = server.metrics()
    assert 'headway_lane_started_total{lane="slow"} 2' in metrics
    assert 'headway_route_service_seconds_mean{lane="slow",route="GET /sleep/2000"}' in metrics
    assert "GET /sleep/2000" in server.stats_command()


def test_a_declared_lane_is_slow_from_its_first_request(serve, tmp_path):
    log = tmp_path / "access.log"
    server = serve("-w", "1", "-t", "1", "--lane", "GET /sleep/3*", "--access-log", str(log))
    blocker = occupy_the_slot(server, "/sleep/200")
    queued = enqueue_in_order(server, ["/sleep/300?s1", "/sleep/10?f1", "/sleep/300?s2", "/sleep/10?f2"])
    assert statuses([blocker, *queued]) == [200] * 5
    lines = [line.split('"')[1] + " " + line.split(" lane=")[1] for line in logged(log, 5)]
    assert lines == [
        'GET /sleep/200 HTTP/1.1 "fast"',
        'GET /sleep/10?f1 HTTP/1.1 "fast"',
        'GET /sleep/10?f2 HTTP/1.1 "fast"',
        'GET /sleep/300?s1 HTTP/1.1 "GET /sleep/3*"',
        'GET /sleep/300?s2 HTTP/1.1 "GET /sleep/3*"',
    ]
    declared = [lane for lane in server.stats()["queue"]["lanes"] if lane["kind"] == "declared"]
    assert [(lane["name"], lane["started"]) for lane in declared] == [("GET /sleep/3*", 2)]


def test_with_no_lanes_every_request_starts_in_arrival_order(serve, tmp_path):
    log = tmp_path / "access.log"
    server = serve("-w", "1", "-t", "1", "--no-lanes", "--access-log", str(log), "--access-log-format", "json")
    taught = ["/sleep/10"] * 5 + ["/sleep/300"] * 2
    assert [server.get(path)[0] for path in taught] == [200] * len(taught)
    blocker = occupy_the_slot(server, "/sleep/200?blocker")
    queued = enqueue_in_order(server, ["/sleep/300?s1", "/sleep/10?f1", "/sleep/10?f2"])
    assert statuses([blocker, *queued]) == [200] * 4
    served = logged_json(log, len(taught) + 4)[len(taught):]
    assert [(entry["path"], entry["lane"]) for entry in served] == [
        ("/sleep/200?blocker", None),
        ("/sleep/300?s1", None),
        ("/sleep/10?f1", None),
        ("/sleep/10?f2", None),
    ]
    assert server.stats()["queue"]["lanes"] == []
    assert "lanes        off" in server.stats_command()
    assert "headway_lane_" not in server.metrics()


def test_lane_flags_are_checked():
    for args, message in [
        (["--no-lanes", "--lane", "/reports/*"], "--lane needs lanes: drop --no-lanes"),
        (["--lane", "reports"], "is not [METHOD ]PATH"),
    ]:
        done = subprocess.run([headway_binary(), "serve", *args], capture_output=True, text=True, timeout=30)
        assert done.returncode != 0 and message in done.stderr, done.stderr
