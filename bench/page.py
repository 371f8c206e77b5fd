"""Builds docs/benchmarks.md from bench/results/*.json: the latest run of every comparison, in
the order the results give, each with its command, machine and versions.

Usage: python3 bench/page.py          writes docs/benchmarks.md
       python3 bench/page.py --check  fails if docs/benchmarks.md is not what the results make
"""

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results"
PAGE = REPO / "docs" / "benchmarks.md"

INTRO = """\
# Benchmarks

What headway measures against the servers people use, each comparison as its latest run left it.
Every section names the command that measured it: run it to measure again on your machine (the
bench scripts install the peers they need into `bench/.venv`). The servers and the load tools are
started the plain way, nothing pinned unless a section says so; a shared machine is noisy, so
the comparisons run in interleaved rounds and show medians with every round.

This page is built from the results in [bench/results/](../bench/results/) by
`python3 bench/page.py`; decisions and the measurements behind them are in
[docs/design/](design/), and the page's history is in git.
"""


def anchor(title):
    kept = "".join(ch for ch in title.lower() if ch.isalnum() or ch in " -")
    return kept.replace(" ", "-")


def cell(value):
    if isinstance(value, float):
        return f"{value:.2f}" if abs(value) < 100 else f"{value:,.0f}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}" if abs(value) >= 10000 else str(value)
    return str(value).replace("|", "\\|")


def table(spec):
    lines = []
    if spec.get("title"):
        lines += [f"*{spec['title']}*", ""]
    lines.append("| " + " | ".join(spec["columns"]) + " |")
    lines.append("|" + "|".join("---" for _ in spec["columns"]) + "|")
    lines += ["| " + " | ".join(cell(value) for value in row) + " |" for row in spec["rows"]]
    return lines + [""]


def section(result):
    machine = result["machine"]
    lines = [f"## {result['title']}", "", result["summary"], ""]
    lines += [f"`{result['command']}`", ""]
    versions = ", ".join(f"{name} {version}" for name, version in result.get("versions", {}).items())
    lines.append(f"Run {result['finished']} on {machine['model']}, {machine['cpus']} CPUs, "
                 f"{machine['memory_gib']} GiB, Linux {machine['kernel']}" + (f"; {versions}." if versions else "."))
    lines.append("")
    for spec in result["tables"]:
        lines += table(spec)
    lines += [f"- {note}" for note in result.get("notes", [])]
    if result.get("notes"):
        lines.append("")
    return lines


def render():
    results = sorted((json.loads(path.read_text()) for path in RESULTS.glob("*.json")),
                     key=lambda result: (result["order"], result["name"]))
    lines = [INTRO]
    lines += [f"- [{result['title']}](#{anchor(result['title'])})" for result in results]
    lines.append("")
    for result in results:
        lines += section(result)
    return "\n".join(lines).rstrip("\n") + "\n"


def main():
    page = render()
    if sys.argv[1:] == ["--check"]:
        if PAGE.read_text() != page:
            sys.exit("docs/benchmarks.md is not what bench/results/ make: run python3 bench/page.py")
        return
    if sys.argv[1:]:
        sys.exit(__doc__)
    PAGE.write_text(page)
    print(f"{PAGE.relative_to(REPO)}: {page.count(chr(10))} lines from {len(list(RESULTS.glob('*.json')))} results")


if __name__ == "__main__":
    main()
