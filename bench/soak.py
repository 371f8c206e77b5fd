"""The driver of bench/soak.sh: mixed traffic against a running headway for a while, the front's
memory, descriptors and threads sampled every 10 s, and a summary.

Traffic, all at once: an open loop of HTTP/1.1 requests on keep-alive connections (`headway
load --rate`, a mix of quick, slow and large responses), WebSockets sending messages (`headway
load --websocket`), and slow clients (a head sent a byte at a time, a large response read a
little at a time). Meanwhile the workers are recycled (`--max-requests`, set by soak.sh) and
reloaded (SIGHUP) every few minutes.

Writes RESULT (JSON: settings, samples, the load reports, slow-client counts, summary), the
page's result (bench/results/soak.json, for docs/benchmarks.md) and prints the summary: whether
RSS and descriptors stayed within 10 % after warm-up, and every failed request with its reason.
Failures by design: WebSockets closed with 1001 by a reload (their worker is replaced) reconnect
and are counted apart.
"""

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import threading
import time
import urllib.request

import results  # bench/results.py, next to this script

SAMPLE_EVERY = 10
# The slow clients' large response, read 64 KiB every 100 ms.
SLOW_BODY = 4 << 20


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--headway", required=True)
    parser.add_argument("--pid", type=int, required=True, help="the front's pid")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--control", required=True)
    parser.add_argument("--seconds", type=int, required=True)
    parser.add_argument("--reload-every", type=int, required=True)
    parser.add_argument("--rate", type=int, default=200, help="HTTP requests a second")
    parser.add_argument("--websockets", type=int, default=40)
    parser.add_argument("--slow-clients", type=int, default=8)
    parser.add_argument("--result", required=True)
    args = parser.parse_args()
    # The version of the front that runs now (the file may be rebuilt while it soaks).
    args.version = subprocess.run([args.headway, "--version"], capture_output=True,
                                  text=True).stdout.strip().removeprefix("headway ")

    stop = threading.Event()
    samples, slow, reloads = [], {"completed": 0, "failed": {}}, []
    threads = [
        threading.Thread(target=sample, args=(args, stop, samples)),
        threading.Thread(target=reload_now_and_then, args=(args, stop, reloads)),
        *(threading.Thread(target=slow_client, args=(args, stop, slow, i)) for i in range(args.slow_clients)),
    ]
    for thread in threads:
        thread.start()
    base = f"127.0.0.1:{args.port}"
    loads = {
        "http": load(args, ["--rate", str(args.rate), "-c", "32", "--weights", "8,1,1", f"http://{base}/hello",
                            f"http://{base}/sleep/50", f"http://{base}/fake_work?cpu_ms=0&iowait_ms=0&bytes=300000"]),
        "websocket": load(args, ["--websocket", "-c", str(args.websockets), "--rate", str(args.websockets * 2),
                                 "--message-size", "512", f"ws://{base}/echo"]),
    }
    reports = {name: json.loads(process.communicate()[0] or "null") for name, process in loads.items()}
    stop.set()
    for thread in threads:
        thread.join(timeout=60)
    sample_once(args, samples)
    summary = summarize(args, samples, reports, slow, reloads)
    with open(args.result, "w") as result:
        json.dump({"settings": vars(args), "summary": summary, "samples": samples, "reloads": reloads,
                   "slow_clients": slow, "loads": reports}, result, indent=1)
    print(json.dumps(summary, indent=1))
    print(write_page_result(args, summary))


def write_page_result(args, summary):
    """bench/results/soak.json: the trends, the requests and what failed."""
    trends = []
    for label, key, scale in (("front RSS, MiB", "rss_kib", 1 / 1024), ("descriptors", "fds", 1),
                              ("threads", "threads", 1)):
        trend = summary[key]
        if trend is not None:
            figures = (trend[name] * scale for name in ("first_third_median", "last_third_median", "min", "max"))
            trends.append([label, *(round(value, 1) for value in figures), trend["change_percent"]])
    traffic = ", ".join(f"{count or 0:,} {name}" for name, count in summary["requests"].items())
    outcomes = [[reason, count, "no"] for reason, count in summary["failed"].items()]
    outcomes += [[reason, count, "yes"] for reason, count in summary["refused_by_design"].items()]
    flat = "flat within 10 %" if summary["flat_within_10_percent"] else "not flat within 10 %"
    failed = sum(summary["failed"].values())
    return results.write(
        "soak", title="Soak: mixed traffic with recycling and reloads", order=70,
        command=f"bench/soak.sh --minutes {args.seconds // 60}",
        summary=(f"{args.seconds // 60} minutes, {summary['reloads']} reloads, {traffic} and "
                 f"{summary['slow_clients_completed']:,} slow clients' requests: the front's RSS and descriptors "
                 f"{flat} after the warm-up; {failed} requests failed that were not refused by design."),
        tables=[
            {"title": "The front after the warm-up (medians of the first and last thirds)",
             "columns": ["figure", "first third", "last third", "min", "max", "change %"], "rows": trends},
            {"title": "Requests that did not succeed", "columns": ["reason", "count", "by design"],
             "rows": outcomes or [["none", 0, "-"]]},
        ],
        notes=[f"`headway serve -w 2 -t 4 --interface asgi --max-requests 3000 --max-requests-jitter 300` "
               f"serving bench/soak_app.py; {args.rate} HTTP requests a second (quick, 50 ms and 300 kB "
               f"responses, 8:1:1), {args.websockets} WebSockets, {args.slow_clients} slow clients (a head sent "
               f"a byte at a time, a 4 MiB response read 64 KiB every 100 ms); SIGHUP every {args.reload_every} s; "
               f"the front sampled every {SAMPLE_EVERY} s. Warm-up: the first {summary['warm_up_seconds']:.0f} s."],
        versions={"headway": args.version})


