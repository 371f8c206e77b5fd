# Shared helpers for the bench/*.sh scripts: where headway and the Python peers are, free
# ports, starting a server in a session of its own and stopping all of it, medians.
#
# Source it from a script in bench/ with `set -euo pipefail` on. Every server a script
# starts goes through bench_start/bench_stop, and bench_init installs an EXIT trap that
# stops whatever is still running, so an interrupted run leaves no process behind.

BENCH_REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BENCH_OUT="${BENCH_OUT:-$BENCH_REPO/bench/out}"
BENCH_VENV="${BENCH_VENV:-$BENCH_REPO/bench/.venv}"
BENCH_PYTHON_PEERS=(gunicorn granian "uvicorn[standard]")
# How the scripts ask a server whether it is up; a script serving HTTPS with a throwaway
# certificate adds -k.
BENCH_CURL=(curl)

bench_say() { echo "$(basename "$0"): $*" >&2; }
bench_die() { bench_say "$*"; exit 1; }

# The pid of the server now running (with BENCH_SESSION=own also its process group and session
# id), the BENCH_SESSION it was started with, and its log.
bench_server_pid=""
bench_server_session=own
bench_server_log=""

bench_need() {
    local tool
    for tool in "$@"; do
        command -v "$tool" >/dev/null || bench_die "$tool is missing"
    done
}

# Sets HEADWAY: $HEADWAY if given, else `headway` on PATH, else the repo's release build.
# A headway run from the repo needs the repo's python/ on PYTHONPATH for its worker; an
# installed one (pip install .) brings its own package, so PYTHONPATH is left alone. The
# worker's interpreter is fixed in HEADWAY_PYTHON, so the peers' venv put on PATH later does
# not change it.
bench_find_headway() {
    if [[ -z "${HEADWAY:-}" ]]; then
        if command -v headway >/dev/null; then
            HEADWAY="$(command -v headway)"
        else
            HEADWAY="${CARGO_TARGET_DIR:-$BENCH_REPO/target}/release/headway"
        fi
    fi
    [[ -x "$HEADWAY" ]] || bench_die "no headway binary at $HEADWAY: build it (cargo build --release --bin headway) or set HEADWAY"
    # The worker's interpreter, as headway picks it: the python3 next to the binary, else PATH's.
    local python="${HEADWAY_PYTHON:-}"
    if [[ -z "$python" ]]; then
        python="$(dirname "$HEADWAY")/python3"
        [[ -x "$python" ]] || python="python3"
    fi
    HEADWAY_PYTHON="$("$python" -c 'import sys; print(sys.executable)')" ||
        bench_die "no Python interpreter for headway's worker ($python)"
    export HEADWAY_PYTHON
    if ! "$HEADWAY_PYTHON" -c 'import headway.demo' 2>/dev/null; then
        export PYTHONPATH="$BENCH_REPO/python${PYTHONPATH:+:$PYTHONPATH}"
    fi
}

# Makes sure the Python peers are in $BENCH_VENV (created and filled from PyPI on first use)
# and puts its bin/ first on PATH. The peers import the demo app from the repo.
bench_python_peers() {
    if [[ ! -x "$BENCH_VENV/bin/granian" || ! -x "$BENCH_VENV/bin/gunicorn" || ! -x "$BENCH_VENV/bin/uvicorn" ]]; then
        bench_say "installing ${BENCH_PYTHON_PEERS[*]} into $BENCH_VENV"
        python3 -m venv "$BENCH_VENV"
        "$BENCH_VENV/bin/pip" install -q "${BENCH_PYTHON_PEERS[@]}" >&2
    fi
    export PATH="$BENCH_VENV/bin:$PATH"
    if ! "$BENCH_VENV/bin/python" -c 'import headway.demo' 2>/dev/null; then
        export PYTHONPATH="$BENCH_REPO/python${PYTHONPATH:+:$PYTHONPATH}"
    fi
}

bench_pip_version() { "$BENCH_VENV/bin/python" -m pip show "$1" 2>/dev/null | awk '/^Version:/ {print $2}'; }

