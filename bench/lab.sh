#!/usr/bin/env bash
# The seed experiments, as the lab runs them (`headway lab run`), side by side with every peer
# installed here, written as results for docs/benchmarks.md: one result a scenario, its tables
# as the lab prints them (every row its median round; all rounds are in the raw JSON under
# bench/out/lab/).
#
# Usage: bench/lab.sh [SCENARIO...]     (default: the seed scenarios)
# Env:   ROUNDS=3  SERVERS=all  HEADWAY=path/to/headway  BENCH_VENV=bench/.venv
set -euo pipefail

# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"

ROUNDS="${ROUNDS:-3}"
SERVERS="${SERVERS:-}"
SCENARIOS=("$@")
# Their places on the benchmark page, whichever of them a run measures.
PAGE_ORDER=(keepalive-tail mixed-tail multiplexed concurrency-sweep long-tail-sweep overload pipelining scale-out daily)
((${#SCENARIOS[@]})) || SCENARIOS=(keepalive-tail mixed-tail concurrency-sweep long-tail-sweep overload pipelining scale-out)

bench_find_headway
bench_python_peers
BENCH_OUT="$BENCH_OUT/lab"
bench_init
server_args=()
[[ -z "$SERVERS" ]] || server_args=(--servers "$SERVERS")
raw="$BENCH_OUT/lab.json"
bench_say "headway lab run ${SCENARIOS[*]} --rounds $ROUNDS ${server_args[*]}"
"$HEADWAY" lab run "${SCENARIOS[@]}" --rounds "$ROUNDS" "${server_args[@]}" --json >"$raw"

ROUNDS="$ROUNDS" BENCH_REPO="$BENCH_REPO" PAGE_ORDER="${PAGE_ORDER[*]}" python3 - "$raw" <<'PY'
import json
import os
import sys

sys.path.insert(0, os.path.join(os.environ["BENCH_REPO"], "bench"))
import results  # noqa: E402

report = json.load(open(sys.argv[1]))
versions = {server["name"]: server["version"].removeprefix(server["name"]).strip().removeprefix("version ")
            for server in report["servers"]}
rounds = os.environ["ROUNDS"]
page_order = os.environ["PAGE_ORDER"].split()


def page_rows(name, table):
    """The rows the page shows: mixed-tail's at 8 clients and its open loop, the cases lanes are
    judged by (its 4 clients' rows are in the lab's own report); every row of the others."""
    if name != "mixed-tail" or "conn" not in table["header"]:
        return table["rows"]
    conn = table["header"].index("conn")
    return [row for row in table["rows"] if row[conn] != "4"]


for scenario in report["scenarios"]:
    name = scenario["name"]
    order = page_order.index(name) if name in page_order else len(page_order)
    tables = [{"title": table["title"], "columns": table["header"], "rows": page_rows(name, table)}
              for table in scenario["tables"]]
    notes = [note for table in scenario["tables"] for note in table.get("notes", [])]
    notes = list(dict.fromkeys(notes))
    failed = sum(row["errors"] for row in scenario["rows"])
    seed = f"Seed {scenario['seed']}: " if scenario.get("seed") else ""
    about = scenario["about"].rstrip(".?") + ("?" if scenario["about"].endswith("?") else ".")
    summary = (f"{seed}{about} Each row is its median round of {rounds}; "
               f"requests without an answer: {failed}.")
    path = results.write(f"lab-{scenario['name']}", title=f"The lab: {scenario['name']}", order=20 + order,
                         command=f"bench/lab.sh {scenario['name']}", summary=summary, tables=tables,
                         notes=notes, versions=versions)
    print(path)
PY
