"""The tables of bench/versus.sh, from its raw figures, and its results for docs/benchmarks.md;
bench/static.sh's too, whose runs have the same shape (part `static`, a file an endpoint).

Usage (bench/versus.sh runs it): python3 bench/versus_tables.py RESULTS.tsv BODIES.tsv, with the
run's settings in the environment (PARTS, ROUNDS, DURATION, CONNECTIONS, WORKERS, COUNT, BODY_MIB,
ECHOES, WSGI_THREADS, RACK_THREADS; VERSIONS: a "tool=version" a line; COMMAND: what measures it again, when not
versus.sh; RESULTS=0 writes no result files).

RESULTS.tsv has a line per measured run: part, round, server, endpoint, requests/s, p50 ms, p99
ms, errors, CPU us a request (all the server's processes), the front's CPU us a request (headway
only, else "-"), other CPU % (the machine's CPU neither the server nor wrk used), and the session
the server ran in ("own", or "shared" with wrk). BODIES.tsv a
line per server and round: round, server, upload MB/s, download MB/s, 5 MB echo s (medians of the
round's transfers), CPU ms an upload, CPU ms a download, headway's front's peak RSS MiB.

A throughput table leads with each server's CPU a request (the median of its runs in either
session: what a request costs does not depend on how the kernel groups the processes) and
headway's ratio to it; then requests/s in each session, the median round with headway's ratio of
medians and its ratio in each round (the rounds were interleaved, so each compares two runs
minutes apart); p50 and p99 are those of the median round in sessions of their own. The bodies
table gives each server's median round by upload MB/s.
"""

import csv
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import results  # noqa: E402

TITLES = {
    "fastapi": "FastAPI JSON: headway, uvicorn and granian ASGI",
    "wsgi": "WSGI hello world: headway, granian WSGI, gunicorn gthread, and headway with its lanes off",
    "tls": "WSGI hello world over HTTPS: headway and granian WSGI with one certificate",
    "flask": "Flask JSON and a sqlite page: headway and granian WSGI",
    "rack": "Rack hello world: headway's Rack worker, Puma in cluster mode, and Puma inside headway",
    "rails": "A Rails page: headway's Rack worker, Puma in cluster mode, and Puma inside headway",
    "bodies": "Large bodies: headway, granian WSGI and gunicorn",
    "static": "Static files: headway's front, nginx, granian's static mount and WhiteNoise",
}
ORDER = {"fastapi": 2, "wsgi": 3, "flask": 4, "tls": 4, "bodies": 5, "static": 6, "rack": 6, "rails": 6}
# The result each part is written as, where it is not versus-PART, and its notes.
NAMES = {"static": "static"}
NOTES = {
    "static": ["Files of random bytes at /static/: `headway serve -w 2 --static /static=DIR` (the front serves "
               "them, one thread on 2 CPUs; by its default `--sendfile auto` the 1 and 100 KiB files go by sendfile "
               "and the 10 MiB one, to wrk on the same host, is copied), Debian's nginx with `sendfile on`, "
               "`tcp_nopush on`, `worker_processes "
               "2` and no access log, `granian --workers 2 --static-path-route /static --static-path-mount DIR`, "
               "and WhiteNoise over a WSGI app under `gunicorn -w 2` (sync workers). Each file is checked byte for "
               "byte before it is measured. CPU us/req is the CPU time of all the server's processes over the "
               "requests wrk counted; headway's front apart in its own column."],
}
LABELS = {
    "headway": "headway", "headway-no-lanes": "headway --no-lanes",
    "uvicorn": "uvicorn (uvloop, httptools)", "uvicorn-plain": "uvicorn (asyncio, h11: pip's defaults)",
    "granian-asgi": "granian ASGI", "granian-wsgi": "granian WSGI",
    "granian-wsgi-threads": "granian WSGI --blocking-threads 5", "gunicorn": "gunicorn (sync)",
    "gunicorn-gthread": "gunicorn gthread --threads 5",
    "puma-cluster": "Puma cluster mode (-w 2 -t 5:5)", "headway-puma": "headway --cmd puma (-t 5:5 in each)",
    "nginx": "nginx (sendfile on)", "granian": "granian static mount", "whitenoise": "WhiteNoise (gunicorn)",
}


def number(text):
    try:
        return float(text)
    except ValueError:
        return None


