#!/usr/bin/env bash
# Seed 000, the keep-alive tail: 1 worker x 5 slots, a 200 ms endpoint, `hey -n 200 -c 10`
# with keep-alive on and off, against headway, headway running Puma as its worker, headway's
# own Rack worker, Puma alone, gunicorn gthread and granian WSGI, in one run on the same machine.
#
# Ten closed-loop clients on five 200 ms slots: a single FIFO queue gives every request
# 0.40 s (S x C/B), so p99 should be 0.40 s. A server that pins a keep-alive connection to
# a busy thread shows a longer tail (Puma 5/6: ~2.4 s, see the seed).
#
# The whole sweep runs ROUNDS times, servers interleaved, and the table shows the median
# of each figure over the rounds. Each server is started fresh per round, polled until it
# answers, measured with keep-alive on then off, and stopped with its whole session.
# Raw hey outputs and server logs go to bench/out/keepalive-tail/; the medians, with each
# round's p99, to bench/results/keepalive-tail.json for docs/benchmarks.md.
#
# Usage: bench/keepalive-tail.sh
# Env:   ROUNDS=3  SERVERS="headway headway-puma headway-rack puma gunicorn granian"  (a subset, in
#        order)  CLIENTS=10 (the seed's; 15 is three clients a slot)
#        HEADWAY=path/to/headway  BENCH_VENV=bench/.venv (created with pip on first use)
#        BENCH_QUIET=25 BENCH_QUIET_WAIT=60: before each run, wait up to 60 s for the machine to
#        be under 25% busy (it is shared); each run's "other CPU" says how busy it was anyway
set -euo pipefail

# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"

ALL_SERVERS="headway headway-puma headway-rack puma gunicorn granian"
ROUNDS="${ROUNDS:-3}"
SERVERS="${SERVERS:-$ALL_SERVERS}"
REQUESTS=200
CLIENTS="${CLIENTS:-10}"
SLOTS=5
SERVICE_S=0.2
ENDPOINT=/fixed
# The ideal of a single FIFO queue with B slots: latency S x max(1, C/B), throughput min(C, B)/S.
IDEAL_P99="$(awk -v s="$SERVICE_S" -v c="$CLIENTS" -v b="$SLOTS" 'BEGIN {print s * (c > b ? c / b : 1)}')"
IDEAL_RPS="$(awk -v s="$SERVICE_S" -v c="$CLIENTS" -v b="$SLOTS" 'BEGIN {print (c < b ? c : b) / s}')"
RACK_APP="$BENCH_REPO/python/headway/twins/demo.ru"

bench_need hey puma curl bc python3 setsid /usr/bin/time
bench_find_headway
bench_python_peers
BENCH_OUT="$BENCH_OUT/keepalive-tail"
bench_init

label() {
    case "$1" in
        headway) echo "headway -w 1 -t 5" ;;
        headway-puma) echo "headway --cmd puma -t 5:5" ;;
        headway-rack) echo "headway -w 1 -t 5 demo.ru (Rack worker)" ;;
        puma) echo "puma -t 5:5 (single)" ;;
        gunicorn) echo "gunicorn gthread 1x5" ;;
        granian) echo "granian wsgi 1x5" ;;
        *) bench_die "unknown server $1 (known: $ALL_SERVERS)" ;;
    esac
}

# The server as the result's summary names it.
short_name() {
    case "$1" in
        headway-puma) echo "headway running Puma" ;;
        headway-rack) echo "headway's Rack worker" ;;
        puma) echo "Puma alone" ;;
        *) echo "$1" ;;
    esac
}

