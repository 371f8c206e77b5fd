#!/usr/bin/env bash
# headway load vs wrk -t1 vs hey, side by side in one run, against Debian's nginx serving a
# 5-byte static response ("hello") on 127.0.0.1 with one worker.
#
# nginx is pinned to CPU 0 and the load tool to CPU 1 (taskset), so "one core" per side.
# Each tool runs ROUNDS times, interleaved (wrk, hey, headway, wrk, ...), and the median
# requests/s is reported with its ratio to wrk's. Then the peak RSS (VmHWM, via /usr/bin/time -v)
# of `headway load -n MEMORY_REQUESTS -c 64`, and of hey for a bounded count.
#
# Usage: bench/load-vs-wrk.sh            (builds headway in release first)
# Env:   HEADWAY=path/to/headway  DURATION=10s  CONNECTIONS=64  ROUNDS=3
#        MEMORY_REQUESTS=10000000  HEY_MEMORY_REQUESTS=1000000  SKIP_MEMORY=1 (rates only)
set -euo pipefail

here="$(cd "$(dirname "$0")/.." && pwd)"
DURATION="${DURATION:-10s}"
CONNECTIONS="${CONNECTIONS:-64}"
ROUNDS="${ROUNDS:-3}"
MEMORY_REQUESTS="${MEMORY_REQUESTS:-10000000}"
HEY_MEMORY_REQUESTS="${HEY_MEMORY_REQUESTS:-1000000}"
LOAD_CPU=1
SERVER_CPU=0

for tool in /usr/sbin/nginx wrk hey taskset /usr/bin/time; do
    command -v "$tool" >/dev/null || { echo "load-vs-wrk: $tool is missing" >&2; exit 1; }
done

if [[ -z "${HEADWAY:-}" ]]; then
    target_dir="${CARGO_TARGET_DIR:-$here/target}"
    (cd "$here" && cargo build --release --bin headway >&2)
    HEADWAY="$target_dir/release/headway"
fi
[[ -x "$HEADWAY" ]] || { echo "load-vs-wrk: $HEADWAY is not executable" >&2; exit 1; }

work="$(mktemp -d)"
nginx_pid=""
cleanup() {
    if [[ -n "$nginx_pid" ]]; then kill "$nginx_pid" 2>/dev/null || true; wait "$nginx_pid" 2>/dev/null || true; fi
    rm -rf "$work"
}
trap cleanup EXIT

port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
mkdir -p "$work/tmp"
cat >"$work/nginx.conf" <<EOF
worker_processes 1;
daemon off;
pid $work/nginx.pid;
error_log $work/error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    client_body_temp_path $work/tmp;
    proxy_temp_path $work/tmp;
    fastcgi_temp_path $work/tmp;
    uwsgi_temp_path $work/tmp;
    scgi_temp_path $work/tmp;
    # Keep connections open for the whole run: every tool measures pure keep-alive.
    keepalive_requests 100000000;
    server {
        listen 127.0.0.1:$port;
        location / { return 200 "hello"; }
    }
}
EOF
taskset -c "$SERVER_CPU" /usr/sbin/nginx -p "$work" -c "$work/nginx.conf" -e "$work/error.log" &
nginx_pid=$!
url="http://127.0.0.1:$port/"
for _ in $(seq 50); do
    curl -fs "$url" >/dev/null 2>&1 && break
    sleep 0.1
done
curl -fs "$url" >/dev/null || { echo "load-vs-wrk: nginx did not start" >&2; cat "$work/error.log" >&2; exit 1; }

run_wrk() { taskset -c "$LOAD_CPU" wrk -t1 -c"$CONNECTIONS" -d"$DURATION" "$url" | awk '/^Requests\/sec:/ {print $2}'; }
run_hey() { taskset -c "$LOAD_CPU" hey -c "$CONNECTIONS" -z "$DURATION" "$url" | awk '/Requests\/sec:/ {print $2}'; }
run_headway() {
    taskset -c "$LOAD_CPU" "$HEADWAY" load --threads 1 -c "$CONNECTIONS" -z "$DURATION" "$url" \
        | awk '/Requests\/sec:/ {print $2}'
}
median() { sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }

echo "# machine"
lscpu | head -n 15 | sed 's/^/#   /'
echo "# nginx $(/usr/sbin/nginx -v 2>&1 | sed 's/.*\///'), wrk $(dpkg-query -W -f='${Version}' wrk 2>/dev/null || echo '?'), hey $(dpkg-query -W -f='${Version}' hey 2>/dev/null || echo '?')"
echo "# nginx on CPU $SERVER_CPU, load tool on CPU $LOAD_CPU, -c $CONNECTIONS, $DURATION per run, $ROUNDS rounds interleaved"
echo

: >"$work/wrk" ; : >"$work/hey" ; : >"$work/headway" ; : >"$work/hey-ratio" ; : >"$work/headway-ratio"
for round in $(seq "$ROUNDS"); do
    wrk_rps="$(run_wrk)"; hey_rps="$(run_hey)"; headway_rps="$(run_headway)"
    echo "$wrk_rps" >>"$work/wrk"; echo "$hey_rps" >>"$work/hey"; echo "$headway_rps" >>"$work/headway"
    echo "$hey_rps / $wrk_rps" | bc -l >>"$work/hey-ratio"
    echo "$headway_rps / $wrk_rps" | bc -l >>"$work/headway-ratio"
    printf 'round %d  wrk %9.0f  hey %9.0f  headway %9.0f  req/s\n' "$round" "$wrk_rps" "$hey_rps" "$headway_rps"
done
echo
# Two views of the same runs: the ratio of the medians, and the median of each round's ratio
# (the second cancels slow drifts of a shared machine, since a round's runs are back to back).
printf '%-10s %14s %16s %20s\n' "tool" "median req/s" "ratio of medians" "median round ratio"
wrk_median="$(median <"$work/wrk")"
for tool in wrk hey headway; do
    m="$(median <"$work/$tool")"
    if [[ "$tool" == wrk ]]; then r=1; else r="$(median <"$work/$tool-ratio")"; fi
    printf '%-10s %14.0f %15.2fx %19.2fx\n' "$tool" "$m" "$(echo "$m / $wrk_median" | bc -l)" "$r"
done
echo

[[ "${SKIP_MEMORY:-}" == 1 ]] && exit 0
peak_rss_mb() { awk '/Maximum resident set size/ {printf "%.1f", $NF/1024}' "$1"; }
echo "# peak memory (VmHWM) for a fixed number of requests, -c $CONNECTIONS"
start=$(date +%s.%N)
/usr/bin/time -v -o "$work/time-headway" taskset -c "$LOAD_CPU" "$HEADWAY" load --threads 1 -c "$CONNECTIONS" \
    -n "$MEMORY_REQUESTS" "$url" >"$work/headway-memory.txt"
elapsed=$(echo "$(date +%s.%N) - $start" | bc -l)
answered="$(awk '/\[200\]/ {print $2}' "$work/headway-memory.txt")"
printf 'headway load -n %s: %s x 200 in %.0f s, peak RSS %s MiB\n' \
    "$MEMORY_REQUESTS" "$answered" "$elapsed" "$(peak_rss_mb "$work/time-headway")"
start=$(date +%s.%N)
/usr/bin/time -v -o "$work/time-hey" taskset -c "$LOAD_CPU" hey -c "$CONNECTIONS" -n "$HEY_MEMORY_REQUESTS" "$url" \
    >"$work/hey-memory.txt"
elapsed=$(echo "$(date +%s.%N) - $start" | bc -l)
answered="$(awk '/\[200\]/ {print $2}' "$work/hey-memory.txt")"
printf 'hey -n %s: %s x 200 in %.0f s, peak RSS %s MiB\n' \
    "$HEY_MEMORY_REQUESTS" "$answered" "$elapsed" "$(peak_rss_mb "$work/time-hey")"