def median_row(rows, key):
    """The row whose `key` is the median (the lower middle one of an even count)."""
    ordered = sorted(rows, key=key)
    return ordered[(len(ordered) - 1) // 2]


def whole(value):
    """A figure rounded to a whole number, "-" for none."""
    return "-" if value is None else round(value)


def ratio(mine, theirs):
    return mine / theirs if mine and theirs else None


def span(ratios):
    known = [value for value in ratios if value is not None]
    return f"{min(known):.2f}-{max(known):.2f}x" if known else "-"


def median_of(rows, field):
    known = [row[field] for row in rows if row[field] is not None]
    return statistics.median(known) if known else None


def each_round(rows, field="rps"):
    return " ".join(f"{row[field]:.0f}" for row in sorted(rows, key=lambda row: row["round"])) or "-"


def runs_of(measured, server, session=None):
    """The runs of `server` in `session` (any session: None)."""
    return [row for row in measured if row["server"] == server and session in (None, row["session"])]


def rps_ratio(measured, server, session):
    """headway's median requests/s over the server's in `session`, and headway's over it in each
    round (the rounds were interleaved: each compares two runs minutes apart)."""
    mine, theirs = runs_of(measured, "headway", session), runs_of(measured, server, session)
    if not mine or not theirs:
        return None, []
    by_round = {row["round"]: row["rps"] for row in mine}
    overall = ratio(median_row(mine, rps)["rps"], median_row(theirs, rps)["rps"])
    in_order = sorted(theirs, key=lambda row: row["round"])
    return overall, [ratio(by_round.get(row["round"]), row["rps"]) for row in in_order]


def rps(row):
    return row["rps"]


# The Ruby parts' apps: what each serves, and the rackup file the servers are given.
RACK_APPS = {
    "rack": ("python/headway/twins/hello.ru (13 bytes, no router)", "hello.ru"),
    "rails": ("The Rails test app's /items (tests/apps/rails, Rails 6.1: a template of ten rows in the app's layout) "
              "in production as bench/rails.ru sets it up (eager loading on, a secret key base made for the run, "
              "Rails' log in a file)", "bench/rails.ru"),
}


def rack_notes(part, settings):
    """What a Ruby part ran, for its result's notes."""
    t, w = settings["RACK_THREADS"], settings["WORKERS"]
    what, app = RACK_APPS[part]
    return [f"{what} served by headway's own Rack worker, `headway serve -w {w} -t {t} {app}` (the row named "
            f"headway: Ruby threads in headway's worker processes, no Puma); by `puma -e production -w {w} -t {t}:{t}` "
            f"(cluster mode, no preload); and by `headway serve -w {w} -t {t} --cmd 'puma -e production -t {t}:{t} -b "
            f"unix://{{socket}} {app}'`. The Rack worker runs with RACK_ENV=production, as Puma's -e sets it. CPU "
            "us/req is the CPU time of all the server's processes over the requests wrk counted, headway's front apart "
            "in its own column. Requests/s with each server in a session of its own and sharing the session of wrk, as "
            "in the other parts."]


def python_notes(part, settings):
    """What a Python part ran, for its result's notes."""
    notes = [
        "headway with its defaults (-t auto: 5 slots a worker for a WSGI app, 16 for an ASGI app); each "
        "peer with its defaults and, where its users tune it, as they do (WSGI threads: "
        f"{settings['WSGI_THREADS']}, headway's slots); uvicorn without its access log. CPU us/req is the "
        "CPU time of all the server's processes over the requests wrk counted, headway's front apart in its "
        "own column. Requests/s with each server in a session of its own, as a service or a second terminal "
        "runs it, and sharing the session of wrk: with the kernel's autogroup a session is one scheduling "
        "group, so on 2 CPUs with wrk on them the grouping moves requests/s by up to a third while CPU a "
        "request stays."]
    if part == "tls":
        notes.append("HTTPS with HTTP/1.1 keep-alive (wrk offers no h2 by ALPN): every server is given the same "
                     "self-signed P-256 certificate for 127.0.0.1, made for the run with openssl (`headway serve "
                     "--certfile --keyfile`, `granian --ssl-certificate --ssl-keyfile`), so that the key and the "
                     "certificate cost both alike.")
    return notes


def throughput_part(part, rows, settings):
    """The table and summary of a part measured with wrk: CPU a request first (the median of every
    run, in either session), then requests/s in each session as its median round."""
    busy = part.endswith("-busy")
    tables, sentences = [], []
    for endpoint in dict.fromkeys(row["endpoint"] for row in rows):
        measured = [row for row in rows if row["endpoint"] == endpoint]
        servers = list(dict.fromkeys(row["server"] for row in measured))
        cpu_mine = median_of(runs_of(measured, "headway"), "cpu")
        table_rows, compared = [], []
        for server in servers:
            own, shared = runs_of(measured, server, "own"), runs_of(measured, server, "shared")
            middle = median_row(own or shared, rps)
            cpu = median_of(runs_of(measured, server), "cpu")
            cpu_ratio = ratio(cpu_mine, cpu)
            own_ratio, own_rounds = rps_ratio(measured, server, "own")
            shared_ratio, shared_rounds = rps_ratio(measured, server, "shared")
            if server != "headway":
                compared.append(f"{cpu_ratio:.2f}x {LABELS[server]}'s CPU a request, " if cpu_ratio else "")
                compared[-1] += ", ".join(
                    f"{value:.2f}x its requests/s {where} (rounds {span(rounds)})"
                    for value, where, rounds in ((own_ratio, "in sessions of their own", own_rounds),
                                                 (shared_ratio, "sharing wrk's session", shared_rounds)) if value)
            mine_row = server == "headway"
            table_rows.append([
                LABELS[server], whole(cpu), "-" if mine_row or cpu_ratio is None else f"{cpu_ratio:.2f}x",
                whole(median_of(runs_of(measured, server), "front")),
                round(median_row(own, rps)["rps"]) if own else "-",
                "-" if mine_row or own_ratio is None else f"{own_ratio:.2f}x",
                round(median_row(shared, rps)["rps"]) if shared else "-",
                "-" if mine_row or shared_ratio is None else f"{shared_ratio:.2f}x",
                middle["p50"], middle["p99"],
                each_round(own), each_round(shared),
                "-" if mine_row else " ".join(f"{value:.2f}" if value else "-" for value in own_rounds + shared_rounds),
                sum(row["errors"] for row in runs_of(measured, server)),
                each_round(runs_of(measured, server), "other"),
            ])
        tables.append({
            "title": f"{endpoint}: each server's median of {settings['ROUNDS']} rounds",
            "columns": ["server", "CPU us/req", "headway's CPU/req vs it", "front CPU us/req", "req/s",
                        "headway vs it", "req/s, sharing wrk's session", "headway vs it, sharing wrk's session",
                        "p50 ms", "p99 ms", "req/s, each round", "req/s sharing wrk's session, each round",
                        "headway vs it, each round (own, then shared)", "errors", "other CPU %, each run"],
            "rows": table_rows,
        })
        sentences.append(f"{endpoint}: headway spends " + "; ".join(filter(None, compared)) + ".")
    base = part.removesuffix("-busy")
    what = (f"{settings['WORKERS']} workers each, wrk -t1 -c{settings['CONNECTIONS']} -d{settings['DURATION']}, "
            f"{settings['ROUNDS']} interleaved rounds, nothing pinned")
    if busy:
        what += ", beside a CPU-bound neighbour process (one shell loop)"
    summary = f"{what}. Medians: " + " ".join(sentences)
    title = TITLES[base] + (", beside a busy neighbour" if busy else "")
    return title, summary, tables


def bodies_part(rows, settings):
    servers = list(dict.fromkeys(row["server"] for row in rows))
    by_round = {(row["server"], row["round"]): row for row in rows}
    mine = [row for row in rows if row["server"] == "headway"]
    up_mine = statistics.median(row["up"] for row in mine) if mine else None
    down_mine = statistics.median(row["down"] for row in mine) if mine else None
    table_rows, compared = [], []
    for server in servers:
        own = sorted((row for row in rows if row["server"] == server), key=lambda row: row["round"])
        up, down = statistics.median(row["up"] for row in own), statistics.median(row["down"] for row in own)
        up_ratios = [ratio(by_round.get(("headway", row["round"]), {}).get("up"), row["up"]) for row in own]
        down_ratios = [ratio(by_round.get(("headway", row["round"]), {}).get("down"), row["down"]) for row in own]
        hwm = [row["hwm"] for row in own if row["hwm"] is not None]
        if server != "headway":
            compared.append(f"uploads {ratio(up_mine, up):.2f}x and downloads {ratio(down_mine, down):.2f}x "
                            f"{LABELS[server]}'s speed")
        table_rows.append([
            LABELS[server], round(up), round(down),
            "-" if server == "headway" else f"{ratio(up_mine, up):.2f}x / {ratio(down_mine, down):.2f}x",
            "-" if server == "headway" else " ".join(f"{u:.2f}/{d:.2f}" for u, d in zip(up_ratios, down_ratios)),
            round(statistics.median(row["echo"] for row in own), 3),
            f"{statistics.median(row['up_cpu'] for row in own):.0f} / "
            f"{statistics.median(row['down_cpu'] for row in own):.0f}",
            f"{max(hwm):.1f}" if hwm else "-",
        ])
    size = f"{settings['BODY_MIB']} MiB"
    table = {
        "title": f"1 worker, curl one at a time: {settings['COUNT']} uploads and {settings['COUNT']} downloads of "
                 f"{size} and {settings['ECHOES']} echoes of 5 MB a round; medians of {settings['ROUNDS']} rounds",
        "columns": ["server", "upload MB/s", "download MB/s", "headway vs it (up / down)",
                    "headway vs it, each round (up/down)", "5 MB echo s", "CPU ms a transfer (up / down)",
                    "front peak RSS MiB"],
        "rows": table_rows,
    }
    moved = int(settings["COUNT"]) * int(settings["BODY_MIB"]) * int(settings["ROUNDS"])
    hwm_mine = [row["hwm"] for row in mine if row["hwm"] is not None]
    summary = (f"headway {'; '.join(compared)} (medians). Its front's peak RSS: "
               f"{max(hwm_mine) if hwm_mine else '-'} MiB while {moved} MiB passed each way.")
    return TITLES["bodies"], summary, [table]


def show(title, summary, tables):
    print(f"\n## {title}\n{summary}")
    for table in tables:
        print(f"\n{table['title']}")
        print("| " + " | ".join(table["columns"]) + " |")
        print("|" + "|".join("---" for _ in table["columns"]) + "|")
        for row in table["rows"]:
            print("| " + " | ".join(str(cell) for cell in row) + " |")


def main():
    settings = {key: os.environ.get(key, "") for key in
                ("PARTS", "ROUNDS", "DURATION", "CONNECTIONS", "WORKERS", "COUNT", "BODY_MIB", "ECHOES",
                 "WSGI_THREADS", "RACK_THREADS")}
    # One "tool=version" a line, as bench_version says it.
    versions = dict(line.split("=", 1) for line in os.environ.get("VERSIONS", "").splitlines() if "=" in line)
    with open(sys.argv[1]) as file:
        rows = [{"part": p, "round": int(r), "server": s, "endpoint": e, "rps": number(rps) or 0.0,
                 "p50": number(p50), "p99": number(p99), "errors": int(errors), "cpu": number(cpu),
                 "front": number(front), "other": number(other) or 0.0, "session": session}
                for p, r, s, e, rps, p50, p99, errors, cpu, front, other, session in csv.reader(file, delimiter="\t")]
    with open(sys.argv[2]) as file:
        body_rows = [{"round": int(r), "server": s, "up": float(up), "down": float(down), "echo": float(echo),
                      "up_cpu": float(up_cpu), "down_cpu": float(down_cpu), "hwm": number(hwm)}
                     for r, s, up, down, echo, up_cpu, down_cpu, hwm in csv.reader(file, delimiter="\t")]
    for part in settings["PARTS"].split():
        if part == "bodies":
            if not body_rows:
                continue
            title, summary, tables = bodies_part(body_rows, settings)
        else:
            part_rows = [row for row in rows if row["part"] == part]
            if not part_rows:
                continue
            title, summary, tables = throughput_part(part, part_rows, settings)
        show(title, summary, tables)
        if os.environ.get("RESULTS", "1") != "0":
            order = ORDER[part.removesuffix("-busy")] + (5 if part.endswith("-busy") else 0)
            base = part.removesuffix("-busy")
            notes = (rack_notes(base, settings) if base in RACK_APPS
                     else NOTES[base] if base in NOTES else python_notes(base, settings))
            path = results.write(NAMES.get(part, f"versus-{part}"), title=title,
                                 command=os.environ.get("COMMAND") or f"PARTS={part} bench/versus.sh",
                                 summary=summary, tables=tables, order=order, versions=versions, notes=notes)
            print(f"written: {path}")


if __name__ == "__main__":
    main()