# start_server NAME PORT ROUND: starts NAME on 127.0.0.1:PORT with one worker of 5 slots.
start_server() {
    local name="$1" port="$2" round="$3" url="http://127.0.0.1:$2$ENDPOINT"
    case "$name" in
        headway) bench_start "r$round-$name" "$url" "$HEADWAY" serve -w 1 -t "$SLOTS" -b "127.0.0.1:$port" ;;
        headway-puma)
            bench_start "r$round-$name" "$url" "$HEADWAY" serve -w 1 -t "$SLOTS" -b "127.0.0.1:$port" \
                --cmd "puma -t $SLOTS:$SLOTS -b unix://{socket} $RACK_APP" ;;
        headway-rack) bench_start "r$round-$name" "$url" "$HEADWAY" serve -w 1 -t "$SLOTS" -b "127.0.0.1:$port" "$RACK_APP" ;;
        puma) bench_start "r$round-$name" "$url" puma -t "$SLOTS:$SLOTS" -b "tcp://127.0.0.1:$port" "$RACK_APP" ;;
        gunicorn)
            bench_start "r$round-$name" "$url" gunicorn -w 1 -k gthread --threads "$SLOTS" \
                -b "127.0.0.1:$port" headway.demo:app ;;
        granian)
            bench_start "r$round-$name" "$url" granian --interface wsgi --workers 1 --blocking-threads "$SLOTS" \
                --host 127.0.0.1 --port "$port" headway.demo:app ;;
    esac
}

# hey_figures FILE: "rps p50 p95 p99 max ok other" from one hey output (other = responses
# that were not 200 plus errors).
hey_figures() {
    awk '
        BEGIN {rps = p50 = p95 = p99 = max = "nan"}
        /Requests\/sec:/ {rps = $2}
        /Slowest:/ {max = $2}
        /^  50% in/ {p50 = $3}
        /^  95% in/ {p95 = $3}
        /^  99% in/ {p99 = $3}
        /^Status code distribution:/ {section = "status"; next}
        /^Error distribution:/ {section = "errors"; next}
        /^  \[[0-9]+\]/ {
            count = substr($1, 2) + 0
            if (section == "status" && $1 == "[200]") ok += $2
            else if (section == "status") other += $2
            else if (section == "errors") other += count
        }
        END {printf "%s %s %s %s %s %d %d\n", rps, p50, p95, p99, max, ok, other}
    ' "$1"
}

results="$BENCH_OUT/results.tsv"
: >"$results"
{
    echo "# seed 000 keep-alive tail: hey -n $REQUESTS -c $CLIENTS $ENDPOINT (200 ms), 1 worker x $SLOTS slots, $ROUNDS rounds"
    bench_versions
    printf '# ideal: p99 %.2f s, %.0f requests/s\n' "$IDEAL_P99" "$IDEAL_RPS"
} | tee "$BENCH_OUT/header.txt"

for name in $SERVERS; do label "$name" >/dev/null; done
for round in $(seq "$ROUNDS"); do
    for name in $SERVERS; do
        port="$(bench_free_port)"
        start_server "$name" "$port" "$round"
        for keepalive in on off; do
            flags=()
            [[ "$keepalive" == off ]] && flags=(-disable-keepalive)
            raw="$BENCH_OUT/r$round-$name-keepalive-$keepalive.txt"
            bench_measure "$raw" hey -n "$REQUESTS" -c "$CLIENTS" "${flags[@]}" "http://127.0.0.1:$port$ENDPOINT"
            read -r rps p50 p95 p99 max ok other < <(hey_figures "$raw")
            printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$round" "$name" "$keepalive" \
                "$rps" "$p50" "$p95" "$p99" "$max" "$ok" "$other" "$BENCH_OTHER_CPU" >>"$results"
            printf 'round %s  %-28s keep-alive %-3s  %5.1f req/s  p50 %.3f  p99 %.3f  max %.3f  200s %s  other %s  other CPU %s%%\n' \
                "$round" "$(label "$name")" "$keepalive" "$rps" "$p50" "$p99" "$max" "$ok" "$other" "$BENCH_OTHER_CPU"
        done
        bench_stop
    done
done

