"""Builds docs/benchmarks.md and its detail pages from bench/results/*.json.

docs/benchmarks.md is what a user reads first: one table, a row for each peer of each comparison
(bench/headlines.py reads them from the results), each linking to its detail page,
docs/benchmarks/NAME.md: the latest run with its command, machine, versions, every table and round.

Usage: python3 bench/page.py          writes the pages
       python3 bench/page.py --check  fails if the pages are not what the results make
"""

import itertools
import json
import sys
from pathlib import Path

import headlines  # bench/headlines.py, next to this script

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results"
PAGE = REPO / "docs" / "benchmarks.md"
DETAILS = REPO / "docs" / "benchmarks"

INTRO = """\
# Benchmarks

headway against the servers people use, as the latest run of each bench script left it. A row
is one comparison with one peer; its link leads to the run in full: the command that measures it
again (the scripts install the peers they need into `bench/.venv`), the machine, the versions,
every round. Servers and load tools start the plain way, nothing pinned unless a page says so; a
shared 2-CPU machine is noisy, so comparisons run in interleaved rounds and give medians.

CPU a request (all of a server's processes) is the figure that holds from one machine to another;
requests/s on a 2-CPU box with the load tool on it depend on how the kernel places the processes.
"x lower" compares latencies: the peer's figure over headway's.
"""

OUTRO = """\
This page and the ones it links are built from [bench/results/](../bench/results/) by
`python3 bench/page.py`; the decisions the figures led to are in [docs/design/](design/).
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


def detail(result):
    """A result's own page: its summary, command, machine, versions, tables and notes."""
    machine = result["machine"]
    lines = [f"# {result['title']}", "", result["summary"], ""]
    versions = ", ".join(f"{name} {version}" for name, version in result.get("versions", {}).items())
    lines.append(f"`{result['command']}`: run {result['finished']} on {machine['model']}, {machine['cpus']} CPUs, "
                 f"{machine['memory_gib']} GiB, Linux {machine['kernel']}" + (f"; {versions}." if versions else "."))
    lines.append("")
    for spec in result["tables"]:
        lines += table(spec)
    lines += [f"- {note}" for note in result.get("notes", [])]
    lines += ["", "[All benchmarks](../benchmarks.md)"]
    return "\n".join(lines).rstrip("\n") + "\n"


def overview(results):
    """docs/benchmarks.md: the headline table of every result."""
    rows = []
    for result in results:
        for each in headlines.rows(result):
            link = f"[{each['what']}](benchmarks/{result['name']}.md)"
            rows.append([link, each["against"], each["headway"], each["cpu"], each["p99"],
                         result["finished"].split(" ")[0]])
    spec = {"columns": ["comparison", "against", "headway vs it", "CPU a request, headway / it",
                        "p99, headway / it", "run"], "rows": rows}
    return "\n".join([INTRO, *table(spec), OUTRO]).rstrip("\n") + "\n"


def render():
    """Every page the results make: {path: text}."""
    results = sorted((json.loads(path.read_text()) for path in RESULTS.glob("*.json")),
                     key=lambda result: (result["order"], result["name"]))
    pages = {PAGE: overview(results)}
    pages.update({DETAILS / f"{result['name']}.md": detail(result) for result in results})
    return pages


def main():
    pages = render()
    if sys.argv[1:] == ["--check"]:
        stale = [path for path, text in pages.items() if not path.is_file() or path.read_text() != text]
        stale += [path for path in DETAILS.glob("*.md") if path not in pages]
        if stale:
            sys.exit(f"{', '.join(str(path.relative_to(REPO)) for path in stale)}: not what bench/results/ make: "
                     "run python3 bench/page.py")
        return
    if sys.argv[1:]:
        sys.exit(__doc__)
    DETAILS.mkdir(exist_ok=True)
    for path in DETAILS.glob("*.md"):
        if path not in pages:
            path.unlink()
    for path, text in pages.items():
        path.write_text(text)
    print(f"{PAGE.relative_to(REPO)}: {pages[PAGE].count(chr(10))} lines, and {len(pages) - 1} detail pages")


if __name__ == "__main__":
    main()
