#!/usr/bin/env bash
# Where a request's CPU goes outside user-space instructions: the front's and the workers' CPU a
# request, split into user space and the kernel, and the system calls and context switches each
# side makes a request, counted by perf. Two paths, each `headway serve -w WORKERS -t SLOTS`
# under plain `wrk -t1 -cCONNECTIONS` (nothing pinned):
#
# - stub: the workers are crates/hop/examples/stub_worker.rs, which answers every request on the
#   hop at once, so what the workers spend is the hop's waiting and waking alone;
# - bundled: the bundled Python worker with APP at ENDPOINT, by default the smallest WSGI hello
#   world (headway.twins.hello:app at /), bench/versus.sh's wsgi part; APP=headway.twins.flask_bench:app
#   ENDPOINT=/json is its flask part's JSON;
# - floor: not headway but crates/server/examples/floor_server.rs, a keep-alive server on tokio's
#   one-thread runtime that answers each request head at once (bench/front-ceiling.sh): the
#   kernel's share of a request and the runtime's, in the front's columns, with no workers;
# - granian, granian-threads: the peer on the bundled path's app, `granian --interface wsgi
#   --workers WORKERS` on APP with its defaults and with `--blocking-threads SLOTS` (bench/versus.sh's
#   two granian WSGI servers, from its virtualenv): its main process in the front's columns (it
#   only watches its workers), its worker processes, which do all the work, in the workers'.
#
# Each round: WARMUP of wrk, then during DURATION of wrk, `perf stat` on the front's process and
# on the workers' processes apart, and their utime and stime (/proc/PID/stat) before and after;
# every figure is divided by the requests wrk counted. Paths alternate, ROUNDS rounds; the table
# gives every round, since the counts follow how starved of CPU each side was in that round (a
# front that runs less often finds more requests at each wake-up). Nothing here writes
# bench/results/: the figures are the profile in docs/design/front-cost.md. Needs perf with
# access to tracepoints (root, or kernel.perf_event_paranoid at most 1).
#
# Usage: bench/front-profile.sh
# Env:   PATHS="stub bundled floor" (granian and granian-threads too)  ROUNDS=3  DURATION=5  WARMUP=2s  CONNECTIONS=64  WORKERS=2  SLOTS=5
#        APP=headway.twins.hello:app  ENDPOINT=/  (the bundled and granian paths' app; the stub and the floor answer any path)
#        HEADWAY=path/to/headway (a cargo --release build's, so that the stub is built beside it)
set -euo pipefail

# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"

PATHS="${PATHS:-stub bundled floor}"
ROUNDS="${ROUNDS:-3}"
DURATION="${DURATION:-5}"
WARMUP="${WARMUP:-2s}"
CONNECTIONS="${CONNECTIONS:-64}"
WORKERS="${WORKERS:-2}"
SLOTS="${SLOTS:-5}"
APP="${APP:-headway.twins.hello:app}"
ENDPOINT="${ENDPOINT:-/}"
# The system calls counted, as the tracepoints name them, in the columns' order.
CALLS=(recvfrom sendto epoll_wait sched_yield futex read write)

bench_need perf wrk cargo
bench_find_headway
BENCH_OUT="$BENCH_OUT/front-profile"
bench_init
bench_stub_worker
[[ " $PATHS " != *" floor "* ]] || FLOOR_SERVER="$(bench_example headway-server floor_server)"
if [[ " $PATHS " == *" granian"* ]]; then
    bench_python_peers
    "$BENCH_VENV/bin/python" -c "import ${APP%%:*}" 2>/dev/null ||
        bench_die "$BENCH_VENV cannot import ${APP%%:*} (for Flask: $BENCH_VENV/bin/pip install flask)"
fi
events="context-switches"
for call in "${CALLS[@]}"; do events+=",syscalls:sys_enter_$call"; done
perf stat -e "$events" -- true >/dev/null 2>&1 ||
    bench_die "perf cannot count $events here (kernel.perf_event_paranoid, or no tracepoints)"

# cpu_ticks PID...: utime and stime (1/100 s) of the processes, summed, as "user system".
cpu_ticks() {
    local pid
    for pid in "$@"; do cat "/proc/$pid/stat" 2>/dev/null || true; done |
        awk '{sub(/^.*\) /, ""); utime += $12; stime += $13} END {print utime + 0, stime + 0}'
}

# per_request FILE REQUESTS: perf stat's counts in FILE (CSV) a request, in $events' order.
per_request() {
    awk -F, -v n="$2" '$3 != "" {printf "%s%.2f", sep, ($1 ~ /^[0-9]+$/ ? $1 / n : 0); sep = "\t"}' "$1"
}

