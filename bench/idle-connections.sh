#!/usr/bin/env bash
# What an idle connection costs the front: opens N connections to a fresh headway serve and reports
# the growth of the front's resident memory per connection, read from the control endpoint, then
# closes them and reports what the front holds a few seconds later (is the memory given back?).
# Two kinds, each on a server of its own: keep-alive connections that sent one request and read
# the answer, and connections that never send a byte (waiting for --header-timeout).
#   bench/idle-connections.sh [N]        (default 5000; HEADWAY_BIN, else headway on PATH)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
headway="${HEADWAY_BIN:-$(command -v headway)}"
count="${1:-5000}"
ulimit -n $((count + 1000))
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
server=""
trap '[[ -z "$server" ]] || { kill -TERM -- -$server 2>/dev/null || true; wait $server 2>/dev/null || true; }' EXIT

measure() {
    local kind="$1" port control
    port=$(free_port)
    control=$(free_port)
    PYTHONPATH="$root/python${PYTHONPATH:+:$PYTHONPATH}" setsid "$headway" serve -w 1 -t 4 \
        -b "127.0.0.1:$port" --control "127.0.0.1:$control" --header-timeout 60 --log-level warn &
    server=$!
    for _ in $(seq 600); do curl -sf "127.0.0.1:$port/hello" >/dev/null && break; sleep 0.1; done
    python3 - "$port" "127.0.0.1:$control" "$count" "$kind" <<'PY'
import json, socket, sys, time, urllib.request

port, control, count, kind = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4]
stats = lambda: json.load(urllib.request.urlopen(f"http://{control}/stats"))
mib = lambda size: f"{size / 2**20:.1f} MiB"


def settle(open_now):
    """Waits until the front counts `open_now` open connections, then a few seconds more (the
    allocator gives back memory held free a second, checked every second); returns its RSS."""
    for _ in range(600):
        if stats()["connections"]["open"] == open_now:
            break
        time.sleep(0.05)
    time.sleep(3)
    return stats()["front"]["rss_bytes"]


before = settle(0)
connections = [socket.create_connection(("127.0.0.1", port)) for _ in range(count)]
if kind == "keep-alive":
    for connection in connections:
        connection.sendall(b"GET /hello HTTP/1.1\r\nHost: bench\r\n\r\n")
    for connection in connections:
        connection.recv(4096)
held = settle(count)
for connection in connections:
    connection.close()
after = settle(0)
what = "idle keep-alive connections" if kind == "keep-alive" else "connections that never sent a byte"
print(f"{count} {what}: front RSS {mib(before)} -> {mib(held)}, {(held - before) / count / 1024:.1f} KiB each; "
      f"{mib(after)} once closed")
PY
    kill -TERM -- "-$server" 2>/dev/null || true
    wait "$server" 2>/dev/null || true
    server=""
}

measure keep-alive
measure silent
