#!/usr/bin/env bash
# headway load vs wrk -t1 vs hey, side by side in one run, against Debian's nginx serving a
# 5-byte static response ("hello") on 127.0.0.1 with one worker.
#
# nginx is pinned to CPU 0 and the load tool to CPU 1 (taskset), so "one core" per side.
# Each tool runs ROUNDS times, interleaved (wrk, hey, headway, wrk, ...), and the median
# requests/s is reported with its ratio to wrk's. Then the peak RSS (VmHWM, via /usr/bin/time -v)
# of `headway load -n MEMORY_REQUESTS -c 64`, and of hey for a bounded count. Raw outputs and
# nginx's configuration and logs go to bench/out/load-vs-wrk/; every round, the medians and the
# memory to bench/results/load-vs-wrk.json for docs/benchmarks.md.
#
# Usage: bench/load-vs-wrk.sh            (builds headway in release first)
# Env:   HEADWAY=path/to/headway (the standalone binary: a pip install's headway script would
#        count its Python in the memory)  DURATION=10s  CONNECTIONS=64  ROUNDS=3
#        MEMORY_REQUESTS=10000000  HEY_MEMORY_REQUESTS=1000000  SKIP_MEMORY=1 (rates only)
#        BENCH_QUIET=25 BENCH_QUIET_WAIT=60: before each round, wait up to 60 s for the machine
#        to be under 25% busy (it is shared)
set -euo pipefail

# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"

DURATION="${DURATION:-10s}"
CONNECTIONS="${CONNECTIONS:-64}"
ROUNDS="${ROUNDS:-3}"
MEMORY_REQUESTS="${MEMORY_REQUESTS:-10000000}"
HEY_MEMORY_REQUESTS="${HEY_MEMORY_REQUESTS:-1000000}"
SKIP_MEMORY="${SKIP_MEMORY:-}"
LOAD_CPU=1
SERVER_CPU=0

bench_need /usr/sbin/nginx wrk hey taskset curl bc /usr/bin/time
if [[ -z "${HEADWAY:-}" ]]; then
    (cd "$BENCH_REPO" && cargo build --release --bin headway >&2)
    HEADWAY="${CARGO_TARGET_DIR:-$BENCH_REPO/target}/release/headway"
fi
[[ -x "$HEADWAY" ]] || bench_die "$HEADWAY is not executable"
BENCH_OUT="$BENCH_OUT/load-vs-wrk"
bench_init

port="$(bench_free_port)"
mkdir -p "$BENCH_OUT/tmp"
cat >"$BENCH_OUT/nginx.conf" <<NGINX
worker_processes 1;
daemon off;
pid $BENCH_OUT/nginx.pid;
error_log $BENCH_OUT/error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    client_body_temp_path $BENCH_OUT/tmp;
    proxy_temp_path $BENCH_OUT/tmp;
    fastcgi_temp_path $BENCH_OUT/tmp;
    uwsgi_temp_path $BENCH_OUT/tmp;
    scgi_temp_path $BENCH_OUT/tmp;
    # Keep connections open for the whole run: every tool measures pure keep-alive.
    keepalive_requests 100000000;
    server {
        listen 127.0.0.1:$port;
        location / { return 200 "hello"; }
    }
}
NGINX
url="http://127.0.0.1:$port/"
bench_start nginx "$url" taskset -c "$SERVER_CPU" /usr/sbin/nginx -p "$BENCH_OUT" -c "$BENCH_OUT/nginx.conf" \
    -e "$BENCH_OUT/error.log"

