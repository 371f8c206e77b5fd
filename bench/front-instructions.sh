#!/usr/bin/env bash
# The front's user-space instructions a request, counted by callgrind: a figure that repeats to
# within a fraction of a per cent on a busy machine, where timings do not. Two paths:
#
# - stub: a GET through the queue and a slot to crates/hop/examples/stub_worker.rs, which answers
#   every request on the hop at once, so every instruction counted is the front's;
# - static: a keep-alive GET of a 1 KiB file served by the front itself (--static), the shared
#   connection cost without the queue;
# - tls: the stub's GET over HTTPS (HTTP/1.1 keep-alive, a P-256 certificate made for the run),
#   which beside the stub's count is what rustls costs a request;
# - h2: the stub's GET over HTTP/2 with prior knowledge (h2c), STREAMS requests at once on each
#   connection;
# - post: the stub's POST with a 1 KiB body, the body carried to the worker through the ring.
#
# The front (not its workers) runs under `valgrind --tool=callgrind --instr-atstart=no`; WARMUP
# requests of `headway load` first, then counting on (`callgrind_control -i on`) for REQUESTS
# requests, off, and a dump: the dump's total over REQUESTS. How the runtime batches wake-ups
# moves a run's count by up to a tenth, so each path runs ROUNDS times and the median is shown
# with every round; beside it, the share of the connections' tasks (`Connection::serve`, with all
# it calls: parsing, the queue's door, the response's write), which moves far less. The dumps stay in $BENCH_OUT for `callgrind_annotate --inclusive=no` (or
# yes) to show where they went. Nothing here is timed.
#
# Usage: bench/front-instructions.sh
# Env:   PATHS="stub static" (or tls, h2 and post too)  STREAMS=4  ROUNDS=5  WARMUP=500  REQUESTS=5000  CONNECTIONS=16  WORKERS=2  SLOTS=5
#        HEADWAY=path/to/headway (a cargo --release build's, so that the stub is built beside it)
set -euo pipefail

# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"

PATHS="${PATHS:-stub static}"
ROUNDS="${ROUNDS:-5}"
WARMUP="${WARMUP:-500}"
REQUESTS="${REQUESTS:-5000}"
CONNECTIONS="${CONNECTIONS:-16}"
WORKERS="${WORKERS:-2}"
SLOTS="${SLOTS:-5}"
# A bound on every load run: under callgrind the front serves some thousands of requests a second.
LOAD_SECS="${LOAD_SECS:-120}"
STREAMS="${STREAMS:-4}"

bench_need valgrind callgrind_control cargo timeout
HEADWAY="${HEADWAY:-${CARGO_TARGET_DIR:-$BENCH_REPO/target}/release/headway}"
[[ -x "$HEADWAY" ]] || bench_die "no headway binary at $HEADWAY: build it (cargo build --release -p headway) or set HEADWAY"
BENCH_OUT="$BENCH_OUT/front-instructions"
bench_init
bench_stub_worker
STATIC_DIR="$BENCH_OUT/static"
mkdir -p "$STATIC_DIR"
head -c 1024 /dev/zero | tr '\0' 'a' >"$STATIC_DIR/1k.txt"

if [[ " $PATHS " == *" tls "* ]]; then
    bench_certificate "$BENCH_OUT/cert.pem" "$BENCH_OUT/key.pem"
fi

# load URL N [FLAG...]: N requests of `headway load` (with FLAGs) on CONNECTIONS keep-alive
# connections, bounded; -k takes the tls path's certificate.
load() {
    timeout "$LOAD_SECS" "$HEADWAY" load -k -n "$2" -c "$CONNECTIONS" "${@:3}" "$1" >>"$BENCH_OUT/load.txt" ||
        bench_die "the load run on $1 failed or took over $LOAD_SECS s: $BENCH_OUT/load.txt"
}