column_median() { awk -F'\t' -v n="$1" -v k="$2" -v c="$3" '$2 == n && $3 == k {print $c}' "$results" | bench_median; }
column_sum() { awk -F'\t' -v n="$1" -v k="$2" -v c="$3" '$2 == n && $3 == k {s += $c} END {print s + 0}' "$results"; }
# column_rounds NAME KEEPALIVE COLUMN SCALE: every round's figure times SCALE, rounded, in order.
column_rounds() {
    awk -F'\t' -v n="$1" -v k="$2" -v c="$3" -v x="$4" '$2 == n && $3 == k {printf "%s%.0f", sep, $c * x; sep = " "}' "$results"
}
ms() { awk -v s="$1" 'BEGIN {printf "%.0f", s * 1000}'; }

echo
echo "medians of $ROUNDS rounds, each column on its own (seconds; ideal p99 $(printf '%.2f' "$IDEAL_P99") s, ideal $(printf '%.0f' "$IDEAL_RPS") req/s);"
echo "non-200: responses that were not 200 plus errors, summed over the rounds; other CPU: share of the"
echo "machine's CPU used by neither the server nor hey (other tenants, steal)"
printf '| %-28s | %-10s | %6s | %5s | %5s | %5s | %5s | %10s | %9s | %9s |\n' \
    server keep-alive "req/s" p50 p95 p99 max "p99/ideal" "non-200" "other CPU"
echo "|------------------------------|------------|-------:|------:|------:|------:|------:|-----------:|----------:|----------:|"
# The same medians for the result, latencies in milliseconds, with every round's p99 and other CPU.
medians="$BENCH_OUT/medians.tsv"
printf 'server\tkeep-alive\treq/s\tp50 ms\tp95 ms\tp99 ms\tmax ms\tp99 / ideal\tp99 ms, each round\tnon-200\tother CPU %%, each round\n' >"$medians"
declare -A ratio
non_200=0
for name in $SERVERS; do
    for keepalive in on off; do
        rps="$(column_median "$name" "$keepalive" 4)"
        p50="$(column_median "$name" "$keepalive" 5)"
        p95="$(column_median "$name" "$keepalive" 6)"
        p99="$(column_median "$name" "$keepalive" 7)"
        max="$(column_median "$name" "$keepalive" 8)"
        failed="$(column_sum "$name" "$keepalive" 10)"
        ratio[$name/$keepalive]="$(printf '%.2f' "$(echo "$p99 / $IDEAL_P99" | bc -l)")"
        non_200=$((non_200 + failed))
        printf '| %-28s | %-10s | %6.1f | %5.3f | %5.3f | %5.3f | %5.3f | %9.2fx | %9s | %8s%% |\n' \
            "$(label "$name")" "$keepalive" "$rps" "$p50" "$p95" "$p99" "$max" "${ratio[$name/$keepalive]}" \
            "$failed" "$(column_median "$name" "$keepalive" 11)"
        printf '%s\t%s\t%.1f\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$(label "$name")" "$keepalive" "$rps" \
            "$(ms "$p50")" "$(ms "$p95")" "$(ms "$p99")" "$(ms "$max")" "${ratio[$name/$keepalive]}" \
            "$(column_rounds "$name" "$keepalive" 7 1000)" "$failed" "$(column_rounds "$name" "$keepalive" 11 1)" >>"$medians"
    done
done

# The issue's targets, said plainly.
echo
if [[ " $SERVERS " == *" headway "* ]]; then
    p99="$(column_median headway on 7)"
    verdict="missed"
    (($(echo "$p99 <= $IDEAL_P99 * 1.05" | bc -l))) && verdict="met"
    printf 'target 1, headway keep-alive p99 within 5%% of %.2f s: %.3f s (%+.1f%%), %s\n' \
        "$IDEAL_P99" "$p99" "$(echo "($p99 / $IDEAL_P99 - 1) * 100" | bc -l)" "$verdict"