# bench_version TOOL: the version of headway ($HEADWAY --version, without the name), of a peer
# or of a load tool, as the tool or its package says; "?" when it is not installed.
bench_version() {
    local version=""
    case "$1" in
        headway) version="$("$HEADWAY" --version 2>/dev/null | sed 's/^headway //')" ;;
        puma) version="$(puma --version 2>/dev/null | awk '{print $NF}')" ;;
        ruby) version="$(ruby -e 'print RUBY_VERSION' 2>/dev/null)" ;;
        gunicorn | granian | uvicorn | httptools | uvloop) version="$(bench_pip_version "$1")" ;;
        python) version="$("$BENCH_VENV/bin/python" -c 'import platform; print(platform.python_version())' 2>/dev/null)" ;;
        nginx) version="$(/usr/sbin/nginx -v 2>&1 | sed -n 's/^nginx version: [^/]*\///p')" ;;
        h2load) version="$(dpkg-query -W -f='${Version}' nghttp2-client 2>/dev/null)" ;;
        *) version="$(dpkg-query -W -f='${Version}' "$1" 2>/dev/null)" ;;
    esac
    echo "${version:-?}"
}

# Header lines of a run's output: the headway measured, and the machine.
bench_headway_line() { echo "# headway $(bench_version headway) ($HEADWAY)"; }
bench_machine_line() {
    echo "# machine: $(lscpu | awk -F: '/^Model name/ {gsub(/^ +/, "", $2); print $2}'), $(nproc) CPUs, $(uname -r)"
}

# One line per peer with its version, for the header of a run's output.
bench_versions() {
    bench_headway_line
    echo "# puma $(bench_version puma) ($(command -v puma)), ruby $(bench_version ruby)"
    echo "# gunicorn $(bench_version gunicorn), granian $(bench_version granian)," \
        "uvicorn $(bench_version uvicorn) (httptools $(bench_version httptools), uvloop $(bench_version uvloop))," \
        "python $(bench_version python)"
    echo "# hey $(bench_version hey), wrk $(bench_version wrk)"
    bench_autogroup_line
    bench_machine_line
}

# bench_result NAME TOOLS OPTION...: writes the run's result, bench/results/NAME.json, for
# docs/benchmarks.md: bench/results.py with the OPTIONs (--title, --order, --command, --summary,
# --table TITLE FILE.tsv, --note) and the version of each of the space-separated TOOLS.
bench_result() {
    local name="$1" tools="$2" tool versions=()
    shift 2
    for tool in $tools; do versions+=(--version "$tool" "$(bench_version "$tool")"); done
    python3 "$BENCH_REPO/bench/results.py" "$name" "${versions[@]}" "$@"
}

# bench_command VAR=DEFAULT...: the command that runs this script again with this run's
# settings, for its result: each VAR whose value is not its DEFAULT, then the script.
bench_command() {
    local setting name value words=()
    for setting in "$@"; do
        name="${setting%%=*}"
        value="${!name}"
        [[ "$value" == "${setting#*=}" ]] && continue
        [[ "$value" == *" "* ]] && value="\"$value\""
        words+=("$name=$value")
    done
    words+=("bench/$(basename "$0")")
    echo "${words[*]}"
}

