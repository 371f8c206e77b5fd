#!/usr/bin/env bash
# The front's own ceiling: requests/s headway serves when its workers cost nothing, for each
# number of front threads in THREADS. The workers are crates/hop/examples/stub_worker.rs, which
# answers every request on the hop at once (`Hello, world!`), started by the front in place of
# the Python worker; so whatever limits the rate is the front (and wrk, which runs beside it, as
# a user's would: nothing pinned). Each number of threads runs ROUNDS times, interleaved; the
# table shows the median round, every round, and the front's CPU a request; it is written as
# bench/results/front-ceiling.json for docs/benchmarks.md (RESULTS=0: a trial, no file).
#
# With FLOOR=1 (the default) the rounds also run crates/server/examples/floor_server.rs, the
# least a keep-alive server on tokio's one-thread runtime spends on a request (a read, a fixed
# answer, a write: no parse, queue or worker), under the same wrk: the kernel's share of a
# request and the runtime's, on this machine, for the front's CPU a request to be read against.
#
# With INSTRUCTIONS=1, also the user-space instructions a request of the front for each number of
# threads, and of the floor (callgrind, `headway load -c 32`, FIRST and SECOND requests: their
# difference over the difference in requests, so start-up cancels out): a figure that repeats on
# a busy machine where requests/s do not. Needs valgrind.
#
# Usage: bench/front-ceiling.sh
# Env:   THREADS="1 2 4"  FLOOR=1  ROUNDS=5  DURATION=5s  WARMUP=2s  CONNECTIONS=64  WORKERS=2  SLOTS=5
#        INSTRUCTIONS=0 FIRST=2000 SECOND=10000  HEADWAY=path/to/headway (a cargo build's, so
#        that the stub is built beside it)  RESULTS=1
set -euo pipefail

# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"

THREADS="${THREADS:-1 2 4}"
FLOOR="${FLOOR:-1}"
ROUNDS="${ROUNDS:-5}"
DURATION="${DURATION:-5s}"
WARMUP="${WARMUP:-2s}"
CONNECTIONS="${CONNECTIONS:-64}"
WORKERS="${WORKERS:-2}"
SLOTS="${SLOTS:-5}"
INSTRUCTIONS="${INSTRUCTIONS:-0}"
FIRST="${FIRST:-2000}"
SECOND="${SECOND:-10000}"
RESULTS="${RESULTS:-1}"

bench_need wrk curl cargo
[[ "$INSTRUCTIONS" != 1 ]] || bench_need valgrind
bench_find_headway
BENCH_OUT="$BENCH_OUT/front-ceiling"
bench_init
bench_stub_worker
configs="$THREADS"
if [[ "$FLOOR" == 1 ]]; then
    FLOOR_SERVER="$(bench_example headway-server floor_server)"
    configs="floor $configs"
fi
results="$BENCH_OUT/results.tsv"
: >"$results"

# start THREADS PORT LOG [WRAPPER...]: headway with the stub as its workers (THREADS "floor": the
# floor server instead).
start() {
    local threads="$1" port="$2" log="$3"
    shift 3
    if [[ "$threads" == floor ]]; then
        bench_start "$log" "http://127.0.0.1:$port/hello" "$@" "$FLOOR_SERVER" "127.0.0.1:$port"
        return
    fi
    HEADWAY_PYTHON="$STUB" bench_start "$log" "http://127.0.0.1:$port/hello" "$@" "$HEADWAY" serve -w "$WORKERS" \
        -t "$SLOTS" --front-threads "$threads" -b "127.0.0.1:$port" --log-level warn
}

bench_header "the front's ceiling: stub workers ($WORKERS x $SLOTS slots) answering at once; wrk -t1" \
    "-c$CONNECTIONS -d$DURATION (warm-up $WARMUP), $ROUNDS rounds, front threads: $THREADS; nothing pinned"

