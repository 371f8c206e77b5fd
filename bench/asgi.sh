#!/usr/bin/env bash
# ASGI on the bundled worker, against the ASGI servers people use today, in two parts:
#
# hello: hello world throughput of the ASGI twin of the demo (headway.twins.demo_asgi:app) with
#   2 worker processes under `wrk -t1 -c64`: headway's ASGI worker, uvicorn (httptools, uvloop)
#   and granian ASGI. It is bench/hello-throughput.sh with SERVERS="headway-asgi uvicorn
#   granian-asgi" (its rounds, warm-up, quiet-machine wait and table; its env applies).
# websocket: WebSocket echo latency at 1000 open sockets with `headway load --websocket`, at each
#   rate of RATES messages/s for WS_DURATION: uvicorn alone, headway's ASGI worker (-w 1 -t 2),
#   and headway in front of uvicorn (--cmd), all running tests/apps/ws_echo.py. Per-message
#   deflate is off everywhere (`headway load` does not offer it), so the bytes relayed are the
#   bytes measured.
#
# Raw outputs and server logs go to bench/out/asgi/.
#
# Usage: bench/asgi.sh
# Env:   PARTS="hello websocket"  RATES="1000 2000 4000"  WS_DURATION=30s  SOCKETS=1000
#        and hello-throughput.sh's (ROUNDS, DURATION, WARMUP, HEADWAY_THREADS, HEADWAY, BENCH_VENV)
set -euo pipefail

# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"

PARTS="${PARTS:-hello websocket}"
RATES="${RATES:-1000 2000 4000}"
WS_DURATION="${WS_DURATION:-30s}"
SOCKETS="${SOCKETS:-1000}"
WS_SERVERS="uvicorn headway-asgi headway-uvicorn"

if [[ " $PARTS " == *" hello "* ]]; then
    SERVERS="headway-asgi uvicorn granian-asgi" BENCH_OUT="$BENCH_OUT/asgi" "$(dirname "$0")/hello-throughput.sh"
fi
[[ " $PARTS " == *" websocket "* ]] || exit 0

bench_need curl python3 setsid
bench_find_headway
bench_python_peers
BENCH_OUT="$BENCH_OUT/asgi/websocket"
bench_init
cd "$BENCH_REPO/tests/apps" # the echo app's module
UVICORN="uvicorn --lifespan off --log-level warning --ws websockets-sansio --ws-per-message-deflate false"

# start_ws_server NAME PORT: starts NAME serving the echo app on 127.0.0.1:PORT.
start_ws_server() {
    local name="$1" port="$2" url="http://127.0.0.1:$2/hello"
    case "$name" in
        uvicorn) bench_start "$name" "$url" $UVICORN --host 127.0.0.1 --port "$port" ws_echo:app ;;
        headway-asgi)
            bench_start "$name" "$url" "$HEADWAY" serve -w 1 -t 2 -b "127.0.0.1:$port" --interface asgi ws_echo:app ;;
        headway-uvicorn)
            bench_start "$name" "$url" "$HEADWAY" serve -w 1 -t 2 -b "127.0.0.1:$port" \
                --cmd "$UVICORN --uds {socket} ws_echo:app" ;;
        *) bench_die "unknown server $name" ;;
    esac
}

# ws_figures FILE: "p50 p99 p99.9 max (ms) errors late_sends" from one `headway load -o json`.
ws_figures() {
    python3 - "$1" <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
at = {p["percent"]: p["secs"] * 1000 for p in report["latency"]["percentiles"]}
pick = lambda percent: f"{at[percent]:.2f}" if percent in at else "nan"
errors = sum(count["count"] for count in report["errors_by_kind"].values())
print(pick(50.0), pick(99.0), pick(99.9), f"{report['latency']['max_secs'] * 1000:.2f}", errors, report["late_sends"])
PY
}

{
    echo "# WebSocket echo: headway load --websocket -c $SOCKETS -z $WS_DURATION --message-size 64, rates $RATES"
    bench_versions
} | tee "$BENCH_OUT/header.txt"
echo "| server | rate (messages/s) | p50 ms | p99 ms | p99.9 ms | max ms | errors | late sends |"
echo "|---|---|---|---|---|---|---|---|"
for name in $WS_SERVERS; do
    port="$(bench_free_port)"
    start_ws_server "$name" "$port"
    for rate in $RATES; do
        raw="$BENCH_OUT/$name-$rate.json"
        "$HEADWAY" load --websocket -c "$SOCKETS" -z "$WS_DURATION" --rate "$rate" --message-size 64 -o json \
            "ws://127.0.0.1:$port/echo" >"$raw"
        read -r p50 p99 p999 max errors late < <(ws_figures "$raw")
        echo "| $name | $rate | $p50 | $p99 | $p999 | $max | $errors | $late |"
    done
    bench_stop
done
echo "raw outputs and server logs: $BENCH_OUT"
