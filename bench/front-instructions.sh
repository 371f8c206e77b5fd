#!/usr/bin/env bash
# The front's own instructions a request: the user-space instructions the headway process
# executes for one request of the demo's /hello (2 workers x 5 slots), counted by valgrind's
# callgrind. The kernel's work (sockets, wake-ups) and the Python workers are not counted.
# Each binary serves two runs, of FIRST and SECOND requests (`headway load -c 32`), and the
# difference divided by the difference in requests is the figure, so start-up and shutdown
# cancel out.
#
# Why: CPU time on this shared 2-core machine moves by 10-20 % from one run to the next with the
# other tenants, so a change worth 5 % of the front's time needs dozens of timed runs to show.
# An instruction count repeats to within 1 %. It is the figure to compare two builds of the
# front by; the timed benchmarks (hello-throughput.sh, the lab) say what the change is worth.
# Under callgrind the front runs one thread at a time and ~50x slower, so a connection's next
# request is often there before the front looks: paths taken only while a connection idles
# (its keep-alive wait) are counted less often than under real load.
#
# Needs valgrind (apt-get install valgrind).
# Usage: bench/front-instructions.sh [BINARY...]   (default: $HEADWAY, else as bench/lib.sh finds it)
# Env:   FIRST=1000 SECOND=5000 ENDPOINT=/hello
set -euo pipefail

# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"

FIRST="${FIRST:-1000}"
SECOND="${SECOND:-5000}"
ENDPOINT="${ENDPOINT:-/hello}"
((SECOND > FIRST)) || bench_die "SECOND ($SECOND) must be larger than FIRST ($FIRST)"

bench_need valgrind curl
bench_find_headway
bench_init
binaries=("$@")
((${#binaries[@]})) || binaries=("$HEADWAY")
# One load generator for every binary measured, so only the front differs.
load="$HEADWAY"

# instructions BINARY N: the instructions callgrind counted in BINARY's process over a run of N
# requests.
instructions() {
    local binary="$1" requests="$2" port out
    port="$(bench_free_port)"
    out="$BENCH_OUT/front-instructions.callgrind"
    rm -f "$out"
    bench_start front-instructions "http://127.0.0.1:$port$ENDPOINT" \
        valgrind --tool=callgrind --callgrind-out-file="$out" \
        "$binary" serve -w 2 -t 5 -b "127.0.0.1:$port" --log-level warn
    "$load" load -n "$requests" -c 32 "http://127.0.0.1:$port$ENDPOINT" >"$BENCH_OUT/front-instructions-load.txt" ||
        bench_die "the load run failed: $BENCH_OUT/front-instructions-load.txt"
    grep -q '^\s*\[200\]\s*'"$requests"' responses' "$BENCH_OUT/front-instructions-load.txt" ||
        bench_say "not every response was a 200: $BENCH_OUT/front-instructions-load.txt"
    bench_stop
    awk '/^(summary|totals):/ {print $2; exit}' "$out"
}

echo "# the front's user-space instructions a request: callgrind, /hello, $FIRST and $SECOND requests (headway load -c 32), 2 workers x 5 slots"
for binary in "${binaries[@]}"; do
    first="$(instructions "$binary" "$FIRST")"
    second="$(instructions "$binary" "$SECOND")"
    echo "$binary: $(((second - first) / (SECOND - FIRST))) instructions a request"
done
