"""A benchmark's result as bench/results/NAME.json: the files docs/benchmarks.md is built from
(bench/page.py). A bench script measures, then writes its result with `write`, so the page shows
the latest run of every comparison with the machine, the versions and the command that made it.

As a command, for the shell scripts: `python3 bench/results.py NAME < result.json` fills in the
machine and the time and writes the file (the JSON on stdin holds the rest: title, command,
summary, tables, notes, versions).
"""

import datetime
import json
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


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python3 bench/results.py NAME < result.json")
    fields = json.load(sys.stdin)
    print(write(sys.argv[1], **fields))
