"""Builds docs/benchmarks.md from bench/results/*.json: the latest run of every comparison, in
the order the results give, each with its command, machine and versions.

Usage: python3 bench/page.py          writes docs/benchmarks.md
       python3 bench/page.py --check  fails if docs/benchmarks.md is not what the results make
"""

import itertools
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


def decimals(value):
    """How many decimals the result gave a float (1.0 and 1.23 as 1 and 2)."""
    text = repr(value)
    return len(text) - text.index(".") - 1 if "." in text and "e" not in text else 0


def number_format(column):
    """How a column's numbers are written, alike down the column: its floats to the most decimals
    any of them has (1.00 above 1.23, 158.8 above 81.1), thousands grouped when one reaches
    10,000 (9,984 above 20,000)."""
    numbers = [value for value in column if isinstance(value, (int, float)) and not isinstance(value, bool)]
    places = max((decimals(value) for value in numbers if isinstance(value, float)), default=0)
    return ("," if any(abs(value) >= 10000 for value in numbers) else "") + f".{places}f"


def cell(value, spec):
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return format(value, spec)
    return str(value).replace("|", "\\|")


def table(spec):
    lines = []
    if spec.get("title"):
        lines += [f"*{spec['title']}*", ""]
    lines.append("| " + " | ".join(spec["columns"]) + " |")
    lines.append("|" + "|".join("---" for _ in spec["columns"]) + "|")
    formats = [number_format(column) for column in itertools.zip_longest(*spec["rows"])]
    lines += ["| " + " | ".join(cell(value, each) for value, each in zip(row, formats)) + " |"
              for row in spec["rows"]]
    return lines + [""]


def section(result, noted):
    """A result's section; `noted`: the notes earlier sections gave, said once on the page."""
    machine = result["machine"]
    lines = [f"## {result['title']}", "", result["summary"], ""]
    versions = ", ".join(f"{name} {version}" for name, version in result.get("versions", {}).items())
    lines.append(f"`{result['command']}`: run {result['finished']} on {machine['model']}, {machine['cpus']} CPUs, "
                 f"{machine['memory_gib']} GiB, Linux {machine['kernel']}" + (f"; {versions}." if versions else "."))
    lines.append("")
    for spec in result["tables"]:
        lines += table(spec)
    notes = [note for note in result.get("notes", []) if note not in noted]
    lines += [f"- {note}" for note in notes]
    if len(notes) < len(result.get("notes", [])):
        lines.append("- The notes of the sections above hold here too.")
    noted.update(notes)
    if result.get("notes"):
        lines.append("")
    return lines


def render():
    results = sorted((json.loads(path.read_text()) for path in RESULTS.glob("*.json")),
                     key=lambda result: (result["order"], result["name"]))
    lines = [INTRO]
    lines.append("Sections: " + " · ".join(f"[{result['title']}](#{anchor(result['title'])})" for result in results))
    lines.append("")
    noted = set()
    for result in results:
        lines += section(result, noted)
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