# count PATH ROUND: the front's instructions a request on PATH (one of PATHS), all of them and
# the connections' tasks' share, tab-separated.
count() {
    local name="$1" port url out="$BENCH_OUT/$1-$2.callgrind" tls=() flags=()
    port="$(bench_free_port)"
    case "$name" in
        stub) url="http://127.0.0.1:$port/hello" ;;
        static) url="http://127.0.0.1:$port/s/1k.txt" ;;
        tls)
            url="https://127.0.0.1:$port/hello"
            tls=(--certfile "$BENCH_OUT/cert.pem" --keyfile "$BENCH_OUT/key.pem")
            ;;
        h2)
            url="http://127.0.0.1:$port/hello"
            flags=(--http2 --streams "$STREAMS")
            ;;
        post)
            url="http://127.0.0.1:$port/hello"
            flags=(-m POST -D "$STATIC_DIR/1k.txt" -T application/json)
            ;;
        *) bench_die "PATHS names stub, static, tls, h2 or post, not $name" ;;
    esac
    rm -f "$out" "$out".*
    HEADWAY_PYTHON="$STUB" bench_start "$name-$2" "$url" valgrind --tool=callgrind --instr-atstart=no \
        --callgrind-out-file="$out" "$HEADWAY" serve -w "$WORKERS" -t "$SLOTS" --front-threads 1 \
        --static "/s=$STATIC_DIR" -b "127.0.0.1:$port" --log-level warn "${tls[@]}"
    load "$url" "$WARMUP" "${flags[@]}"
    timeout 30 callgrind_control -i on "$bench_server_pid" >/dev/null 2>&1
    load "$url" "$REQUESTS" "${flags[@]}"
    timeout 30 callgrind_control -i off "$bench_server_pid" >/dev/null 2>&1
    timeout 30 callgrind_control -d "$bench_server_pid" >/dev/null 2>&1
    bench_stop
    local dump
    dump="$out.1"
    [[ -s "$dump" ]] || bench_die "callgrind wrote no dump for $name"
    local total connection
    total="$(awk '/^totals:/ {print $2; exit}' "$dump")"
    # A TLS connection's task is inlined into the one that makes the handshake: its share is
    # that task's, handshake included. An HTTP/2 connection's is the TCP connection's task, its
    # streams' tasks (the requests' parts) not included.
    local task='conn::Connection<S>>::serve::\{\{closure\}\}( |$)'
    [[ "$name" == tls ]] && task='state::Front>::serve_tls::\{\{closure\}\}( |$)'
    [[ "$name" == h2 ]] && task='state::Front>::serve_tcp::\{\{closure\}\}( |$)'
    # The first (largest) entry of the task's own function: callgrind_annotate ends a line with
    # ` [binary]` only for some entries, so the name may end the line.
    connection="$(callgrind_annotate --inclusive=yes "$dump" |
        awk -v task="$task" '$0 ~ task && !found {gsub(",", "", $1); print $1; found = 1}')"
    awk -v n="$REQUESTS" -v t="$total" -v c="${connection:-0}" 'BEGIN {printf "%.0f\t%.0f\n", t / n, c / n}'
}

echo "the front's user-space instructions a request (callgrind; $WORKERS stub workers x $SLOTS slots," \
    "1 front thread; headway load -c $CONNECTIONS, $WARMUP requests of warm-up, $REQUESTS counted)"
printf '%-7s %8s %11s  %s\n' path front connection "rounds (front/connection)"
for name in $PATHS; do
    rounds="$BENCH_OUT/$name.tsv"
    : >"$rounds"
    for round in $(seq "$ROUNDS"); do
        count "$name" "$round" >>"$rounds"
    done
    printf '%-7s %8s %11s  %s\n' "$name" "$(cut -f1 "$rounds" | bench_median)" "$(cut -f2 "$rounds" | bench_median)" \
        "$(tr '\t\n' '/ ' <"$rounds")"
done
echo "profiles: $BENCH_OUT/PATH-N.callgrind.1 (callgrind_annotate --inclusive=no FILE)"
