#!/usr/bin/env bash
# The soak: an hour (or --minutes N) of mixed traffic against one headway, to show that nothing
# grows: HTTP/1.1 keep-alive requests in an open loop (quick, slow and large responses), 40
# WebSockets sending messages, slow clients (a head sent a byte at a time, a large response read
# 64 KiB every 100 ms), the workers recycled every few hundred requests (--max-requests) and
# reloaded (SIGHUP) every few minutes. The front's RSS, descriptors and threads are sampled every
# 10 s; the result is bench/out/soak/soak-<time>.json (settings, samples, the load reports) and a
# summary printed at the end: RSS and descriptors flat within 10 % after warm-up or not, and every
# failed request with its reason (those refused by design counted apart).
#
# Usage: bench/soak.sh [--minutes N]           (default 60)
# Env:   HEADWAY=path/to/headway  RELOAD_EVERY=S (default 180, or a fifth of a shorter run)
#        RATE=200 (HTTP requests a second)  WORKERS=2 THREADS=4  MAX_REQUESTS=3000
set -euo pipefail

# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"

minutes=60
while (($#)); do
    case "$1" in
        --minutes) minutes="$2"; shift 2 ;;
        *) bench_die "unknown argument $1 (usage: bench/soak.sh [--minutes N])" ;;
    esac
done
seconds=$((minutes * 60))
reload_every="${RELOAD_EVERY:-$((seconds / 5 < 180 ? seconds / 5 : 180))}"

bench_need curl python3 setsid
bench_find_headway
BENCH_OUT="$BENCH_OUT/soak"
mkdir -p "$BENCH_OUT"
trap bench_stop EXIT
ulimit -n "$(ulimit -Hn)"

port="$(bench_free_port)"
control="$(bench_free_port)"
# The soak app and headway.demo import from bench/ and the repo's python/.
export PYTHONPATH="$BENCH_REPO/bench:$BENCH_REPO/python${PYTHONPATH:+:$PYTHONPATH}"
bench_start headway "http://127.0.0.1:$port/hello" "$HEADWAY" serve -w "${WORKERS:-2}" -t "${THREADS:-4}" \
    --interface asgi -b "127.0.0.1:$port" --control "127.0.0.1:$control" \
    --max-requests "${MAX_REQUESTS:-3000}" --max-requests-jitter 300 --log-level warn soak_app:app
result="$BENCH_OUT/soak-$(date -u +%Y%m%dT%H%M%SZ).json"
bench_say "soaking for $minutes min (reload every $reload_every s); result in $result"
{ bench_headway_line; bench_machine_line; } >&2
python3 "$BENCH_REPO/bench/soak.py" --headway "$HEADWAY" --pid "$bench_server_pid" --port "$port" \
    --control "127.0.0.1:$control" --seconds "$seconds" --reload-every "$reload_every" \
    --rate "${RATE:-200}" --result "$result"