bench_free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# bench_start NAME URL COMMAND...: runs COMMAND, logging to $BENCH_OUT/NAME.log, and polls URL
# until it answers 200 (at most BENCH_BOOT_SECS, default 60). With BENCH_SESSION=own (the
# default) COMMAND gets a session of its own, as a server started from its own terminal or as a
# systemd service runs; with BENCH_SESSION=shared it stays in the script's session, the load
# tool's. With the kernel's autogroup on, a session is one scheduling group: on a machine with few
# CPUs and the load tool on it, which of the two applies moves requests/s (not CPU a request).
bench_start() {
    local name="$1" url="$2"
    shift 2
    bench_server_log="$BENCH_OUT/$name.log"
    bench_server_session="${BENCH_SESSION:-own}"
    case "$bench_server_session" in
        own) setsid "$@" >"$bench_server_log" 2>&1 </dev/null & ;;
        shared) "$@" >"$bench_server_log" 2>&1 </dev/null & ;;
        *) bench_die "BENCH_SESSION is own or shared, not ${BENCH_SESSION}" ;;
    esac
    bench_server_pid=$!
    local deadline=$((SECONDS + ${BENCH_BOOT_SECS:-60}))
    until "${BENCH_CURL[@]}" -fs -o /dev/null --max-time 2 "$url"; do
        if ! kill -0 "$bench_server_pid" 2>/dev/null; then
            tail -n 20 "$bench_server_log" >&2
            bench_server_pid=""
            bench_die "$name exited before answering $url (log: $bench_server_log)"
        fi
        if ((SECONDS >= deadline)); then
            tail -n 20 "$bench_server_log" >&2
            bench_stop
            bench_die "$name did not answer $url within ${BENCH_BOOT_SECS:-60} s"
        fi
        sleep 0.2
    done
}

# bench_header TEXT...: a headway-only run's header, to stdout and $BENCH_OUT/header.txt: "# "
# and TEXT, then the headway, scheduling and machine lines.
bench_header() {
    {
        echo "# $*"
        bench_headway_line
        bench_autogroup_line
        bench_machine_line
    } | tee "$BENCH_OUT/header.txt"
}

# bench_example PACKAGE NAME: builds the release example NAME of PACKAGE and prints its path.
bench_example() {
    bench_say "building $2"
    (cd "$BENCH_REPO" && cargo build --release -q -p "$1" --example "$2") >&2
    echo "${CARGO_TARGET_DIR:-$BENCH_REPO/target}/release/examples/$2"
}

# bench_certificate CERT KEY: a throwaway self-signed P-256 certificate for 127.0.0.1, and its
# key, for a run's HTTPS servers (one for every server of a run, so that none pays more for its
# key). Sets BENCH_CURL to take it in the servers' readiness probes.
bench_certificate() {
    bench_need openssl
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=127.0.0.1 \
        -addext subjectAltName=IP:127.0.0.1 -keyout "$2" -out "$1" 2>/dev/null ||
        bench_die "openssl could not make a certificate in $1"
    BENCH_CURL=(curl -k)
}

# Builds crates/hop/examples/stub_worker.rs, a worker that answers every request on the hop at
# once (the front's own cost, with workers that cost nothing), and sets STUB to it.
bench_stub_worker() {
    STUB="$(bench_example headway-hop stub_worker)"
}

# bench_wait_workers URL N: after a multi-process server first answers, its other workers
# may still be booting. Polls URL on fresh connections until N different X-Worker-Pid
# values have answered (at most BENCH_BOOT_SECS); warns if they never do. An app that does not
# name its worker (the minimal hello worlds) cannot be waited for so: its first answer returns,
# and the run's warm-up gives the others their time.
bench_wait_workers() {
    local url="$1" want="$2" pids="" head deadline=$((SECONDS + ${BENCH_BOOT_SECS:-60}))
    while (($(printf '%s' "$pids" | sort -u | grep -c .) < want)); do
        if ((SECONDS >= deadline)); then
            bench_say "only $(printf '%s' "$pids" | sort -u | grep -c .) of $want workers answered $url"
            return 0
        fi
        head="$("${BENCH_CURL[@]}" -s -D - -o /dev/null --max-time 2 "$url" | tr -d '\r')"
        [[ -z "$head" ]] || grep -qi '^x-worker-pid:' <<<"$head" || return 0
        pids+="$(awk 'tolower($1) == "x-worker-pid:" {print $2}' <<<"$head")"$'\n'
    done
}

# Live processes of the server $1 (zombies have exited already; init reaps them): its session's
# when it leads one, else it and its descendants.
bench_session_pids() {
    ps -eo pid=,ppid=,sid=,stat= | awk -v top="$1" '
        $4 !~ /^Z/ {pid[NR] = $1; parent[$1] = $2; sid[$1] = $3}
        END {
            for (i in pid) {
                p = pid[i]
                if (sid[top] == top) { if (sid[p] == top) print p; continue }
                for (q = p; q != "" && q > 1; q = parent[q]) if (q == top) { print p; break }
            }
        }'
}

