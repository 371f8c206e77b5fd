#!/usr/bin/env bash
# Where the cores go idle under a closed-loop load, and how long headway's front waits for a
# CPU: a `sched:sched_switch` recording of the whole machine for SECS seconds while
# `headway load -c CLIENTS` runs against `headway serve -w 2 -t 5 APP`, read by
# bench/sched_trace.py.
#
# Why: on 2 cores, the lab's Flask sqlite page leaves 4-6 % of the machine idle under headway
# against 2-4 % under granian, and the CPU time counters cannot say why. This trace shows the
# idle episodes (a worker's threads all asleep, 100-130 µs each) and the front's waits after its
# yield (p90 ~0.5 ms behind the worker threads on its CPU), which together say a worker ran out
# of requests while the front that would hand it the next one was waiting for a CPU. It also
# gives how much of the idle time passed with the front waiting on the other CPU's run queue
# (about half): time the kernel could have given it and did not.
# docs/design/scheduling.md has the figures and what was tried.
#
# Needs perf (apt-get install linux-perf) and the right to trace the whole machine (root, or
# kernel.perf_event_paranoid <= -1); the default APP needs Flask in headway's Python.
# Usage: bench/sched-trace.sh
# Env:   APP=headway.twins.flask_bench:app ENDPOINT=/fortunes CLIENTS=64 SECS=2
set -euo pipefail

# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"

APP="${APP:-headway.twins.flask_bench:app}"
ENDPOINT="${ENDPOINT:-/fortunes}"
CLIENTS="${CLIENTS:-64}"
SECS="${SECS:-2}"

bench_need perf curl python3
bench_find_headway
bench_init

port="$(bench_free_port)"
url="http://127.0.0.1:$port$ENDPOINT"
bench_start sched-trace "$url" "$HEADWAY" serve -w 2 -t 5 -b "127.0.0.1:$port" --log-level warn "$APP"
bench_wait_workers "$url" 2
front="$bench_server_pid"

bench_headway_line
bench_autogroup_line
bench_machine_line
echo "# $APP $ENDPOINT, 2 workers x 5 slots, headway load -c $CLIENTS; trace of $SECS s after a 2 s warm-up"
# The load outlasts the recording by 2 s on each side; it is bounded by its own -z.
"$HEADWAY" load -c "$CLIENTS" -z "$((SECS + 4))s" "$url" >"$BENCH_OUT/sched-trace-load.txt" &
load=$!
sleep 2
perf record -q -e sched:sched_switch -a -o "$BENCH_OUT/sched-trace.data" -- sleep "$SECS" 2>/dev/null
wait "$load" || bench_die "the load run failed: $BENCH_OUT/sched-trace-load.txt"
bench_stop
awk '/^  Requests\/sec/ {print "# requests/s over the whole load run: " $2}' "$BENCH_OUT/sched-trace-load.txt"
perf script -i "$BENCH_OUT/sched-trace.data" -F comm,tid,cpu,time,event,trace 2>/dev/null |
    python3 "$BENCH_REPO/bench/sched_trace.py" "$front"
