"""The tables of bench/versus.sh, from its raw figures, and its results for docs/benchmarks.md;
bench/static.sh's too, whose runs have the same shape (part `static`, a file an endpoint).

Usage (bench/versus.sh runs it): python3 bench/versus_tables.py RESULTS.tsv BODIES.tsv, with the
run's settings in the environment (PARTS, ROUNDS, DURATION, CONNECTIONS, WORKERS, COUNT, BODY_MIB,
ECHOES, VERSIONS: the run's header lines; COMMAND: what measures it again, when not versus.sh;
RESULTS=0 writes no result files).

RESULTS.tsv has a line per measured run: part, round, server, endpoint, requests/s, p50 ms, p99
ms, errors, CPU us a request (all the server's processes), the front's CPU us a request (headway
only, else "-"), other CPU % (the machine's CPU neither the server nor wrk used). BODIES.tsv a
line per server and round: round, server, upload MB/s, download MB/s, 5 MB echo s (medians of the
round's transfers), CPU ms an upload, CPU ms a download, headway's front's peak RSS MiB.

Each table row is a server's median round (by requests/s, or by upload MB/s for bodies), a whole
measured row rather than a mix of rounds; beside it, headway's ratio to the server in each round
(the rounds were interleaved, so each ratio compares two runs minutes apart) and the ratio of the
medians.
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
    "wsgi": "WSGI hello world: headway, granian WSGI, and headway with its lanes off",
    "flask": "Flask JSON and a sqlite page: headway and granian WSGI",
    "bodies": "Large bodies: headway, granian WSGI and gunicorn",
    "static": "Static files: headway's front, nginx, granian's static mount and WhiteNoise",
}
ORDER = {"fastapi": 2, "wsgi": 3, "flask": 4, "bodies": 5, "static": 6}
# The result each part is written as, where it is not versus-PART, and its notes.
NAMES = {"static": "static"}
NOTES = {
    "static": ["Files of random bytes at /static/: `headway serve -w 2 --static /static=DIR` (the front serves "
               "them, one thread on 2 CPUs), Debian's nginx with `sendfile on`, `tcp_nopush on`, `worker_processes "
               "2` and no access log, `granian --workers 2 --static-path-route /static --static-path-mount DIR`, "
               "and WhiteNoise over a WSGI app under `gunicorn -w 2` (sync workers). Each file is checked byte for "
               "byte before it is measured. CPU us/req is the CPU time of all the server's processes over the "
               "requests wrk counted; headway's front apart in its own column."],
}
LABELS = {
    "headway": "headway", "uvicorn": "uvicorn (uvloop, httptools)", "granian-asgi": "granian ASGI",
    "granian-wsgi": "granian WSGI", "gunicorn": "gunicorn (sync)", "headway-no-lanes": "headway --no-lanes",
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


def throughput_part(part, rows, settings):
    """The table and summary of a part measured with wrk."""
    busy = part.endswith("-busy")
    tables, sentences = [], []
    for endpoint in dict.fromkeys(row["endpoint"] for row in rows):
        measured = [row for row in rows if row["endpoint"] == endpoint]
        servers = list(dict.fromkeys(row["server"] for row in measured))
        by_round = {(row["server"], row["round"]): row for row in measured}
        mine = [row for row in measured if row["server"] == "headway"]
        mine_median = median_row(mine, lambda row: row["rps"]) if mine else None
        table_rows, compared = [], []
        for server in servers:
            own = [row for row in measured if row["server"] == server]
            middle = median_row(own, lambda row: row["rps"])
            rounds = sorted({row["round"] for row in own})
            ratios = [ratio(by_round.get(("headway", r), {}).get("rps"), by_round[(server, r)]["rps"]) for r in rounds]
            overall = ratio(mine_median["rps"], middle["rps"]) if mine_median else None
            if server != "headway":
                compared.append(f"{overall:.2f}x {LABELS[server]} (rounds {span(ratios)})" if overall else "")
            table_rows.append([
                LABELS[server], round(middle["rps"]), middle["p50"], middle["p99"], whole(middle["cpu"]),
                whole(middle["front"]),
                "-" if server == "headway" or overall is None else f"{overall:.2f}x",
                "-" if server == "headway" else " ".join(f"{value:.2f}" if value else "-" for value in ratios),
                " ".join(f"{row['rps']:.0f}" for row in sorted(own, key=lambda row: row["round"])),
                sum(row["errors"] for row in own),
                " ".join(f"{row['other']:.0f}" for row in sorted(own, key=lambda row: row["round"])),
            ])
        tables.append({
            "title": f"{endpoint}: each server's median round of {settings['ROUNDS']}",
            "columns": ["server", "req/s", "p50 ms", "p99 ms", "CPU us/req", "front CPU us/req",
                        "headway vs it", "headway vs it, each round", "req/s, each round", "errors",
                        "other CPU %, each round"],
            "rows": table_rows,
        })
        sentences.append(f"{endpoint}: headway " + ", ".join(filter(None, compared)) + ".")
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
                ("PARTS", "ROUNDS", "DURATION", "CONNECTIONS", "WORKERS", "COUNT", "BODY_MIB", "ECHOES")}
    # One "tool=version" a line, as bench_version says it.
    versions = dict(line.split("=", 1) for line in os.environ.get("VERSIONS", "").splitlines() if "=" in line)
    with open(sys.argv[1]) as file:
        rows = [{"part": p, "round": int(r), "server": s, "endpoint": e, "rps": number(rps) or 0.0,
                 "p50": number(p50), "p99": number(p99), "errors": int(errors), "cpu": number(cpu),
                 "front": number(front), "other": number(other) or 0.0}
                for p, r, s, e, rps, p50, p99, errors, cpu, front, other in csv.reader(file, delimiter="\t")]
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
            notes = NOTES.get(base, ["Every server with its defaults (uvicorn without its access log; headway's "
                                     "-t auto: 5 slots a worker for a WSGI app, 16 for an ASGI app). "
                                     "CPU us/req is the CPU time of all the server's processes over the "
                                     "requests wrk counted; headway's front apart in its own column."])
            path = results.write(NAMES.get(part, f"versus-{part}"), title=title,
                                 command=os.environ.get("COMMAND") or f"PARTS={part} bench/versus.sh",
                                 summary=summary, tables=tables, order=order, versions=versions, notes=notes)
            print(f"written: {path}")


if __name__ == "__main__":
    main()
