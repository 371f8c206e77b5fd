#!/usr/bin/env bash
# Coverage-guided fuzzing of the HTTP/1 parsers every part of headway shares (crates/http1),
# with cargo fuzz (libFuzzer) on the targets in fuzz/: a request head, a worker's response head,
# a chunked body. Each target asserts the framing properties the front relies on (one framing,
# no bare CR or LF in an accepted response head, the same body whichever way the bytes arrive)
# besides not panicking. Runs each target for SECONDS_EACH, keeps the corpus in bench/out/fuzz/,
# and writes bench/results/fuzz.json (executions, corpus, crashes). A crash's input is kept in
# fuzz/artifacts/ and the script fails.
#
# Usage: bench/fuzz.sh
# Env:   SECONDS_EACH=600  TARGETS="request_head response_head chunked_body"
#        Needs a nightly Rust toolchain (rustup); installs cargo-fuzz (pinned) when missing.
set -euo pipefail

# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"

SECONDS_EACH="${SECONDS_EACH:-600}"
TARGETS="${TARGETS:-request_head response_head chunked_body}"
CARGO_FUZZ_VERSION=0.13.2

rustup run nightly rustc --version >/dev/null 2>&1 || bench_die "a nightly toolchain is needed: rustup toolchain install nightly"
if [[ "$(cargo fuzz --version 2>/dev/null | awk '{print $2}')" != "$CARGO_FUZZ_VERSION" ]]; then
    bench_say "installing cargo-fuzz $CARGO_FUZZ_VERSION"
    cargo +nightly install cargo-fuzz --locked --version "$CARGO_FUZZ_VERSION" >&2
fi
BENCH_OUT="$BENCH_OUT/fuzz"
mkdir -p "$BENCH_OUT"
cd "$BENCH_REPO/fuzz"
cargo +nightly fuzz build -O >&2

rows=()
failed=0
for target in $TARGETS; do
    corpus="$BENCH_OUT/corpus/$target"
    mkdir -p "$corpus"
    log="$BENCH_OUT/$target.log"
    bench_say "$target for ${SECONDS_EACH} s"
    status=0
    cargo +nightly fuzz run "$target" -O "$corpus" -- -max_total_time="$SECONDS_EACH" -print_final_stats=1 \
        >"$log" 2>&1 || status=$?
    runs="$(awk '/stat::number_of_executed_units/ {print $NF}' "$log" | tail -1)"
    cover="$(grep -o 'cov: [0-9]*' "$log" | tail -1 | awk '{print $2}')"
    inputs="$(find "$corpus" -type f | wc -l)"
    crashes=0
    if ((status != 0)); then
        crashes=1
        failed=1
        bench_say "$target found a failing input: see $log and fuzz/artifacts/$target/"
    fi
    rows+=("[\"$target\", $SECONDS_EACH, ${runs:-0}, ${cover:-0}, $inputs, $crashes]")
done

rows_json="$(IFS=,; echo "${rows[*]}")"
python3 "$BENCH_REPO/bench/results.py" fuzz <<JSON
{
  "title": "Fuzzing the HTTP/1 parsers",
  "order": 90,
  "command": "$(bench_command SECONDS_EACH=600 "TARGETS=request_head response_head chunked_body")",
  "versions": {"headway": "$(git -C "$BENCH_REPO" rev-parse --short HEAD)", "cargo-fuzz": "$CARGO_FUZZ_VERSION", "rustc": "$(rustup run nightly rustc --version | awk '{print $2}')"},
  "summary": "libFuzzer ran each parser of crates/http1 for ${SECONDS_EACH} s, checking besides panics that an accepted head is framed one way only, that an accepted response head has no bare CR, LF or NUL, and that a chunked body decodes the same whole and byte by byte. Crashes: $(if ((failed)); then echo 'yes, see the table'; else echo 'none'; fi).",
  "tables": [{"title": "", "columns": ["target", "seconds", "executions", "coverage (edges)", "corpus inputs", "crashes"], "rows": [$rows_json]}],
  "notes": ["The targets are fuzz/fuzz_targets/*.rs; the property tests in crates/http1/tests/properties.rs check the same properties on every test run."]
}
JSON
exit "$failed"