fi
if [[ " $SERVERS " == *" headway-puma "* && " $SERVERS " == *" puma "* ]]; then
    # A request pinned behind another on a busy connection waits at least one more service
    # time, so a tail is gone when p99 stays under ideal + S.
    with="$(column_median headway-puma on 7)"
    alone="$(column_median puma on 7)"
    verdict="missed"
    (($(echo "$with < $IDEAL_P99 + $SERVICE_S" | bc -l))) && verdict="met"
    printf 'target 2, headway --cmd puma removes the keep-alive tail (p99 < ideal + %s s): p99 %.3f s (%.2fx ideal) vs Puma alone %.3f s (%.2fx), %s\n' \
        "$SERVICE_S" "$with" "$(echo "$with / $IDEAL_P99" | bc -l)" "$alone" "$(echo "$alone / $IDEAL_P99" | bc -l)" "$verdict"
fi
echo "raw hey outputs and server logs: $BENCH_OUT"

# The result: the summary says each server's keep-alive p99 against the ideal, and the range
# without keep-alive.
on_ratios=()
off_ratios=()
for name in $SERVERS; do
    on_ratios+=("$(short_name "$name") ${ratio[$name/on]}x")
    off_ratios+=("${ratio[$name/off]}")
done
read -r low high < <(printf '%s\n' "${off_ratios[@]}" | sort -g | sed -n '1p;$p' | paste -sd' ')
ideal="$(printf '%.2f' "$IDEAL_P99")"
answered="every response was a 200"
((non_200 == 0)) || answered="$non_200 responses were not 200 or failed"
printf -v on_text '%s, ' "${on_ratios[@]}"
summary="With keep-alive, p99 against the ideal $ideal s (medians of $ROUNDS rounds): ${on_text%, }. Without keep-alive, ${low}x to ${high}x; $answered."
tools="headway hey"
[[ "$SERVERS" != *puma* ]] || tools+=" puma ruby"
for peer in gunicorn granian; do [[ " $SERVERS " != *" $peer "* ]] || tools+=" $peer"; done
[[ " $SERVERS " != *" gunicorn "* && " $SERVERS " != *" granian "* ]] || tools+=" python"
service_ms="$(ms "$SERVICE_S")"
# The seed's 10 clients are keepalive-tail; another count is a result of its own beside it.
name=keepalive-tail title="Seed 000 with the public tools: the keep-alive tail"
if ((CLIENTS != 10)); then
    name+="-c$CLIENTS" title+=", $CLIENTS clients"
fi
bench_result "$name" "$tools" \
    --title "$title" --order 10 \
    --command "$(bench_command ROUNDS=3 "SERVERS=$ALL_SERVERS" CLIENTS=10)" --summary "$summary" \
    --table "Medians of $ROUNDS rounds, servers interleaved (ideal p99 $(ms "$IDEAL_P99") ms)" "$medians" \
    --note "1 worker x $SLOTS slots serving the demo app's \`$ENDPOINT\` (sleeps $service_ms ms; Puma serves its Rack twin, \`python/headway/twins/demo.ru\`), \`hey -n $REQUESTS -c $CLIENTS\` with keep-alive, then with \`-disable-keepalive\`. The ideal, one FIFO queue for the $CLIENTS closed-loop clients: every request answered in S x C/B = $ideal s, $(printf '%.0f' "$IDEAL_RPS") requests/s." \
    --note "The servers, started fresh for each round: \`headway serve -w 1 -t $SLOTS\`; \`headway serve -w 1 -t $SLOTS --cmd 'puma -t $SLOTS:$SLOTS -b unix://{socket} demo.ru'\`; \`headway serve -w 1 -t $SLOTS demo.ru\` (its Rack worker); \`puma -t $SLOTS:$SLOTS\` (single mode); \`gunicorn -w 1 -k gthread --threads $SLOTS\`; \`granian --interface wsgi --workers 1 --blocking-threads $SLOTS\`." \
    --note "Each figure is its column's median on its own. Non-200: responses that were not 200 plus errors, summed over the rounds. Other CPU: the share of the machine's CPU used by neither the server nor hey (other tenants, steal); a round with a high figure measured a busy machine."
