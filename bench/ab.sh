#!/usr/bin/env bash
# Two builds of headway side by side with granian WSGI on one Flask page: did a change to the
# request path pay? Each round starts build A and build B afresh, in turn, with granian left
# running between them, and loads each with `headway load -c CONNECTIONS -z DURATION` after a
# WARMUP; the table shows each round's requests/s, p99 and CPU a request (all the server's
# processes), each build's ratio to granian in that round, and the medians over the rounds (the
# machine is shared and noisy: compare the median ratios, not single runs).
#
# Usage: HEADWAY_A=old/headway PYTHON_A=old/.venv/bin/python HEADWAY_B=new/headway \
#        PYTHON_B=new/.venv/bin/python bench/ab.sh
#        (each build with the Python whose headway._native matches it: the hop's layout may
#        differ between builds)
# Env:   ROUNDS=7  DURATION=6s  WARMUP=2s  CONNECTIONS=64  WORKERS=2  THREADS=5
#        APP=headway.twins.flask_bench:app  ENDPOINT=/fortunes
# Raw reports and server logs go to bench/out/ab/.
set -euo pipefail

# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"

ROUNDS="${ROUNDS:-7}"
DURATION="${DURATION:-6s}"
WARMUP="${WARMUP:-2s}"
CONNECTIONS="${CONNECTIONS:-64}"
WORKERS="${WORKERS:-2}"
THREADS="${THREADS:-5}"
APP="${APP:-headway.twins.flask_bench:app}"
ENDPOINT="${ENDPOINT:-/fortunes}"
for var in HEADWAY_A PYTHON_A HEADWAY_B PYTHON_B; do
    [[ -x "${!var:-}" ]] || bench_die "$var must name an executable (see the usage at the top)"
done

bench_need curl bc python3 setsid /usr/bin/time
bench_python_peers
# granian imports the Flask app from the peers' virtualenv.
"$BENCH_VENV/bin/python" -c 'import flask' 2>/dev/null || "$BENCH_VENV/bin/pip" install -q flask >&2
BENCH_OUT="$BENCH_OUT/ab"
bench_init
export PYTHONPATH="$BENCH_REPO/python${PYTHONPATH:+:$PYTHONPATH}"

# Requests/s, p99 (ms) and CPU a request (us to a tenth, from TICKS of the server's processes) of a
# `headway load -o json` report.
summary() {
    python3 -c 'import json, sys
r = json.load(open(sys.argv[1]))
p99 = next(p["secs"] for p in r["latency"]["percentiles"] if p["percent"] == 99.0)
print("%.0f %.2f %.1f" % (r["rps"], p99 * 1000, int(sys.argv[2]) * 10000 / max(r["requests"], 1)))' "$1" "$2"
}

# ratio X Y: X / Y to three places.
ratio() { echo "scale=3; $1 / $2" | bc; }

# load NAME PORT: warms the server up, then measures it; prints "requests/s p99 cpu".
load() {
    local name="$1" port="$2" url="http://127.0.0.1:$2$ENDPOINT"
    "$HEADWAY_B" load -c "$CONNECTIONS" -z "$WARMUP" "$url" >/dev/null
    bench_measure "$BENCH_OUT/$name.json" "$HEADWAY_B" load -c "$CONNECTIONS" -z "$DURATION" -o json "$url"
    summary "$BENCH_OUT/$name.json" "$BENCH_SERVER_TICKS"
}

granian_port="$(bench_free_port)"
bench_start granian "http://127.0.0.1:$granian_port$ENDPOINT" \
    granian --interface wsgi --workers "$WORKERS" --blocking-threads "$THREADS" --host 127.0.0.1 \
    --port "$granian_port" "$APP"
granian_pid="$bench_server_pid"
# granian runs throughout; stop it too on any exit.
trap 'bench_stop; bench_server_pid="$granian_pid"; bench_stop; bench_autogroup_restore' EXIT

echo "# A: $HEADWAY_A ($PYTHON_A)"
echo "# B: $HEADWAY_B ($PYTHON_B)"
echo "# granian $(bench_pip_version granian), $WORKERS workers x $THREADS threads, $APP $ENDPOINT, -c $CONNECTIONS -z $DURATION"
bench_machine_line
echo "round  A req/s  A p99  A CPU us/req  B req/s  B p99  B CPU us/req  granian req/s  granian p99  A/granian  B/granian  B/A  B/A CPU"
ratios_a="" ratios_b="" ratios_ba="" cpu_ba=""
for round in $(seq "$ROUNDS"); do
    declare -A rps=() p99=() cpu=()
    for build in A B; do
        binary="HEADWAY_$build" python="PYTHON_$build" port="$(bench_free_port)"
        bench_start "headway-$build" "http://127.0.0.1:$port$ENDPOINT" env HEADWAY_PYTHON="${!python}" \
            "${!binary}" serve -w "$WORKERS" -t "$THREADS" --bind "127.0.0.1:$port" "$APP"
        bench_wait_workers "http://127.0.0.1:$port$ENDPOINT" "$WORKERS"
        read -r "rps[$build]" "p99[$build]" "cpu[$build]" < <(load "headway-$build-$round" "$port")
        bench_stop
        # granian, measured after each build, so that each build has a granian run beside it.
        bench_server_pid="$granian_pid"
        read -r "rps[g$build]" "p99[g$build]" "cpu[g$build]" < <(load "granian-$build-$round" "$granian_port")
        bench_server_pid=""
    done
    a="$(ratio "${rps[A]}" "${rps[gA]}")" b="$(ratio "${rps[B]}" "${rps[gB]}")" ba="$(ratio "${rps[B]}" "${rps[A]}")"
    cba="$(ratio "${cpu[B]}" "${cpu[A]}")"
    ratios_a+="$a"$'\n' ratios_b+="$b"$'\n' ratios_ba+="$ba"$'\n' cpu_ba+="$cba"$'\n'
    echo "$round  ${rps[A]}  ${p99[A]}  ${cpu[A]}  ${rps[B]}  ${p99[B]}  ${cpu[B]}  ${rps[gA]}/${rps[gB]}  ${p99[gA]}/${p99[gB]}  $a  $b  $ba  $cba"
done
echo "median  A/granian $(printf '%s' "$ratios_a" | bench_median)  B/granian $(printf '%s' "$ratios_b" | bench_median)  B/A $(printf '%s' "$ratios_ba" | bench_median)  B/A CPU $(printf '%s' "$cpu_ba" | bench_median)"
