#!/usr/bin/env bash
# Hello world throughput: the demo app's /hello with 2 worker processes under
# `wrk -t1 -c64 -d10s`, against headway and the servers people use today, in one run on the
# same machine: headway (Python worker), granian WSGI and ASGI, uvicorn (httptools, uvloop),
# gunicorn gthread, Puma clustered (Rack twin) and headway running Puma as its worker; and, when
# SERVERS names it, headway-asgi: the bundled worker running the ASGI twin (bench/asgi.sh).
#
# The whole sweep runs ROUNDS times, servers interleaved, and the table shows the median
# requests/s (and wrk's p50/p99 latency) over the rounds, with each server's ratio to
# granian WSGI. Every run waits for a quiet machine first, then a WARMUP run (discarded)
# lets every worker start its threads and connections. wrk runs pinned to CPU WRK_CPU
# (taskset) unless WRK_CPU is empty; the servers are not pinned (they have two processes to
# spread over two cores).
# With TLS=1 every server serves HTTPS (its own TLS flags, a throwaway self-signed P-256
# certificate made with openssl) and wrk speaks https: the cost of TLS on the same requests.
# Raw wrk outputs and server logs go to bench/out/hello-throughput/ (hello-throughput-tls/).
#
# Usage: bench/hello-throughput.sh
# Env:   ROUNDS=3  DURATION=10s  WARMUP=2s  CONNECTIONS=64  WRK_CPU=1  HEADWAY_THREADS=5
#        SERVERS="headway granian-wsgi granian-asgi uvicorn gunicorn puma headway-puma"
#        HEADWAY=path/to/headway  BENCH_VENV=bench/.venv (created with pip on first use)
#        BENCH_QUIET=25 BENCH_QUIET_WAIT=60: before each run, wait up to 60 s for the machine to
#        be under 25% busy (it is shared); each run's "other CPU" says how busy it was anyway
#        BENCH_AUTOGROUP=on|off: whether the server's session is one scheduling group (bench/lib.sh)
#        TLS=1: HTTPS on every server
set -euo pipefail

# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"

ROUNDS="${ROUNDS:-3}"
DURATION="${DURATION:-10s}"
WARMUP="${WARMUP:-2s}"
CONNECTIONS="${CONNECTIONS:-64}"
WRK_CPU="${WRK_CPU-1}"
HEADWAY_THREADS="${HEADWAY_THREADS:-5}"
TLS="${TLS:-0}"
SERVERS="${SERVERS:-headway granian-wsgi granian-asgi uvicorn gunicorn puma headway-puma}"
WORKERS=2
THREADS=5
ENDPOINT=/hello
RACK_APP="$BENCH_REPO/python/headway/twins/demo.ru"
ASGI_APP=headway.twins.demo_asgi:app

bench_need wrk puma curl bc python3 setsid /usr/bin/time
[[ -z "$WRK_CPU" ]] || bench_need taskset
bench_find_headway
bench_python_peers
BENCH_OUT="$BENCH_OUT/hello-throughput"
SCHEME=http
if [[ "$TLS" == 1 ]]; then
    BENCH_OUT="$BENCH_OUT-tls"
    SCHEME=https
fi
bench_init
if [[ "$TLS" == 1 ]]; then
    CERT="$BENCH_OUT/cert.pem" KEY="$BENCH_OUT/key.pem"
    bench_certificate "$CERT" "$KEY"
fi

# tls_flags NAME: the flags that make NAME serve HTTPS with $CERT and $KEY (none without TLS=1).
tls_flags() {
    [[ "$TLS" == 1 ]] || return 0
    case "$1" in
        headway*) tls=(--certfile "$CERT" --keyfile "$KEY") ;;
        granian-*) tls=(--ssl-certificate "$CERT" --ssl-keyfile "$KEY") ;;
        uvicorn) tls=(--ssl-certfile "$CERT" --ssl-keyfile "$KEY") ;;
        gunicorn) tls=(--certfile "$CERT" --keyfile "$KEY") ;;
        puma) tls=() ;; # in its bind URL
    esac
}

label() {
    case "$1" in
        headway) echo "headway -w 2 -t $HEADWAY_THREADS" ;;
        headway-asgi) echo "headway -w 2 -t $HEADWAY_THREADS (ASGI twin)" ;;
        granian-wsgi) echo "granian wsgi --workers 2" ;;
        granian-asgi) echo "granian asgi --workers 2" ;;
        uvicorn) echo "uvicorn --workers 2" ;;
        gunicorn) echo "gunicorn gthread -w 2 --threads 5" ;;
        puma) echo "puma -w 2 -t 5:5 (clustered)" ;;
        headway-puma) echo "headway -w 2 -t 5 --cmd puma" ;;
        *) bench_die "unknown server $1 (known: headway headway-asgi granian-wsgi granian-asgi uvicorn gunicorn puma headway-puma)" ;;
    esac
}

