#!/usr/bin/env bash
# Renders the lab's HTML report in headless Chromium and checks the screenshot is a real picture,
# so we know the charts draw without a network. Usage:
#   bench/lab-report-screenshot.sh [DIR]        (default: a temporary directory, kept on failure)
# Needs: a built headway (HEADWAY_BIN, else target/release/headway, else headway on PATH), the
# headway Python package importable (e.g. PYTHONPATH=python), chromium (Debian's package), python3.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
headway="${HEADWAY_BIN:-}"
if [[ -z "$headway" ]]; then
    if [[ -x "$root/target/release/headway" ]]; then headway="$root/target/release/headway"; else headway="$(command -v headway)"; fi
fi
dir="${1:-$(mktemp -d /tmp/headway-lab-report.XXXXXX)}"
mkdir -p "$dir"
dir="$(cd "$dir" && pwd)"

# A quick run with the charts of each kind: bars and histograms (keepalive-tail), lines of
# latency against connections (long-tail-sweep), outcome bars (overload).
"$headway" lab run keepalive-tail long-tail-sweep overload --quick --servers "${LAB_SERVERS:-headway}" \
    --report "$dir" > "$dir/tables.txt"

profile="$(mktemp -d /tmp/headway-lab-chromium.XXXXXX)"
trap 'rm -rf "$profile"' EXIT
timeout 120 chromium --headless --no-sandbox --disable-gpu --disable-background-networking \
    --disable-component-update --disable-sync --no-first-run --user-data-dir="$profile" \
    --screenshot="$dir/report.png" --window-size=1280,2400 "file://$dir/index.html" > "$dir/chromium.log" 2>&1

# A real picture: a PNG of the window's size whose pixels are not all one colour, with enough
# non-white pixels to be charts and tables rather than an empty page.
python3 - "$dir/report.png" <<'PY'
import struct, sys, zlib

path = sys.argv[1]
data = open(path, "rb").read()
if data[:8] != b"\x89PNG\r\n\x1a\n":
    sys.exit(f"{path}: not a PNG")
chunks, pos = {}, 8
while pos < len(data):
    length, kind = struct.unpack(">I4s", data[pos:pos + 8])
    chunks.setdefault(kind, []).append(data[pos + 8:pos + 8 + length])
    pos += 12 + length
width, height, depth, colour = struct.unpack(">IIBB", chunks[b"IHDR"][0][:10])
if (width, height) != (1280, 2400) or depth != 8 or colour not in (2, 6):
    sys.exit(f"{path}: unexpected image {width}x{height}, depth {depth}, colour type {colour}")
channels = 3 if colour == 2 else 4
raw = zlib.decompress(b"".join(chunks[b"IDAT"]))
stride = width * channels
rows, previous = [], bytearray(stride)
for y in range(height):
    kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
    for x in range(stride):
        left = line[x - channels] if x >= channels else 0
        up, corner = previous[x], previous[x - channels] if x >= channels else 0
        if kind == 1: line[x] = (line[x] + left) & 255
        elif kind == 2: line[x] = (line[x] + up) & 255
        elif kind == 3: line[x] = (line[x] + (left + up) // 2) & 255
        elif kind == 4:
            p = left + up - corner
            pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
            line[x] = (line[x] + (left if pa <= pb and pa <= pc else up if pb <= pc else corner)) & 255
    rows.append(bytes(line))
    previous = line
colours, ink = set(), 0
for line in rows[::4]:
    for x in range(0, stride, channels * 4):
        pixel = line[x:x + 3]
        colours.add(pixel)
        ink += pixel != b"\xff\xff\xff"
sampled = (height // 4) * (width // 4)
print(f"{path}: {width}x{height}, {len(colours)} colours, {100 * ink / sampled:.1f} % non-white")
if len(colours) < 8 or ink < sampled // 50:
    sys.exit(f"{path}: looks blank ({len(colours)} colours, {ink} non-white samples)")
PY
grep -c "<svg" "$dir/index.html" | xargs -I{} echo "$dir/index.html: {} charts"
echo "ok: $dir/report.png"