# Stops the running server: SIGTERM to its process group (to it alone when it shares the
# script's session), SIGKILL after BENCH_STOP_SECS (default 15), then SIGKILL to anything of it
# left (a worker in a process group of its own that outlived the server; reported, since a server
# should stop its children).
bench_stop() {
    local pid="$bench_server_pid" target
    [[ -n "$pid" ]] || return 0
    bench_server_pid=""
    # A server sharing the script's session has no process group of its own to signal; its
    # children, orphaned once it exits, are listed before.
    local started
    started="$(bench_session_pids "$pid" | paste -sd, -)"
    target="-$pid"
    [[ "$bench_server_session" == own ]] || target="$pid"
    kill -TERM -- "$target" 2>/dev/null || true
    local deadline=$((SECONDS + ${BENCH_STOP_SECS:-15}))
    while kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then
        bench_say "server $pid still running ${BENCH_STOP_SECS:-15} s after SIGTERM: SIGKILL"
        kill -KILL -- "$target" 2>/dev/null || true
    fi
    wait "$pid" 2>/dev/null || true
    local left
    sleep 0.2
    left="$(bench_session_pids "$pid" | paste -sd, -)"
    [[ "$bench_server_session" == own ]] ||
        left="$({ ps -o pid=,stat= -p "${started:-$pid}" 2>/dev/null || true; } | awk '$2 !~ /^Z/ {print $1}' |
            paste -sd, -)"
    if [[ -n "$left" ]]; then
        bench_say "processes left behind by server $pid, killing them:"
        ps -o pid,pgid,args -p "$left" >&2 || true
        kill -KILL ${left//,/ } 2>/dev/null || true
    fi
}

# CPU ticks (1/100 s) the whole machine spent busy, steal included, since boot.
bench_machine_ticks() { awk '/^cpu / {print $2 + $3 + $4 + $7 + $8 + $9}' /proc/stat; }

# CPU ticks used so far by the processes of session $1 (the server and its workers).
bench_session_ticks() {
    local pid
    for pid in $(bench_session_pids "$1"); do cat "/proc/$pid/stat" 2>/dev/null || true; done |
        awk '{sub(/^.*\) /, ""); t += $12 + $13 + $14 + $15} END {print t + 0}'
}

# Before a run, waits (at most BENCH_QUIET_WAIT seconds, default 60) until the machine,
# with the server idle, is less than BENCH_QUIET percent busy (default 25) over a second:
# on a shared machine, other tenants' builds would otherwise be measured too.
bench_wait_quiet() {
    local deadline=$((SECONDS + ${BENCH_QUIET_WAIT:-60})) before busy
    while :; do
        before="$(bench_machine_ticks)"
        sleep 1
        busy=$(($(bench_machine_ticks) - before))
        ((busy * 100 < ${BENCH_QUIET:-25} * 100 * $(nproc))) && return 0
        if ((SECONDS >= deadline)); then
            bench_say "machine still $((busy / $(nproc)))% busy after ${BENCH_QUIET_WAIT:-60} s of waiting; measuring anyway"
            return 0
        fi
    done
}

# bench_measure OUTPUT COMMAND...: runs a load tool with its stdout in OUTPUT, and sets
# BENCH_SERVER_TICKS to the CPU ticks the server's processes used meanwhile and
# BENCH_OTHER_CPU to the share of the machine's CPU (percent of all cores) that neither the
# server nor the load tool used meanwhile: other tenants of this shared machine, and steal.
# A run with a high figure measured a busy machine, not the server.
bench_measure() {
    local output="$1"
    shift
    local machine server
    bench_wait_quiet
    machine="$(bench_machine_ticks)"
    server="$(bench_session_ticks "$bench_server_pid")"
    /usr/bin/time -f '%e %U %S' -o "$output.time" "$@" >"$output"
    machine=$(($(bench_machine_ticks) - machine))
    server=$(($(bench_session_ticks "$bench_server_pid") - server))
    BENCH_SERVER_TICKS="$server"
    BENCH_OTHER_CPU="$(awk -v m="$machine" -v s="$server" -v n="$(nproc)" '
        {tool = ($2 + $3) * 100; other = m - s - tool; if (other < 0) other = 0
         printf "%.0f", 100 * other / ($1 * 100 * n)}' "$output.time")"
}