# profile PATH ROUND: one round of PATH; appends its row to $rows.
profile() {
    local name="$1" round="$2" port url app=() python
    port="$(bench_free_port)"
    url="http://127.0.0.1:$port$ENDPOINT"
    case "$name" in
        stub) python="$STUB" ;;
        bundled) python="$HEADWAY_PYTHON" app=("$APP") ;;
        floor) ;;
        granian) app=(--workers "$WORKERS") ;;
        granian-threads) app=(--workers "$WORKERS" --blocking-threads "$SLOTS") ;;
        *) bench_die "PATHS names stub, bundled, floor, granian or granian-threads, not $name" ;;
    esac
    if [[ "$name" == floor ]]; then
        bench_start "$name-$round" "$url" "$FLOOR_SERVER" "127.0.0.1:$port"
    elif [[ "$name" == granian* ]]; then
        bench_start "$name-$round" "$url" granian --interface wsgi "${app[@]}" --host 127.0.0.1 --port "$port" "$APP"
    else
        HEADWAY_PYTHON="$python" bench_start "$name-$round" "$url" "$HEADWAY" serve -w "$WORKERS" -t "$SLOTS" \
            -b "127.0.0.1:$port" --log-level warn "${app[@]}"
    fi
    wrk -t1 -c"$CONNECTIONS" -d"$WARMUP" "$url" >/dev/null
    local front="$bench_server_pid" out="$BENCH_OUT/$name-$round"
    local worker_pids=()
    mapfile -t worker_pids < <(pgrep -P "$front")
    [[ "$name" == floor ]] || ((${#worker_pids[@]})) || bench_die "$name: the front has no worker processes"
    bench_wait_quiet
    local front_before workers_before
    front_before="$(cpu_ticks "$front")"
    workers_before="$(cpu_ticks "${worker_pids[@]}")"
    local perfs=()
    perf stat -x, -e "$events" -p "$front" -o "$out.front.csv" -- sleep "$DURATION" &
    perfs+=($!)
    if ((${#worker_pids[@]})); then
        perf stat -x, -e "$events" -p "$(IFS=,; echo "${worker_pids[*]}")" -o "$out.workers.csv" -- sleep "$DURATION" &
        perfs+=($!)
    else
        : >"$out.workers.csv"
    fi
    wrk -t1 -c"$CONNECTIONS" -d"${DURATION}s" "$url" >"$out.wrk.txt"
    wait "${perfs[@]}"
    local front_after workers_after requests
    front_after="$(cpu_ticks "$front")"
    workers_after="$(cpu_ticks "${worker_pids[@]}")"
    bench_stop
    requests="$(awk '/ requests in / {print $1}' "$out.wrk.txt")"
    [[ "${requests:-0}" -gt 0 ]] || bench_die "$name: wrk counted no requests ($out.wrk.txt)"
    # Microseconds a request: ticks are 10,000 us.
    local cpu
    cpu="$(awk -v n="$requests" -v fb="$front_before" -v fa="$front_after" -v wb="$workers_before" -v wa="$workers_after" '
        BEGIN {
            split(fb, b); split(fa, a); split(wb, c); split(wa, d)
            printf "%.1f\t%.1f\t%.1f\t%.1f", (a[1] - b[1]) * 10000 / n, (a[2] - b[2]) * 10000 / n,
                (d[1] - c[1]) * 10000 / n, (d[2] - c[2]) * 10000 / n
        }')"
    printf '%s\t%s\t%.0f\t%s\t%s\t%s\n' "$name" "$round" "$(awk '/^Requests\/sec:/ {print $2}' "$out.wrk.txt")" "$cpu" \
        "$(per_request "$out.front.csv" "$requests")" "$(per_request "$out.workers.csv" "$requests")" >>"$rows"
}

rows="$BENCH_OUT/rows.tsv"
header="path\tround\treq/s\tfront user us\tfront kernel us\tworkers user us\tworkers kernel us"
for side in front workers; do
    header+="\t$side switches"
    for call in "${CALLS[@]}"; do header+="\t$side $call"; done
done
printf '%b\n' "$header" >"$rows"
bench_header "a request's CPU and system calls: headway serve -w $WORKERS -t $SLOTS (granian: --workers $WORKERS), $APP at $ENDPOINT, wrk -t1" \
    "-c$CONNECTIONS -d${DURATION}s (warm-up $WARMUP), $ROUNDS rounds; counts are perf stat's over the requests wrk counted"
for round in $(seq "$ROUNDS"); do
    # shellcheck disable=SC2086 # the names, one a word
    for name in $(bench_round_order "$round" $PATHS); do
        profile "$name" "$round"
    done
done
# One column a round, one line a figure: the rows are too wide for a terminal the other way.
awk -F'\t' '{for (i = 1; i <= NF; i++) cell[i, NR] = $i; if (NF > width) width = NF} END {
    for (i = 1; i <= width; i++) {line = cell[i, 1]; for (r = 2; r <= NR; r++) line = line "\t" cell[i, r]; print line}
}' "$rows" | column -t -s $'\t'
echo "raw outputs and server logs: $BENCH_OUT"
