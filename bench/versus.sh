#!/usr/bin/env bash
# headway against the servers FastAPI, Flask and Rack users compare it with, measured the way they
# measure: every server with 2 workers (1 for large bodies), started with its defaults and as its
# users tune it, plain `wrk -t1 -c64` (nothing pinned, no scheduler settings), ROUNDS rounds with
# the servers interleaved (their order reversed every other round). For each server: the CPU a
# request of all its processes (headway's front apart too), the figure that does not depend on
# how the kernel shares 2 CPUs between the server and wrk; requests/s with the server in a session
# of its own and sharing wrk's (SESSIONS, bench/lib.sh's BENCH_SESSION), each the median round
# with every round's figure and headway's ratio to it in that round; p50 and p99. Parts (PARTS):
#
#   fastapi  FastAPI JSON (headway.twins.fastapi_bench:app, /json): headway, uvicorn tuned (uvloop,
#            httptools) and as pip installs it (asyncio, h11), both without their access log,
#            granian ASGI
#   wsgi     the smallest WSGI hello world (headway.twins.hello:app, /): headway, granian WSGI with
#            its defaults and with --blocking-threads as many as headway's slots, gunicorn gthread
#            with as many threads, and headway with --no-lanes (one route: lanes should change
#            nothing measurable)
#   tls      the wsgi part's hello world over HTTPS, HTTP/1.1 keep-alive (wrk offers no h2 by ALPN),
#            every server given the same self-signed P-256 certificate for 127.0.0.1, made for the
#            run with openssl into bench/out/versus/: headway (`--certfile`, `--keyfile`), granian
#            WSGI with its defaults and with --blocking-threads as many as headway's slots
#            (`--ssl-certificate`, `--ssl-keyfile`)
#   flask    Flask JSON and the sqlite + template page (headway.twins.flask_bench:app, /json and
#            /fortunes): headway, granian WSGI with its defaults and with --blocking-threads
#   rack     the smallest Rack hello world (python/headway/twins/hello.ru, /): headway's own Rack
#            worker (`headway serve -w 2 -t 5 hello.ru`), Puma in cluster mode with the same W x T
#            (`puma -w 2 -t 5:5`), and Puma inside headway (`headway serve -w 2 -t 5 --cmd 'puma
#            -t 5:5 ...'`), every Puma with `-e production` and the Rack worker with that RACK_ENV
#   rails    a Rails 6.1 page, a template with ten rows in the app's layout (the Rails test app,
#            tests/apps/rails, /items), by the same three servers as rack; the app in production
#            as bench/rails.ru sets it up: eager loading on, a secret key base this script makes
#            for the run, Rails' log in $BENCH_OUT/rails-production.log
#   bodies   large bodies (headway.twins.bodies:app), 1 worker each, curl one at a time: COUNT
#            uploads and COUNT downloads of BODY_MIB MiB and ECHOES echoes of 5 MB; MB/s, CPU a
#            transfer, and headway's front's peak RSS (VmHWM) while it all passes: headway,
#            granian WSGI, gunicorn
#   fastapi-busy, wsgi-busy, flask-busy, rack-busy, rails-busy
#            the same beside a CPU-bound neighbour process (one shell loop, started before the
#            part and stopped after it): the busy-machine case
#
# The text tables go to stdout and bench/out/versus/; each part's result is written as
# bench/results/versus-PART.json (bench/results.py; docs/benchmarks.md is built from those).
# Tails are the lab's business: `headway lab run keepalive-tail mixed-tail overload`.
#
# Usage: bench/versus.sh;  PARTS="rack rails" bench/versus.sh (Ruby alone: no Python peers needed);
#        PARTS=tls bench/versus.sh
# Env:   PARTS="fastapi wsgi flask bodies fastapi-busy"  ROUNDS=5  DURATION=5s  WARMUP=2s
#        SESSIONS="own shared" (the throughput parts measure each server in each)  CONNECTIONS=64  COUNT=16  BODY_MIB=64  ECHOES=8  HEADWAY=path/to/headway
#        BENCH_VENV=bench/.venv (the peers, FastAPI and Flask, from PyPI on first use)
#        BENCH_QUIET=25 BENCH_QUIET_WAIT=60 (bench/lib.sh; not waited for in a -busy part)
#        RESULTS=0: no bench/results/ files (a trial run)
set -euo pipefail

# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"

PARTS="${PARTS:-fastapi wsgi flask bodies fastapi-busy}"
ROUNDS="${ROUNDS:-5}"
DURATION="${DURATION:-5s}"
WARMUP="${WARMUP:-2s}"
CONNECTIONS="${CONNECTIONS:-64}"
COUNT="${COUNT:-16}"
BODY_MIB="${BODY_MIB:-64}"
ECHOES="${ECHOES:-8}"
RESULTS="${RESULTS:-1}"
SESSIONS="${SESSIONS:-own shared}"
WORKERS=2
# headway's -t auto for a WSGI app: the threads a tuned WSGI peer is given too.
WSGI_THREADS=5
# The Rack servers' threads a worker: Puma's -t 5:5 (its default maximum), headway's -t 5.
RACK_THREADS=5
ECHO_BYTES=5000000

bench_need wrk curl python3 setsid /usr/bin/time
bench_find_headway
# The Python peers and apps, unless every part is Rack.
if [[ " ${PARTS//-busy/} " =~ \ (fastapi|wsgi|tls|flask|bodies)\  ]]; then
    BENCH_PYTHON_PEERS+=(fastapi flask)
    bench_python_peers
    # The apps are this tree's, whichever headway is installed where.
    export PYTHONPATH="$BENCH_REPO/python${PYTHONPATH:+:$PYTHONPATH}"
    "$HEADWAY_PYTHON" -c 'import fastapi, flask' 2>/dev/null ||
        bench_die "headway's worker Python ($HEADWAY_PYTHON) has no FastAPI or Flask: pip install fastapi flask there"
    "$BENCH_VENV/bin/python" -c 'import fastapi, flask' 2>/dev/null ||
        bench_die "$BENCH_VENV has no FastAPI or Flask: $BENCH_VENV/bin/pip install fastapi flask"
fi
if [[ " ${PARTS//-busy/} " =~ \ (rack|rails)\  ]]; then
    bench_need puma ruby
fi
BENCH_OUT="$BENCH_OUT/versus"
bench_init
# The tls part's certificate, the same for every server, so that neither pays more for its key:
# P-256, as bench/h2load.sh's; the handshakes are few anyway (one a connection, kept alive by wrk).
CERT="$BENCH_OUT/cert.pem" KEY="$BENCH_OUT/key.pem"
if [[ " ${PARTS//-busy/} " == *" tls "* ]]; then
    bench_certificate "$CERT" "$KEY"
fi
results="$BENCH_OUT/results.tsv"
bodies="$BENCH_OUT/bodies.tsv"
: >"$results"
: >"$bodies"
# What bench/rails.ru reads: one secret for every worker of the run, and where Rails logs (this
# run's lines alone).
SECRET_KEY_BASE="$(python3 -c 'import secrets; print(secrets.token_hex(64))')"
RAILS_LOG_FILE="$BENCH_OUT/rails-production.log"
export SECRET_KEY_BASE RAILS_LOG_FILE
: >"$RAILS_LOG_FILE"