# rate FILE: the requests/s a tool's output FILE reports (wrk, hey and headway load print it alike).
rate() {
    local rps
    rps="$(awk '/Requests\/sec:/ {print $2}' "$1")"
    [[ -n "$rps" ]] || bench_die "no Requests/sec in $1"
    echo "$rps"
}
# timed_run ROUND NAME COMMAND...: one timed run of a load tool against nginx, pinned to the load
# CPU, its output kept as rROUND-NAME.txt; prints its requests/s.
timed_run() {
    local output="$BENCH_OUT/r$1-$2.txt"
    shift 2
    taskset -c "$LOAD_CPU" "$@" "$url" >"$output"
    rate "$output"
}
# peak_memory NAME LABEL COMMAND...: runs COMMAND pinned to the load CPU under /usr/bin/time -v
# and reports as LABEL how many requests it got answered, in how long, and its peak RSS (VmHWM),
# a row of memory.tsv.
peak_memory() {
    local name="$1" label="$2" start elapsed answered rss
    shift 2
    start="$(date +%s.%N)"
    /usr/bin/time -v -o "$BENCH_OUT/$name-memory.time" taskset -c "$LOAD_CPU" "$@" >"$BENCH_OUT/$name-memory.txt"
    elapsed="$(echo "$(date +%s.%N) - $start" | bc -l)"
    answered="$(awk '/\[200\]/ {print $2}' "$BENCH_OUT/$name-memory.txt")"
    rss="$(awk '/Maximum resident set size/ {printf "%.1f", $NF / 1024}' "$BENCH_OUT/$name-memory.time")"
    printf '%s: %s x 200 in %.0f s, peak RSS %s MiB\n' "$label" "${answered:-0}" "$elapsed" "$rss"
    printf '%s\t%s\t%.0f\t%s\n' "$label" "${answered:-0}" "$elapsed" "$rss" >>"$memory"
    peak_rss[$name]="$rss"
}
declare -A peak_rss
# 1234567 as 1,234,567, for the summary.
thousands() { printf '%.0f' "$1" | sed ':a;s/\B[0-9]\{3\}\>/,&/;ta'; }

echo "# machine"
lscpu | head -n 15 | sed 's/^/#   /'
bench_headway_line
echo "# nginx $(bench_version nginx), wrk $(bench_version wrk), hey $(bench_version hey)"
echo "# nginx on CPU $SERVER_CPU, load tool on CPU $LOAD_CPU, -c $CONNECTIONS, $DURATION per run, $ROUNDS rounds interleaved"
echo

rounds="$BENCH_OUT/rounds.tsv"
medians="$BENCH_OUT/medians.tsv"
memory="$BENCH_OUT/memory.tsv"
printf 'round\twrk -t1 req/s\they req/s\theadway load req/s\they / wrk\theadway / wrk\n' >"$rounds"
for round in $(seq "$ROUNDS"); do
    bench_wait_quiet
    wrk_rps="$(timed_run "$round" wrk wrk -t1 -c"$CONNECTIONS" -d"$DURATION")"
    hey_rps="$(timed_run "$round" hey hey -c "$CONNECTIONS" -z "$DURATION")"
    headway_rps="$(timed_run "$round" headway "$HEADWAY" load --threads 1 -c "$CONNECTIONS" -z "$DURATION")"
    printf '%s\t%.0f\t%.0f\t%.0f\t%.2f\t%.2f\n' "$round" "$wrk_rps" "$hey_rps" "$headway_rps" \
        "$(echo "$hey_rps / $wrk_rps" | bc -l)" "$(echo "$headway_rps / $wrk_rps" | bc -l)" >>"$rounds"
    printf 'round %d  wrk %9.0f  hey %9.0f  headway %9.0f  req/s\n' "$round" "$wrk_rps" "$hey_rps" "$headway_rps"
done
echo

