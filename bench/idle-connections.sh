#!/usr/bin/env bash
# What an idle keep-alive connection costs the front: opens N connections to headway serve (each
# sends one request, reads the answer, then stays open and idle) and reports the growth of the
# front's resident memory per connection, read from the control endpoint.
#   bench/idle-connections.sh [N]        (default 4000; HEADWAY_BIN, else headway on PATH)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
headway="${HEADWAY_BIN:-$(command -v headway)}"
count="${1:-4000}"
ulimit -n $((count + 1000))
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
control=$((port + 1))
PYTHONPATH="$root/python${PYTHONPATH:+:$PYTHONPATH}" setsid "$headway" serve -w 1 -t 4 \
    -b "127.0.0.1:$port" --control "127.0.0.1:$control" --log-level warn &
server=$!
trap 'kill -TERM -- -$server 2>/dev/null || true; wait $server 2>/dev/null || true' EXIT
for _ in $(seq 100); do curl -sf "127.0.0.1:$port/hello" >/dev/null && break; sleep 0.1; done

python3 - "$port" "127.0.0.1:$control" "$count" <<'PY'
import json, socket, sys, urllib.request

port, control, count = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
stats = lambda: json.load(urllib.request.urlopen(f"http://{control}/stats"))
before = stats()["front"]["rss_bytes"]
connections = []
for _ in range(count):
    connection = socket.create_connection(("127.0.0.1", port))
    connection.sendall(b"GET /hello HTTP/1.1\r\nHost: bench\r\n\r\n")
    connections.append(connection)
for connection in connections:
    connection.recv(4096)
after = stats()
print(f"{after['connections']['idle']} idle connections: front RSS {before / 2**20:.1f} MiB -> "
      f"{after['front']['rss_bytes'] / 2**20:.1f} MiB, {(after['front']['rss_bytes'] - before) / count / 1024:.1f} KiB each")
PY