# The servers of a part, headway first; the app and the endpoints measured.
servers_of() {
    case "${1%-busy}" in
        fastapi) echo "headway uvicorn uvicorn-plain granian-asgi" ;;
        wsgi) echo "headway granian-wsgi granian-wsgi-threads gunicorn-gthread headway-no-lanes" ;;
        tls) echo "headway granian-wsgi granian-wsgi-threads" ;;
        flask) echo "headway granian-wsgi granian-wsgi-threads" ;;
        bodies) echo "headway granian-wsgi gunicorn" ;;
        rack | rails) echo "headway puma-cluster headway-puma" ;;
        *) bench_die "unknown part $1 (known: fastapi wsgi tls flask rack rails bodies, and each but bodies with -busy)" ;;
    esac
}
app_of() {
    case "${1%-busy}" in
        fastapi) echo headway.twins.fastapi_bench:app ;;
        wsgi | tls) echo headway.twins.hello:app ;;
        flask) echo headway.twins.flask_bench:app ;;
        bodies) echo headway.twins.bodies:app ;;
        rack) echo "$BENCH_REPO/python/headway/twins/hello.ru" ;;
        rails) echo "$BENCH_REPO/bench/rails.ru" ;;
    esac
}
endpoints_of() {
    case "${1%-busy}" in
        fastapi | flask) [[ "${1%-busy}" == flask ]] && echo "/json /fortunes" || echo "/json" ;;
        wsgi | tls | rack) echo "/" ;;
        rails) echo "/items" ;;
        bodies) echo "/download?size=1" ;;
    esac
}
# label NAME WORKERS APP: how a server of a part was started, for the lines printed as it runs.
label() {
    case "$1" in
        headway) [[ "$3" != *.ru ]] && echo "headway -w $2" || echo "headway -w $2 -t $RACK_THREADS (Rack worker)" ;;
        headway-no-lanes) echo "headway -w $2 --no-lanes" ;;
        uvicorn) echo "uvicorn --workers $2 (uvloop, httptools)" ;;
        uvicorn-plain) echo "uvicorn --workers $2 (asyncio, h11)" ;;
        granian-asgi) echo "granian asgi --workers $2" ;;
        granian-wsgi) echo "granian wsgi --workers $2" ;;
        granian-wsgi-threads) echo "granian wsgi --workers $2 --blocking-threads $WSGI_THREADS" ;;
        gunicorn) echo "gunicorn -w $2" ;;
        gunicorn-gthread) echo "gunicorn -w $2 -k gthread --threads $WSGI_THREADS" ;;
        puma-cluster) echo "puma -w $2 -t $RACK_THREADS:$RACK_THREADS" ;;
        headway-puma) echo "headway -w $2 -t $RACK_THREADS --cmd puma" ;;
    esac
}

# scheme_of PART: how the servers of a part are reached, https for the tls part.
scheme_of() { [[ "${1%-busy}" == tls ]] && echo https || echo http; }

# tls_flags NAME: sets the caller's `flags` to those that make server NAME serve HTTPS with the
# run's certificate.
tls_flags() {
    case "$1" in
        headway*) flags=(--certfile "$CERT" --keyfile "$KEY") ;;
        granian-*) flags=(--ssl-certificate "$CERT" --ssl-keyfile "$KEY") ;;
        *) bench_die "$1 has no TLS flags here (the tls part runs headway and granian)" ;;
    esac
}

# start_server NAME APP WORKERS PORT LOG URL [FLAG...]: NAME with its defaults and WORKERS workers
# (a Rack app: RACK_THREADS threads each, in production mode); FLAGs are more of its own (the tls
# part's certificate: headway and granian take them).
start_server() {
    local name="$1" app="$2" workers="$3" port="$4" log="$5" url="$6" t="$RACK_THREADS"
    shift 6
    case "$name" in
        headway)
            if [[ "$app" == *.ru ]]; then
                RACK_ENV=production bench_start "$log" "$url" "$HEADWAY" serve -w "$workers" -t "$t" \
                    -b "127.0.0.1:$port" "$@" "$app"
            else
                bench_start "$log" "$url" "$HEADWAY" serve -w "$workers" -b "127.0.0.1:$port" "$@" "$app"
            fi
            ;;
        headway-no-lanes)
            bench_start "$log" "$url" "$HEADWAY" serve -w "$workers" --no-lanes -b "127.0.0.1:$port" "$@" "$app" ;;
        uvicorn)
            bench_start "$log" "$url" uvicorn --workers "$workers" --loop uvloop --http httptools --no-access-log \
                --host 127.0.0.1 --port "$port" "$app" ;;
        uvicorn-plain)
            bench_start "$log" "$url" uvicorn --workers "$workers" --loop asyncio --http h11 --no-access-log \
                --host 127.0.0.1 --port "$port" "$app" ;;
        granian-asgi)
            bench_start "$log" "$url" granian --interface asgi --workers "$workers" --host 127.0.0.1 --port "$port" "$app" ;;
        granian-wsgi)
            bench_start "$log" "$url" granian --interface wsgi --workers "$workers" --host 127.0.0.1 --port "$port" "$@" \
                "$app" ;;
        granian-wsgi-threads)
            bench_start "$log" "$url" granian --interface wsgi --workers "$workers" --blocking-threads "$WSGI_THREADS" \
                --host 127.0.0.1 --port "$port" "$@" "$app" ;;
        gunicorn) bench_start "$log" "$url" gunicorn -w "$workers" -b "127.0.0.1:$port" "$app" ;;
        gunicorn-gthread)
            bench_start "$log" "$url" gunicorn -w "$workers" -k gthread --threads "$WSGI_THREADS" -b "127.0.0.1:$port" \
                "$app" ;;
        puma-cluster)
            bench_start "$log" "$url" puma -e production -w "$workers" -t "$t:$t" -b "tcp://127.0.0.1:$port" "$app" ;;
        headway-puma)
            bench_start "$log" "$url" "$HEADWAY" serve -w "$workers" -t "$t" -b "127.0.0.1:$port" \
                --cmd "exec puma -e production -t $t:$t -b unix://{socket} '$app'" ;;
    esac
}

