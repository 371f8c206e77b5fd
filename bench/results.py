"""A benchmark's result as bench/results/NAME.json: the files docs/benchmarks.md is built from
(bench/page.py). A bench script measures, then writes its result with `write`, so the page shows
the latest run of every comparison with the machine, the versions and the command that made it.

As a command, for the shell scripts, it fills in the machine and the time and writes the file:

    python3 bench/results.py NAME < result.json
    python3 bench/results.py NAME --title TITLE --order N --command COMMAND --summary SUMMARY
        [--version TOOL VERSION]... [--table TITLE FILE.tsv]... [--note NOTE]...

The first takes the rest (title, order, command, summary, tables, notes, versions) as JSON on
stdin; the second from its options, each table from a tab-separated file whose first line names
the columns, so a script that keeps its rounds in TSV hands them over as they are.
"""

import argparse
import csv
import datetime
import json
import math
import os
import platform
import sys
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def machine():
    """What ran the benchmark: CPU model, CPUs, memory and kernel."""
    model = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory_kib = 0
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                memory_kib = int(line.split()[1])
    except OSError:
        pass
    return {"model": model, "cpus": os.cpu_count(), "memory_gib": round(memory_kib / 2**20),
            "kernel": platform.release()}


def write(name, *, title, command, summary, tables, order, notes=(), versions=None):
    """Writes bench/results/NAME.json. `tables`: a list of {"title", "columns", "rows"}; `order`:
    the result's place on the page (smaller first)."""
    result = {
        "name": name,
        "title": title,
        "order": order,
        "command": command,
        "finished": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": machine(),
        "versions": versions or {},
        "summary": summary,
        "tables": tables,
        "notes": list(notes),
    }
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n")
    return path


def tsv_value(text):
    """A TSV cell as the result keeps it: a number where it is one, else the text."""
    for kind in (int, float):
        try:
            value = kind(text)
        except ValueError:
            continue
        if math.isfinite(value):
            return value
    return text


def read_table(title, path):
    """A result's table from the tab-separated file at `path`: its first line the columns, every
    other line a row."""
    with open(path, newline="") as file:
        lines = list(csv.reader(file, delimiter="\t", quoting=csv.QUOTE_NONE))
    if not lines:
        raise SystemExit(f"{path}: empty, a table needs at least its columns")
    columns, *rows = lines
    for number, row in enumerate(rows, start=2):
        if len(row) != len(columns):
            raise SystemExit(f"{path}:{number}: {len(row)} cells for {len(columns)} columns")
    return {"title": title, "columns": columns, "rows": [[tsv_value(text) for text in row] for row in rows]}


def main():
    parser = argparse.ArgumentParser(description="Writes bench/results/NAME.json: the fields from "
                                     "the options, or as JSON on stdin when no option is given.")
    parser.add_argument("name")
    parser.add_argument("--title")
    parser.add_argument("--order", type=int)
    parser.add_argument("--command")
    parser.add_argument("--summary")
    parser.add_argument("--version", nargs=2, action="append", default=[], metavar=("TOOL", "VERSION"))
    parser.add_argument("--table", nargs=2, action="append", default=[], metavar=("TITLE", "FILE.tsv"))
    parser.add_argument("--note", action="append", default=[])
    args = parser.parse_args()
    given = [args.title, args.order, args.command, args.summary]
    if all(value is None for value in given) and not (args.version or args.table or args.note):
        fields = json.load(sys.stdin)
    elif None in given:
        parser.error("--title, --order, --command and --summary go together")
    else:
        fields = {"title": args.title, "order": args.order, "command": args.command, "summary": args.summary,
                  "versions": dict(args.version), "notes": args.note,
                  "tables": [read_table(title, path) for title, path in args.table]}
    print(write(args.name, **fields))


if __name__ == "__main__":
    main()
