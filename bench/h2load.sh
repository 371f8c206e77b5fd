#!/usr/bin/env bash
# HTTP/2 hello world: the demo app's /hello with 2 worker processes under
# `h2load -c 4 -m 16` (4 connections, each with 16 streams in flight) over TLS with ALPN h2,
# against headway and granian `--http 2`, in one run on the same machine.
#
# The sweep runs ROUNDS times, servers interleaved, and the table shows the median requests/s
# (and h2load's mean time per request) over the rounds, with headway's ratio to granian; every
# round is shown as well. Each run waits for a quiet machine first, then a WARMUP run
# (discarded) lets every worker start. Nothing is pinned, as a user would run it; H2LOAD_CPU=N
# pins h2load to CPU N (taskset). Certificates: a throwaway self-signed P-256 one made with
# openssl. Raw h2load outputs and server logs go to bench/out/h2load/; the result, to
# bench/results/h2load.json.
#
# Usage: bench/h2load.sh
# Env:   ROUNDS=5  DURATION=10  WARMUP=2 (seconds)  CONNECTIONS=4  STREAMS=16  H2LOAD_CPU=
#        HEADWAY_THREADS=5  SERVERS="headway granian"  HEADWAY=path/to/headway
#        BENCH_VENV=bench/.venv (created with pip on first use)
#        BENCH_QUIET=25 BENCH_QUIET_WAIT=60: before each run, wait up to 60 s for the machine to
#        be under 25% busy (it is shared); each run's "other CPU" says how busy it was anyway
set -euo pipefail

# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"

ROUNDS="${ROUNDS:-5}"
DURATION="${DURATION:-10}"
WARMUP="${WARMUP:-2}"
CONNECTIONS="${CONNECTIONS:-4}"
STREAMS="${STREAMS:-16}"
H2LOAD_CPU="${H2LOAD_CPU:-}"
HEADWAY_THREADS="${HEADWAY_THREADS:-5}"
SERVERS="${SERVERS:-headway granian}"
WORKERS=2
ENDPOINT=/hello

bench_need h2load curl openssl bc python3 setsid /usr/bin/time
[[ -z "$H2LOAD_CPU" ]] || bench_need taskset
bench_find_headway
bench_python_peers
BENCH_OUT="$BENCH_OUT/h2load"
bench_init
CERT="$BENCH_OUT/cert.pem" KEY="$BENCH_OUT/key.pem"
bench_certificate "$CERT" "$KEY"
BENCH_CURL=(curl -k --http2)

label() {
    case "$1" in
        headway) echo "headway -w 2 -t $HEADWAY_THREADS" ;;
        granian) echo "granian wsgi --http 2 --workers 2" ;;
        *) bench_die "unknown server $1 (known: headway granian)" ;;
    esac
}

# start_server NAME PORT ROUND: starts NAME with 2 worker processes on 127.0.0.1:PORT, HTTPS.
start_server() {
    local name="$1" port="$2" log="r$3-$1" url="https://127.0.0.1:$2$ENDPOINT"
    case "$name" in
        headway)
            bench_start "$log" "$url" "$HEADWAY" serve -w "$WORKERS" -t "$HEADWAY_THREADS" -b "127.0.0.1:$port" \
                --certfile "$CERT" --keyfile "$KEY" ;;
        granian)
            bench_start "$log" "$url" granian --interface wsgi --http 2 --workers "$WORKERS" \
                --host 127.0.0.1 --port "$port" --ssl-certificate "$CERT" --ssl-keyfile "$KEY" headway.demo:app ;;
    esac
    bench_wait_workers "$url" "$WORKERS"
}

h2load_pin=()
[[ -z "$H2LOAD_CPU" ]] || h2load_pin=(taskset -c "$H2LOAD_CPU")

# h2load_figures FILE: "rps mean_ms failed requests" from one h2load output (failed: requests
# that failed, errored or timed out, or got a 4xx or 5xx).
h2load_figures() {
    awk "$BENCH_AWK_MS"'
        BEGIN {rps = mean = "nan"}
        /^finished in/ {rps = $4 + 0}
        /^requests:/ {requests = $8; failed = $10 + $12 + $14}
        /^status codes:/ {failed += $7 + $9}
        /^time for request:/ {mean = ms($6)}
        END {printf "%s %s %d %d\n", rps, mean, failed, requests}
    ' "$1"
}

for name in $SERVERS; do label "$name" >/dev/null; done
results="$BENCH_OUT/results.tsv"
: >"$results"
{
    echo "# HTTP/2 hello world over TLS: h2load -c $CONNECTIONS -m $STREAMS -D $DURATION $ENDPOINT, $WORKERS worker" \
        "processes, $ROUNDS rounds (warm-up ${WARMUP}s each), h2load pinned to CPU ${H2LOAD_CPU:-none}"
    echo "# $(h2load --version 2>&1 | head -1)"
    bench_versions
} | tee "$BENCH_OUT/header.txt"