# start_server NAME PORT ROUND: starts NAME with 2 worker processes on 127.0.0.1:PORT.
start_server() {
    local name="$1" port="$2" log="r$3-$1" url="$SCHEME://127.0.0.1:$2$ENDPOINT" tls=()
    local puma_bind="tcp://127.0.0.1:$port"
    [[ "$TLS" != 1 ]] || puma_bind="ssl://127.0.0.1:$port?key=$KEY&cert=$CERT"
    tls_flags "$name"
    case "$name" in
        headway)
            bench_start "$log" "$url" "$HEADWAY" serve -w "$WORKERS" -t "$HEADWAY_THREADS" -b "127.0.0.1:$port" \
                "${tls[@]}" ;;
        headway-asgi)
            bench_start "$log" "$url" "$HEADWAY" serve -w "$WORKERS" -t "$HEADWAY_THREADS" -b "127.0.0.1:$port" \
                "${tls[@]}" "$ASGI_APP" ;;
        granian-wsgi)
            bench_start "$log" "$url" granian --interface wsgi --workers "$WORKERS" \
                --host 127.0.0.1 --port "$port" "${tls[@]}" headway.demo:app ;;
        granian-asgi)
            bench_start "$log" "$url" granian --interface asgi --workers "$WORKERS" \
                --host 127.0.0.1 --port "$port" "${tls[@]}" "$ASGI_APP" ;;
        uvicorn)
            bench_start "$log" "$url" uvicorn --workers "$WORKERS" --loop uvloop --http httptools \
                --no-access-log --host 127.0.0.1 --port "$port" "${tls[@]}" "$ASGI_APP" ;;
        gunicorn)
            bench_start "$log" "$url" gunicorn -w "$WORKERS" -k gthread --threads "$THREADS" \
                -b "127.0.0.1:$port" "${tls[@]}" headway.demo:app ;;
        puma) bench_start "$log" "$url" puma -w "$WORKERS" -t "$THREADS:$THREADS" -b "$puma_bind" "$RACK_APP" ;;
        headway-puma)
            bench_start "$log" "$url" "$HEADWAY" serve -w "$WORKERS" -t "$THREADS" -b "127.0.0.1:$port" \
                "${tls[@]}" --cmd "puma -t $THREADS:$THREADS -b unix://{socket} $RACK_APP" ;;
    esac
    bench_wait_workers "$url" "$WORKERS"
}

wrk_pin=()
[[ -z "$WRK_CPU" ]] || wrk_pin=(taskset -c "$WRK_CPU")

for name in $SERVERS; do label "$name" >/dev/null; done
results="$BENCH_OUT/results.tsv"
: >"$results"
{
    echo "# hello world$([[ "$TLS" != 1 ]] || echo " over HTTPS"): wrk -t1 -c$CONNECTIONS -d$DURATION --latency $ENDPOINT, $WORKERS worker processes, $ROUNDS rounds" \
        "(warm-up $WARMUP each), wrk pinned to CPU ${WRK_CPU:-none}"
    bench_versions
} | tee "$BENCH_OUT/header.txt"

for round in $(seq "$ROUNDS"); do
    for name in $SERVERS; do
        port="$(bench_free_port)"
        url="$SCHEME://127.0.0.1:$port$ENDPOINT"
        start_server "$name" "$port" "$round"
        bench_wait_quiet
        "${wrk_pin[@]}" wrk -t1 -c"$CONNECTIONS" -d"$WARMUP" "$url" >"$BENCH_OUT/r$round-$name-warmup.txt"
        raw="$BENCH_OUT/r$round-$name.txt"
        bench_measure "$raw" "${wrk_pin[@]}" wrk -t1 -c"$CONNECTIONS" -d"$DURATION" --latency "$url"
        bench_stop
        read -r rps p50 p99 errors requests < <(bench_wrk_figures "$raw")
        # The server's own CPU time per request (all its processes), in microseconds.
        cpu_us="$(awk -v t="$BENCH_SERVER_TICKS" -v n="$requests" 'BEGIN {printf "%.0f", n ? t * 10000 / n : 0}')"
        printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' \
            "$round" "$name" "$rps" "$p50" "$p99" "$errors" "$BENCH_OTHER_CPU" "$cpu_us" >>"$results"
        printf 'round %s  %-34s %8.0f req/s  p50 %7.2f ms  p99 %7.2f ms  errors %s  server CPU %s us/req  other CPU %s%%\n' \
            "$round" "$(label "$name")" "$rps" "$p50" "$p99" "$errors" "$cpu_us" "$BENCH_OTHER_CPU"
    done
done

column_median() { bench_column_median "$results" "$@"; }
column_all() { bench_column_all "$results" "$@"; }

reference="$(column_median granian-wsgi 3)"
echo
echo "medians of $ROUNDS rounds; 'vs granian' is the ratio to granian WSGI's median requests/s;"
echo "'CPU us/req' is the CPU time all the server's processes used per request; 'other CPU' is the share"
echo "of the machine's CPU used by neither the server nor wrk (other tenants, steal), per round"
echo "| server                             | req/s  | vs granian | p50 ms | p99 ms | errors | CPU us/req | req/s of each round | other CPU % |"
echo "|------------------------------------|-------:|-----------:|-------:|-------:|-------:|-----------:|---------------------|------------:|"
for name in $SERVERS; do
    rps="$(column_median "$name" 3)"
    ratio="-"
    [[ "$reference" == "-" ]] || ratio="$(printf '%.2fx' "$(echo "$rps / $reference" | bc -l)")"
    printf '| %-34s | %6.0f | %10s | %6.2f | %6.2f | %6s | %10s | %-19s | %11s |\n' "$(label "$name")" "$rps" "$ratio" \
        "$(column_median "$name" 4)" "$(column_median "$name" 5)" \
        "$(awk -F'\t' -v n="$name" '$2 == n {s += $6} END {print s + 0}' "$results")" "$(column_median "$name" 8)" \
        "$(column_all "$name" 3)" "$(column_all "$name" 7)"
done
echo "raw wrk outputs and server logs: $BENCH_OUT"