# A CPU-bound neighbour for a -busy part: one shell loop in a session of its own.
neighbour_pid=""
start_neighbour() {
    setsid sh -c 'while :; do :; done' </dev/null >/dev/null 2>&1 &
    neighbour_pid=$!
}
stop_neighbour() {
    [[ -n "$neighbour_pid" ]] || return 0
    kill -KILL -- "-$neighbour_pid" 2>/dev/null || kill -KILL "$neighbour_pid" 2>/dev/null || true
    wait "$neighbour_pid" 2>/dev/null || true
    neighbour_pid=""
}
trap 'stop_neighbour; bench_stop; bench_autogroup_restore' EXIT

# measure PART ROUND SESSION NAME: starts server NAME for PART (in a session of its own or
# sharing wrk's: SESSION; over HTTPS for the tls part) and measures each endpoint under wrk, a line
# each in $results.
measure() {
    local part="$1" round="$2" session="$3" name="$4" port endpoint scheme flags=()
    port="$(bench_free_port)"
    scheme="$(scheme_of "$part")"
    [[ "$scheme" == http ]] || tls_flags "$name"
    BENCH_SESSION="$session" start_server "$name" "$(app_of "$part")" "$WORKERS" "$port" "$part-r$round-$session-$name" \
        "$scheme://127.0.0.1:$port$(endpoints_of "$part" | awk '{print $1}')" "${flags[@]}"
    for endpoint in $(endpoints_of "$part"); do
        BENCH_SCHEME="$scheme" bench_wrk_row "$results" "$part" "$round" "$session" "$name" \
            "$(label "$name" "$WORKERS" "$(app_of "$part")")" "$port" "$endpoint"
    done
    bench_stop
}

# run_throughput PART: ROUNDS rounds of every server of PART in each of SESSIONS.
run_throughput() {
    local part="$1" round session name
    for round in $(seq "$ROUNDS"); do
        for session in $SESSIONS; do
            # shellcheck disable=SC2046 # the names, one a word
            for name in $(bench_round_order "$round" $(servers_of "$part")); do
                measure "$part" "$round" "$session" "$name"
            done
        done
    done
}

# median_of: the median of the numbers on stdin.
median_of() { bench_median; }

# transfer_times N COMMAND...: runs COMMAND (a curl with -w '%{time_total}') N times, one time a line.
transfer_times() {
    local n="$1" i
    shift
    for i in $(seq "$n"); do "$@"; done
}