# column_median COLUMN: the median over the rounds of a column of rounds.tsv.
column_median() { awk -F'\t' -v c="$1" 'NR > 1 {print $c}' "$rounds" | bench_median; }
# Two views of the same runs: the ratio of the medians, and the median of each round's ratio
# (the second cancels slow drifts of a shared machine, since a round's runs are back to back).
printf "tool\tmedian req/s\tratio of medians\tmedian of the rounds' ratios\n" >"$medians"
printf '%-10s %14s %16s %20s\n' "tool" "median req/s" "ratio of medians" "median round ratio"
declare -A median ratio tool_name=([wrk]="wrk -t1" [hey]=hey [headway]="headway load")
median[wrk]="$(column_median 2)" ratio[wrk]=1
median[hey]="$(column_median 3)" ratio[hey]="$(column_median 5)"
median[headway]="$(column_median 4)" ratio[headway]="$(column_median 6)"
wrk_median="${median[wrk]}"
for tool in wrk hey headway; do
    of_medians="$(printf '%.2f' "$(echo "${median[$tool]} / $wrk_median" | bc -l)")"
    printf '%-10s %14.0f %15.2fx %19.2fx\n' "$tool" "${median[$tool]}" "$of_medians" "${ratio[$tool]}"
    printf '%s\t%.0f\t%s\t%.2f\n' "${tool_name[$tool]}" \
        "${median[$tool]}" "$of_medians" "${ratio[$tool]}" >>"$medians"
done
echo

result_tables=(--table "Requests per second, every round (the three tools back to back)" "$rounds"
    --table "Medians of $ROUNDS rounds" "$medians")
summary="On one core against nginx, headway load made $(thousands "${median[headway]}") requests/s to wrk -t1's $(thousands "$wrk_median") (median of the rounds' ratios ${ratio[headway]}x) and hey $(thousands "${median[hey]}") (${ratio[hey]}x), medians of $ROUNDS rounds of $DURATION."
memory_notes=()
if [[ "$SKIP_MEMORY" != 1 ]]; then
    printf 'command\tanswered 200\twall time s\tpeak RSS MiB\n' >"$memory"
    echo "# peak memory (VmHWM) for a fixed number of requests, -c $CONNECTIONS"
    peak_memory headway "headway load --threads 1 -c $CONNECTIONS -n $MEMORY_REQUESTS" \
        "$HEADWAY" load --threads 1 -c "$CONNECTIONS" -n "$MEMORY_REQUESTS" "$url"
    peak_memory hey "hey -c $CONNECTIONS -n $HEY_MEMORY_REQUESTS" hey -c "$CONNECTIONS" -n "$HEY_MEMORY_REQUESTS" "$url"
    result_tables+=(--table "Peak memory for a fixed number of requests, -c $CONNECTIONS" "$memory")
    summary+=" Its peak RSS for $(thousands "$MEMORY_REQUESTS") requests was ${peak_rss[headway]} MiB, hey's ${peak_rss[hey]} MiB for $(thousands "$HEY_MEMORY_REQUESTS")."
    memory_notes+=(--note "Peak RSS is the maximum resident set size /usr/bin/time -v reports (VmHWM). hey keeps every latency it measures, so it is given $(thousands "$HEY_MEMORY_REQUESTS") requests to headway load's $(thousands "$MEMORY_REQUESTS").")
fi

bench_result load-vs-wrk "headway wrk hey nginx" \
    --title "The load generator against wrk" --order 80 \
    --command "$(bench_command DURATION=10s CONNECTIONS=64 ROUNDS=3 MEMORY_REQUESTS=10000000 HEY_MEMORY_REQUESTS=1000000 SKIP_MEMORY=)" \
    --summary "$summary" "${result_tables[@]}" \
    --note "nginx with one worker answers \`return 200 \"hello\"\` on 127.0.0.1 with \`keepalive_requests 100000000\`, so every tool measures pure keep-alive; nginx is pinned to CPU $SERVER_CPU and each tool to CPU $LOAD_CPU. Each round runs \`wrk -t1 -c$CONNECTIONS -d$DURATION\`, \`hey -c $CONNECTIONS -z $DURATION\` and \`headway load --threads 1 -c $CONNECTIONS -z $DURATION\` back to back, so the median of the rounds' ratios cancels a shared machine's slow drifts." \
    "${memory_notes[@]}"