# Creates $BENCH_OUT and stops the running server on any exit, including Ctrl-C; applies
# BENCH_AUTOGROUP (below) for the run and puts the kernel's setting back on exit.
bench_init() {
    mkdir -p "$BENCH_OUT"
    bench_autogroup
    trap 'bench_stop; bench_autogroup_restore' EXIT
    trap 'exit 130' INT TERM
}

# How the scheduler shares the CPUs between the server and the load tool. Every server runs in
# a session of its own (bench_start), and with the kernel's autogroup on (Linux's default) a
# session is one scheduling group, as a service in its own cgroup is: the server's processes
# together get a fair share against the load tool's, not one share each. BENCH_AUTOGROUP=off
# turns autogroup off for the run (root only; restored at exit), so every thread is scheduled
# on its own, as on a host where the server and everything else share one group.
# BENCH_AUTOGROUP=on (the default) leaves the kernel as it is; the header says which applied.
BENCH_AUTOGROUP_FILE=/proc/sys/kernel/sched_autogroup_enabled
bench_autogroup_saved=""
bench_autogroup() {
    case "${BENCH_AUTOGROUP:-on}" in
        on) ;;
        off)
            [[ -w "$BENCH_AUTOGROUP_FILE" ]] || bench_die "BENCH_AUTOGROUP=off needs a writable $BENCH_AUTOGROUP_FILE (root)"
            bench_autogroup_saved="$(cat "$BENCH_AUTOGROUP_FILE")"
            echo 0 >"$BENCH_AUTOGROUP_FILE"
            ;;
        *) bench_die "BENCH_AUTOGROUP is on or off, not ${BENCH_AUTOGROUP}" ;;
    esac
}
bench_autogroup_restore() {
    [[ -z "$bench_autogroup_saved" ]] || echo "$bench_autogroup_saved" >"$BENCH_AUTOGROUP_FILE"
    bench_autogroup_saved=""
}
# One line for a run's header: whether the server's session was one scheduling group.
bench_autogroup_line() {
    local state="absent"
    [[ -r "$BENCH_AUTOGROUP_FILE" ]] && state="$(cat "$BENCH_AUTOGROUP_FILE")"
    case "$state" in
        1) echo "# scheduling: autogroup on, the server's session is one scheduling group (BENCH_AUTOGROUP=off to change)" ;;
        0) echo "# scheduling: autogroup off, every thread scheduled on its own" ;;
        *) echo "# scheduling: this kernel has no autogroup" ;;
    esac
}

# Median of the numbers on stdin (one per line); "-" when there are none.
bench_median() {
    sort -g | awk '{v[NR] = $1} END {if (NR == 0) print "-"; else print v[int((NR + 1) / 2)]}'
}

# bench_column_median FILE NAME COLUMN: the median of COLUMN over the rows of the tab-separated
# FILE whose second column (the server) is NAME; bench_column_all: every one, rounded, in order.
bench_column_median() { awk -F'\t' -v n="$2" -v c="$3" '$2 == n {print $c}' "$1" | bench_median; }
bench_column_all() { awk -F'\t' -v n="$2" -v c="$3" '$2 == n {printf "%s%.0f", sep, $c; sep = " "}' "$1"; }

# ms(TEXT) for the scripts' awk programs (awk "$BENCH_AWK_MS"'...'): a duration as wrk and h2load
# print it (250us, 1.50ms, 2.00s, 1.2m), in milliseconds; "nan" for anything else.
BENCH_AWK_MS='function ms(text) {
    if (text ~ /us$/) return text * 0.001
    if (text ~ /ms$/) return text + 0
    if (text ~ /m$/) return text * 60000
    if (text ~ /s$/) return text * 1000
    return "nan"
}'

