#!/usr/bin/env bash
# Static files: headway's front (`--static`) against nginx (Debian's, `sendfile on`), granian's
# static mount and, for scale, WhiteNoise under gunicorn, on files of 1 KiB, 100 KiB and 10 MiB
# under `wrk -t1 -c64`. Every server is started in a session of its own with 2 processes or
# workers (nginx `worker_processes 2`, granian `--workers 2`, gunicorn `-w 2`; headway `-w 2`,
# whose front, one thread on 2 CPUs, is what serves the files), ROUNDS rounds with the servers
# interleaved (their order reversed every other round); for each server the median round,
# every round's requests/s and headway's ratio to it in that round, p50 and p99, and the CPU a
# request of all the server's processes (headway's front apart too).
#
# The text tables go to stdout and bench/out/static/; the result to bench/results/static.json
# (bench/results.py; docs/benchmarks.md is built from it by `python3 bench/page.py`).
#
# Usage: bench/static.sh
# Env:   ROUNDS=5  DURATION=5s  WARMUP=2s  CONNECTIONS=64  SERVERS="headway nginx granian whitenoise"
#        NGINX=/usr/sbin/nginx  HEADWAY=path/to/headway
#        BENCH_VENV=bench/.venv (the peers, and WhiteNoise, from PyPI on first use)
#        BENCH_QUIET=25 BENCH_QUIET_WAIT=60 (bench/lib.sh)
#        RESULTS=0: no bench/results/ file (a trial run)
set -euo pipefail

# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"

ROUNDS="${ROUNDS:-5}"
DURATION="${DURATION:-5s}"
WARMUP="${WARMUP:-2s}"
CONNECTIONS="${CONNECTIONS:-64}"
SERVERS="${SERVERS:-headway nginx granian whitenoise}"
NGINX="${NGINX:-/usr/sbin/nginx}"
RESULTS="${RESULTS:-1}"
WORKERS=2
# The files measured, by name and size.
FILES="1k.bin:1024 100k.bin:102400 10m.bin:10485760"

bench_need wrk curl python3 setsid /usr/bin/time
[[ " $SERVERS " != *" nginx "* ]] || [[ -x "$NGINX" ]] || bench_die "no nginx at $NGINX: apt-get install nginx-light (or set NGINX, or leave nginx out of SERVERS)"
bench_find_headway
bench_python_peers
"$BENCH_VENV/bin/python" -c 'import whitenoise' 2>/dev/null || "$BENCH_VENV/bin/pip" install -q whitenoise >&2
BENCH_OUT="$BENCH_OUT/static"
bench_init
results="$BENCH_OUT/results.tsv"
: >"$results"

# The files, made once: random bytes, so that no server can compress them on the way.
DIR="$BENCH_OUT/files"
mkdir -p "$DIR"
for file in $FILES; do
    name="${file%%:*}" size="${file#*:}"
    [[ -s "$DIR/$name" && $(stat -c %s "$DIR/$name") == "$size" ]] || head -c "$size" /dev/urandom >"$DIR/$name"
done

label() {
    case "$1" in
        headway) echo "headway -w $WORKERS --static" ;;
        nginx) echo "nginx (sendfile on, $WORKERS workers)" ;;
        granian) echo "granian --workers $WORKERS static mount" ;;
        whitenoise) echo "WhiteNoise, gunicorn -w $WORKERS" ;;
        *) bench_die "unknown server $1 (known: headway nginx granian whitenoise)" ;;
    esac
}