for round in $(seq "$ROUNDS"); do
    for name in $SERVERS; do
        port="$(bench_free_port)"
        url="https://127.0.0.1:$port$ENDPOINT"
        start_server "$name" "$port" "$round"
        bench_wait_quiet
        "${h2load_pin[@]}" h2load -c "$CONNECTIONS" -m "$STREAMS" -D "$WARMUP" "$url" >"$BENCH_OUT/r$round-$name-warmup.txt"
        raw="$BENCH_OUT/r$round-$name.txt"
        bench_measure "$raw" "${h2load_pin[@]}" h2load -c "$CONNECTIONS" -m "$STREAMS" -D "$DURATION" "$url"
        bench_stop
        grep -qi "^application protocol: h2$" "$raw" || bench_die "$name did not speak h2 (see $raw)"
        read -r rps mean failed requests < <(h2load_figures "$raw")
        cpu_us="$(awk -v t="$BENCH_SERVER_TICKS" -v n="$requests" 'BEGIN {printf "%.0f", n ? t * 10000 / n : 0}')"
        printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$round" "$name" "$rps" "$mean" "$failed" "$BENCH_OTHER_CPU" "$cpu_us" >>"$results"
        printf 'round %s  %-34s %8.0f req/s  mean %7.2f ms  failed %s  server CPU %s us/req  other CPU %s%%\n' \
            "$round" "$(label "$name")" "$rps" "$mean" "$failed" "$cpu_us" "$BENCH_OTHER_CPU"
    done
done

column_median() { bench_column_median "$results" "$@"; }
column_all() { bench_column_all "$results" "$@"; }

reference="$(column_median granian 3)"
echo
echo "medians of $ROUNDS rounds; 'vs granian' is the ratio to granian's median requests/s; 'CPU us/req' is the"
echo "CPU time all the server's processes used per request; 'other CPU' is the share of the machine's CPU used by"
echo "neither the server nor h2load (other tenants, steal), per round"
echo "| server                             | req/s  | vs granian | mean ms | failed | CPU us/req | req/s of each round | other CPU % |"
echo "|------------------------------------|-------:|-----------:|--------:|-------:|-----------:|---------------------|------------:|"
# The same medians for the result, with every round's requests/s and other CPU beside them.
medians="$BENCH_OUT/medians.tsv"
printf 'server\treq/s\tvs granian\tmean ms\tfailed\tCPU us/req\treq/s, each round\tother CPU %%, each round\n' >"$medians"
summary=""
for name in $SERVERS; do
    rps="$(column_median "$name" 3)"
    ratio="-"
    [[ "$reference" == "-" ]] || ratio="$(printf '%.2f' "$(echo "$rps / $reference" | bc -l)")"
    figures=("$(label "$name")" "$(printf '%.0f' "$rps")" "$ratio" "$(printf '%.2f' "$(column_median "$name" 4)")"
        "$(awk -F'\t' -v n="$name" '$2 == n {s += $5} END {print s + 0}' "$results")" "$(column_median "$name" 7)"
        "$(column_all "$name" 3)" "$(column_all "$name" 6)")
    printf '| %-34s | %6s | %10s | %7s | %6s | %10s | %-19s | %11s |\n' "${figures[@]}"
    (IFS=$'\t'; echo "${figures[*]}") >>"$medians"
    [[ "$name" == granian || "$ratio" == "-" ]] || summary+="$(label "$name"): ${ratio}x granian's requests/s. "
done
echo "raw h2load outputs and server logs: $BENCH_OUT"

failed_all="$(awk -F'\t' '{s += $5} END {print s + 0}' "$results")"
summary+="Median of $ROUNDS rounds, $CONNECTIONS connections x $STREAMS streams; $failed_all requests failed in all."
pinned="not pinned"
[[ -z "$H2LOAD_CPU" ]] || pinned="pinned to CPU $H2LOAD_CPU"
tools="headway h2load"
[[ " $SERVERS " != *" granian "* ]] || tools+=" granian python"
bench_result h2load "$tools" \
    --title "HTTP/2 hello world over TLS (h2load)" --order 40 \
    --command "$(bench_command ROUNDS=5 DURATION=10 CONNECTIONS=4 STREAMS=16 H2LOAD_CPU= "SERVERS=headway granian")" \
    --summary "$summary" \
    --table "Medians of $ROUNDS rounds, servers interleaved" "$medians" \
    --note "The demo app's \`$ENDPOINT\` with $WORKERS worker processes over TLS (ALPN h2, a throwaway P-256 certificate): \`headway serve -w $WORKERS -t $HEADWAY_THREADS --certfile --keyfile\` and \`granian --interface wsgi --http 2 --workers $WORKERS\`, each started fresh for every round; \`h2load -c $CONNECTIONS -m $STREAMS -D $DURATION\` after a ${WARMUP}s warm-up, h2load $pinned." \
    --note "CPU us/req: the CPU time all the server's processes used a request. Other CPU: the share of the machine's CPU used by neither the server nor h2load (other tenants, steal); a round with a high figure measured a busy machine."