for round in $(seq "$ROUNDS"); do
    # shellcheck disable=SC2086 # the names, one a word
    for threads in $(bench_round_order "$round" $configs); do
        port="$(bench_free_port)"
        start "$threads" "$port" "r$round-t$threads"
        url="http://127.0.0.1:$port/hello"
        wrk -t1 -c"$CONNECTIONS" -d"$WARMUP" "$url" >/dev/null
        raw="$BENCH_OUT/r$round-t$threads.txt"
        front="$(bench_front_ticks)"
        bench_measure "$raw" wrk -t1 -c"$CONNECTIONS" -d"$DURATION" "$url"
        front=$(($(bench_front_ticks) - front))
        bench_stop
        rps="$(awk '/^Requests\/sec:/ {print $2}' "$raw")"
        requests="$(awk '/ requests in / {print $1}' "$raw")"
        front_us="$(awk -v t="$front" -v n="$requests" 'BEGIN {printf "%.1f", n ? t * 10000 / n : 0}')"
        printf '%s\t%s\t%s\t%s\t%s\n' "$round" "$threads" "$rps" "$front_us" "$BENCH_OTHER_CPU" >>"$results"
        printf 'round %s  %-5s  %8.0f req/s  front CPU %s us/req  other CPU %s%%\n' \
            "$round" "$threads" "$rps" "$front_us" "$BENCH_OTHER_CPU"
    done
done

medians="$BENCH_OUT/medians.tsv"
printf 'front threads\treq/s\treq/s a thread\tfront CPU us/req\treq/s, each round\tother CPU %%, each round\n' >"$medians"
for threads in $configs; do
    rps="$(bench_column_median "$results" "$threads" 3)"
    label="$threads" per_thread="$rps"
    if [[ "$threads" == floor ]]; then
        label="floor (1 thread)"
    else
        per_thread="$(echo "$rps / $threads" | bc -l)"
    fi
    printf '%s\t%.0f\t%.0f\t%s\t%s\t%s\n' "$label" "$rps" "$per_thread" \
        "$(bench_column_median "$results" "$threads" 4)" "$(bench_column_all "$results" "$threads" 3)" \
        "$(bench_column_all "$results" "$threads" 5)" >>"$medians"
done
echo
echo "medians of $ROUNDS rounds; 'front CPU us/req' is the CPU time of the headway process (the front) per request"
column -t -s $'\t' "$medians"
if [[ "$RESULTS" != 0 ]]; then
    bench_result front-ceiling "wrk" \
        --title "The front alone: stub workers that answer at once" --order 45 \
        --command "$(bench_command "THREADS=1 2 4" ROUNDS=5)" \
        --summary "headway's front with $WORKERS stub workers x $SLOTS slots (crates/hop/examples/stub_worker.rs answers every request on the hop at once), wrk -t1 -c$CONNECTIONS -d$DURATION beside it, $ROUNDS interleaved rounds, nothing pinned: what the front costs a request and the most it serves on this machine, for each number of front threads; and, in the same rounds, the floor: crates/server/examples/floor_server.rs, a keep-alive server on tokio's one-thread runtime that answers each request head with a fixed response in one read and one write (no parse, queue or worker), the kernel's share of a request and the runtime's on this machine." \
        --table "Medians of $ROUNDS rounds" "$medians" \
        --note "front CPU us/req: the CPU time of the headway process (the front, all its threads) over the requests wrk counted; the stub workers' CPU is not in it (the floor's: its one process). On 2 CPUs shared with wrk, more front threads than CPUs show what the front's scheduling costs, not more capacity."
fi

if [[ "$INSTRUCTIONS" == 1 ]]; then
    # instructions THREADS N: the instructions callgrind counted in the front over N requests.
    instructions() {
        local threads="$1" requests="$2" port out="$BENCH_OUT/front.callgrind"
        port="$(bench_free_port)"
        rm -f "$out"
        start "$threads" "$port" "callgrind-t$threads" valgrind --tool=callgrind --callgrind-out-file="$out"
        "$HEADWAY" load -n "$requests" -c 32 "http://127.0.0.1:$port/hello" >"$BENCH_OUT/callgrind-load.txt" ||
            bench_die "the load run failed: $BENCH_OUT/callgrind-load.txt"
        bench_stop
        awk '/^(summary|totals):/ {print $2; exit}' "$out"
    }
    echo
    echo "the front's user-space instructions a request (callgrind, $FIRST and $SECOND requests, headway load -c 32)"
    for threads in $configs; do
        first="$(instructions "$threads" "$FIRST")"
        second="$(instructions "$threads" "$SECOND")"
        echo "$threads: $(((second - first) / (SECOND - FIRST))) instructions a request"
    done
fi
echo "raw outputs and server logs: $BENCH_OUT"