# nginx_config PORT: a config for Debian's nginx serving $DIR at /static/, its files in a
# directory of their own.
nginx_config() {
    local port="$1" home="$BENCH_OUT/nginx-$1"
    mkdir -p "$home"
    local types=""
    [[ ! -r /etc/nginx/mime.types ]] || types="include /etc/nginx/mime.types;"
    cat >"$home/nginx.conf" <<NGINX
worker_processes $WORKERS;
daemon off;
pid $home/nginx.pid;
error_log $home/error.log;
events { worker_connections 1024; }
http {
    $types
    default_type application/octet-stream;
    sendfile on;
    tcp_nopush on;
    access_log off;
    client_body_temp_path $home/body;
    proxy_temp_path $home/proxy;
    fastcgi_temp_path $home/fastcgi;
    uwsgi_temp_path $home/uwsgi;
    scgi_temp_path $home/scgi;
    server {
        listen 127.0.0.1:$port;
        location /static/ { alias $DIR/; }
    }
}
NGINX
    echo "$home/nginx.conf"
}

# start_server NAME PORT LOG URL: NAME serving $DIR at /static/ on 127.0.0.1:PORT.
start_server() {
    local name="$1" port="$2" log="$3" url="$4"
    case "$name" in
        headway)
            bench_start "$log" "$url" "$HEADWAY" serve -w "$WORKERS" -b "127.0.0.1:$port" --static "/static=$DIR" \
                headway.demo:app ;;
        nginx) bench_start "$log" "$url" "$NGINX" -c "$(nginx_config "$port")" -e "$BENCH_OUT/nginx-$port/error.log" ;;
        granian)
            bench_start "$log" "$url" granian --interface wsgi --workers "$WORKERS" --host 127.0.0.1 --port "$port" \
                --static-path-route /static --static-path-mount "$DIR" headway.demo:app ;;
        whitenoise)
            STATIC_DIR="$DIR" bench_start "$log" "$url" gunicorn -w "$WORKERS" -b "127.0.0.1:$port" \
                --pythonpath "$BENCH_REPO/bench" static_whitenoise:app ;;
    esac
}

for name in $SERVERS; do label "$name" >/dev/null; done
{
    echo "# static files: ${FILES//:/ of } bytes; $ROUNDS rounds, servers interleaved; wrk -t1 -c$CONNECTIONS" \
        "-d$DURATION (warm-up $WARMUP), $WORKERS processes or workers each; nothing pinned"
    echo "# nginx $(bench_version nginx) ($NGINX), whitenoise $(bench_pip_version whitenoise)"
    bench_versions
} | tee "$BENCH_OUT/header.txt"

for round in $(seq "$ROUNDS"); do
    # shellcheck disable=SC2086 # the names, one a word
    for name in $(bench_round_order "$round" $SERVERS); do
        port="$(bench_free_port)"
        log="r$round-$name"
        start_server "$name" "$port" "$log" "http://127.0.0.1:$port/static/1k.bin"
        for file in $FILES; do
            endpoint="/static/${file%%:*}"
            url="http://127.0.0.1:$port$endpoint"
            curl -fsS -o "$BENCH_OUT/$log-got" "$url"
            cmp -s "$BENCH_OUT/$log-got" "$DIR/${file%%:*}" || bench_die "$name did not send $endpoint as it is"
            bench_wrk_row "$results" static "$round" own "$name" "$(label "$name")" "$port" "$endpoint"
        done
        bench_stop
    done
done

# The tables, and the result for docs/benchmarks.md, made as bench/versus.sh makes its own.
BENCH_REPO="$BENCH_REPO" RESULTS="$RESULTS" PARTS=static ROUNDS="$ROUNDS" DURATION="$DURATION" \
    CONNECTIONS="$CONNECTIONS" WORKERS="$WORKERS" COMMAND="$(bench_command ROUNDS=5 DURATION=5s CONNECTIONS=64 \
        "SERVERS=headway nginx granian whitenoise")" \
    VERSIONS="$(for tool in headway nginx granian gunicorn python wrk; do echo "$tool=$(bench_version "$tool")"; done
        echo "whitenoise=$(bench_pip_version whitenoise)")" \
    python3 "$BENCH_REPO/bench/versus_tables.py" "$results" /dev/null | tee "$BENCH_OUT/tables.txt"
echo "raw outputs and server logs: $BENCH_OUT"