def load(args, flags):
    command = [args.headway, "load", "-o", "json", "-z", f"{args.seconds}s", "-t", "30", *flags]
    return subprocess.Popen(command, stdout=subprocess.PIPE, text=True)


def sample(args, stop, samples):
    started = time.monotonic()
    while not stop.wait(max(0.0, SAMPLE_EVERY - (time.monotonic() - started) % SAMPLE_EVERY)):
        sample_once(args, samples)


def sample_once(args, samples):
    status = {}
    with open(f"/proc/{args.pid}/status") as lines:
        for line in lines:
            name, _, value = line.partition(":")
            status[name] = value.split()
    stats = json.load(urllib.request.urlopen(f"http://{args.control}/stats", timeout=10))
    samples.append({
        "t": round(time.time(), 1),
        "rss_kib": int(status["VmRSS"][0]),
        "fds": len(os.listdir(f"/proc/{args.pid}/fd")),
        "threads": int(status["Threads"][0]),
        "connections": stats["connections"]["open"],
        "websockets": stats["websockets"]["open"],
        "temp_file_bytes": stats.get("temp_files", {}).get("bytes", 0),
        "queue": stats["queue"]["depth"],
        "responses": stats["responses"],
    })


def reload_now_and_then(args, stop, reloads):
    while not stop.wait(args.reload_every):
        os.kill(args.pid, signal.SIGHUP)
        reloads.append(round(time.time(), 1))


def slow_client(args, stop, slow, index):
    """Sends a head a byte every 20 ms, then reads a large response 64 KiB every 100 ms."""
    while not stop.is_set():
        try:
            with socket.create_connection(("127.0.0.1", args.port), timeout=60) as sock:
                target = f"/fake_work?cpu_ms=0&iowait_ms=0&bytes={SLOW_BODY}&slow={index}"
                head = f"GET {target} HTTP/1.1\r\nHost: soak\r\n\r\n".encode()
                for byte in head:
                    sock.sendall(bytes([byte]))
                    time.sleep(0.02)
                received = b""
                while b"\r\n\r\n" not in received:
                    piece = sock.recv(65536)
                    if not piece:
                        raise ConnectionError("closed before the head")
                    received += piece
                response_head, _, body = received.partition(b"\r\n\r\n")
                status = response_head.split(b" ", 2)[1].decode()
                if status != "200":
                    raise ConnectionError(f"status {status}")
                length = next(int(line.split(b":")[1]) for line in response_head.split(b"\r\n")
                              if line.lower().startswith(b"content-length:"))
                left = length - len(body)
                while left > 0:
                    piece = sock.recv(min(left, 65536))
                    if not piece:
                        raise ConnectionError("closed mid-body")
                    left -= len(piece)
                    time.sleep(0.1)
            slow["completed"] += 1
        except (OSError, ConnectionError, StopIteration) as error:
            reason = str(error) or type(error).__name__
            slow["failed"][reason] = slow["failed"].get(reason, 0) + 1


def summarize(args, samples, reports, slow, reloads):
    """Flat or not, and what failed. Warm-up is the first fifth of the run (at least a minute,
    at most half); the samples after it, up to the end of the load, are split in thirds, and a
    figure is flat if the median of the last third is within 10 % of the first third's (a dip
    while WebSockets reconnect after a reload is no growth; a leak moves the medians)."""
    start = samples[0]["t"]
    warm = min(max(60, args.seconds / 5), args.seconds / 2)
    loaded = [s for s in samples if warm <= s["t"] - start <= args.seconds - 2 * SAMPLE_EVERY]

    def trend(key):
        values = [s[key] for s in loaded]
        if len(values) < 3:
            return None
        third = len(values) // 3
        first, last = statistics.median(values[:third]), statistics.median(values[-third:])
        return {"min": min(values), "max": max(values), "first_third_median": first, "last_third_median": last,
                "change_percent": round(100 * (last - first) / max(first, 1), 1)}

    rss, fds, threads = trend("rss_kib"), trend("fds"), trend("threads")
    failed, by_design = {}, {}
    for name, report in reports.items():
        if report is None:
            failed[f"{name}: the load generator failed"] = 1
            continue
        for status, count in report.get("status_codes", {}).items():
            if not status.startswith("2") and status != "101":
                failed[f"{name}: status {status}"] = count
        for kind, error in report.get("errors_by_kind", {}).items():
            example = error.get("example", "")
            if kind == "aborted":
                by_design[f"{name}: in flight when the run ended"] = error["count"]
            elif name == "websocket" and "1001" in example:
                # A reload or recycle replaces the worker: its WebSockets close (1001), and the
                # message in flight on each is lost; the load generator opens a new one.
                by_design[f"{name}: closed (1001) as its worker was replaced"] = error["count"]
            else:
                failed[f"{name}: {kind} ({example})"] = error["count"]
    for reason, count in slow["failed"].items():
        failed[f"slow client: {reason}"] = count
    flat = all(value is not None and abs(value["change_percent"]) <= 10 for value in (rss, fds))
    after_load = samples[-1]
    return {
        "seconds": args.seconds, "samples": len(samples), "warm_up_seconds": warm, "reloads": len(reloads),
        "rss_kib": rss, "fds": fds, "threads": threads, "flat_within_10_percent": flat,
        "after_the_load": {key: after_load[key] for key in ("rss_kib", "fds", "threads", "connections")},
        "requests": {name: (report or {}).get("requests") for name, report in reports.items()},
        "slow_clients_completed": slow["completed"], "failed": failed, "refused_by_design": by_design,
    }


if __name__ == "__main__":
    main()