# run_bodies: ROUNDS rounds of every server of the bodies part, 1 worker each.
run_bodies() {
    local part=bodies app servers round name port base log ticks0 ticks1 ticks2 up_times down_times echo_times hwm
    app="$(app_of bodies)"
    servers="$(servers_of bodies)"
    local body="$BENCH_OUT/body.bin" echo_body="$BENCH_OUT/echo.bin" size=$((BODY_MIB << 20))
    [[ -s "$body" && $(stat -c %s "$body") == "$size" ]] || head -c "$size" /dev/zero >"$body"
    [[ -s "$echo_body" ]] || head -c "$ECHO_BYTES" /dev/urandom >"$echo_body"
    local curl_up=(curl -fsS -o /dev/null -w '%{time_total}\n' -H 'Content-Type: application/octet-stream' --data-binary "@$body")
    local curl_echo=(curl -fsS -o /dev/null -w '%{time_total}\n' -H 'Content-Type: application/octet-stream' --data-binary "@$echo_body")
    local curl_down=(curl -fsS -o /dev/null -w '%{time_total}\n')
    for round in $(seq "$ROUNDS"); do
        # shellcheck disable=SC2086 # the names, one a word
        for name in $(bench_round_order "$round" $servers); do
            port="$(bench_free_port)"
            base="http://127.0.0.1:$port"
            log="bodies-r$round-$name"
            start_server "$name" "$app" 1 "$port" "$log" "$base/download?size=1"
            "${curl_up[@]}" "$base/upload" >/dev/null # warm-up, one each way
            "${curl_down[@]}" "$base/download?size=$size" >/dev/null
            bench_wait_quiet
            ticks0="$(bench_session_ticks "$bench_server_pid")"
            up_times="$(transfer_times "$COUNT" "${curl_up[@]}" "$base/upload")"
            ticks1="$(bench_session_ticks "$bench_server_pid")"
            down_times="$(transfer_times "$COUNT" "${curl_down[@]}" "$base/download?size=$size")"
            ticks2="$(bench_session_ticks "$bench_server_pid")"
            echo_times="$(transfer_times "$ECHOES" "${curl_echo[@]}" "$base/echo")"
            hwm="-"
            [[ "$name" != headway ]] || hwm="$(awk '/^VmHWM:/ {printf "%.1f", $2 / 1024}' "/proc/$bench_server_pid/status")"
            bench_stop
            local up down echo_s up_cpu down_cpu
            up="$(echo "$up_times" | median_of)"
            down="$(echo "$down_times" | median_of)"
            echo_s="$(echo "$echo_times" | median_of)"
            up_cpu=$(((ticks1 - ticks0) * 10 / COUNT))
            down_cpu=$(((ticks2 - ticks1) * 10 / COUNT))
            local up_mbs down_mbs
            up_mbs="$(awk -v s="$size" -v t="$up" 'BEGIN {printf "%.0f", s / t / 1e6}')"
            down_mbs="$(awk -v s="$size" -v t="$down" 'BEGIN {printf "%.0f", s / t / 1e6}')"
            printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$round" "$name" "$up_mbs" "$down_mbs" "$echo_s" "$up_cpu" "$down_cpu" \
                "$hwm" >>"$bodies"
            printf 'bodies       round %s  %-28s upload %5s MB/s  download %5s MB/s  5 MB echo %s s  CPU %s / %s ms a transfer  front peak RSS %s MiB\n' \
                "$round" "$(label "$name" 1)" "$up_mbs" "$down_mbs" "$echo_s" "$up_cpu" "$down_cpu" "$hwm"
        done
    done
}

{
    echo "# versus: $PARTS; $ROUNDS rounds, servers interleaved; wrk -t1 -c$CONNECTIONS -d$DURATION (warm-up $WARMUP)," \
        "$WORKERS workers, servers in sessions: $SESSIONS; bodies: 1 worker, $COUNT x $BODY_MIB MiB each way, $ECHOES echoes of 5 MB; nothing pinned"
    bench_versions
} | tee "$BENCH_OUT/header.txt"

for part in $PARTS; do
    servers_of "$part" >/dev/null
    if [[ "$part" == bodies ]]; then
        run_bodies
        continue
    fi
    if [[ "$part" == *-busy ]]; then
        start_neighbour
        BENCH_QUIET=101 run_throughput "$part"
        stop_neighbour
    else
        run_throughput "$part"
    fi
done

# The tables, and the results for docs/benchmarks.md.
BENCH_REPO="$BENCH_REPO" RESULTS="$RESULTS" PARTS="$PARTS" ROUNDS="$ROUNDS" DURATION="$DURATION" CONNECTIONS="$CONNECTIONS" \
    WORKERS="$WORKERS" WSGI_THREADS="$WSGI_THREADS" RACK_THREADS="$RACK_THREADS" COUNT="$COUNT" BODY_MIB="$BODY_MIB" \
    ECHOES="$ECHOES" \
    VERSIONS="$(for tool in headway uvicorn granian gunicorn httptools uvloop python puma ruby wrk; do
        echo "$tool=$(bench_version "$tool")"; done)" \
    python3 "$BENCH_REPO/bench/versus_tables.py" "$results" "$bodies" | tee "$BENCH_OUT/tables.txt"
echo "raw outputs and server logs: $BENCH_OUT"