# bench_wrk_figures FILE: "rps p50_ms p99_ms errors requests" from one `wrk --latency` output
# (errors = non-2xx/3xx responses plus socket errors).
bench_wrk_figures() {
    awk "$BENCH_AWK_MS"'
        BEGIN {rps = p50 = p99 = "nan"}
        / requests in / {requests = $1}
        /^Requests\/sec:/ {rps = $2}
        /^ +50%/ {p50 = ms($2)}
        /^ +99%/ {p99 = ms($2)}
        /Non-2xx or 3xx responses:/ {errors += $NF}
        /Socket errors:/ {gsub(",", ""); errors += $4 + $6 + $8 + $10}
        END {printf "%s %s %s %d %d\n", rps, p50, p99, errors, requests}
    ' "$1"
}

# CPU ticks (1/100 s) of the running server's first process alone: headway's front.
bench_front_ticks() { awk '{sub(/^.*\) /, ""); print $12 + $13}' "/proc/$bench_server_pid/stat" 2>/dev/null || echo 0; }

# bench_wrk_row RESULTS PART ROUND SESSION NAME LABEL PORT ENDPOINT: warms the running server up
# with wrk on ENDPOINT (over BENCH_SCHEME: http, or https for a server serving HTTPS), measures it
# (`wrk --latency`, CONNECTIONS, WARMUP and DURATION) and appends the run's line to RESULTS as
# bench/versus_tables.py reads it: part, round, server, endpoint, requests/s, p50 ms, p99 ms,
# errors, CPU us a request of all the server's processes, of headway's front alone ("-" for another
# server), other CPU %, session. Prints it for a reader.
bench_wrk_row() {
    local results="$1" part="$2" round="$3" session="$4" name="$5" label="$6" port="$7" endpoint="$8"
    local url="${BENCH_SCHEME:-http}://127.0.0.1:$port$endpoint" tag raw front rps p50 p99 errors requests cpu_us front_us
    tag="$part-r$round-$session-$name${endpoint//\//-}"
    wrk -t1 -c"$CONNECTIONS" -d"$WARMUP" "$url" >"$BENCH_OUT/$tag-warmup.txt"
    raw="$BENCH_OUT/$tag.txt"
    front="$(bench_front_ticks)"
    bench_measure "$raw" wrk -t1 -c"$CONNECTIONS" -d"$DURATION" --latency "$url"
    front=$(($(bench_front_ticks) - front))
    read -r rps p50 p99 errors requests < <(bench_wrk_figures "$raw")
    cpu_us="$(awk -v t="$BENCH_SERVER_TICKS" -v n="$requests" 'BEGIN {printf "%.0f", n ? t * 10000 / n : 0}')"
    front_us="-"
    [[ "$name" != headway* ]] || front_us="$(awk -v t="$front" -v n="$requests" 'BEGIN {printf "%.0f", n ? t * 10000 / n : 0}')"
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$part" "$round" "$name" "$endpoint" "$rps" "$p50" "$p99" \
        "$errors" "$cpu_us" "$front_us" "$BENCH_OTHER_CPU" "$session" >>"$results"
    printf '%-12s round %s  %-6s %-48s %-18s %8.0f req/s  p50 %7.2f ms  p99 %7.2f ms  errors %s  CPU %s us/req (front %s)  other CPU %s%%\n' \
        "$part" "$round" "$session" "$label" "$endpoint" "$rps" "$p50" "$p99" "$errors" "$cpu_us" "$front_us" "$BENCH_OTHER_CPU"
}

# bench_round_order ROUND NAMES...: the names in the order round ROUND runs them: as given in odd
# rounds, reversed in even ones, so that no server always runs right after the same other.
bench_round_order() {
    local round="$1"
    shift
    if ((round % 2)); then echo "$@"; else printf '%s\n' "$@" | tac | tr '\n' ' '; fi
}
