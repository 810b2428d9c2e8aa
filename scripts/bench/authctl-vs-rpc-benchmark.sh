#!/usr/bin/env bash
# Shows whether `authctl bench` is the bottleneck: rpc-benchmark's own client (in process with its
# server, then as a separate process) and authctl bench (a separate process) drive the same
# Health/Check server at 1, 16 and 64 calls in flight on one connection. Release builds; every run is bounded (SECONDS per row, default 5).
#
# Usage: scripts/bench/authctl-vs-rpc-benchmark.sh [SECONDS]
set -euo pipefail
export AUTH_BENCHMARKS=1   # the benchmark executables are in the package only with it (Package.swift)
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
seconds="${1:-5}"

swift build -c release --product rpc-benchmark >&2
swift build -c release --product authctl >&2
bin=.build/release

echo "## rpc-benchmark: its own client, in process"
"$bin/rpc-benchmark" --no-tls --rpc-only --concurrency 1,16,64 --seconds "$seconds" --warmup 1

export AUTH_RPC_SECRET
AUTH_RPC_SECRET="$(head -c 32 /dev/urandom | base64)"
log="$(mktemp)"
"$bin/rpc-benchmark" --serve 0 --serve-seconds $(( (seconds + 2) * 6 + 20 )) >"$log" 2>&1 &
server=$!
trap 'kill "$server" 2>/dev/null || true; rm -f "$log"' EXIT
for _ in $(seq 100); do
    grep -q "serving Health/Check" "$log" && break
    sleep 0.1
done
address="$(sed -n 's/^serving Health\/Check on \([^ ]*\) .*/\1/p' "$log")"
[ -n "$address" ] || { echo "the server did not start:" >&2; cat "$log" >&2; exit 1; }

echo
echo "## rpc-benchmark --target: its own client in a separate process, driving rpc-benchmark --serve ($address)"
"$bin/rpc-benchmark" --target "$address" --concurrency 1,16,64 --seconds "$seconds" --warmup 1

echo
echo "## authctl bench: a separate process driving the same rpc-benchmark --serve"
echo
echo "| in flight | calls/s | p50 | p99 |"
echo "|---:|---:|---:|---:|"
for level in 1 16 64; do
    "$bin/authctl" bench "$address" auth.health.v1.Health/Check --concurrency "$level" \
        --duration "$seconds" --warmup 1 --json |
        python3 -c '
import json, sys
r = json.load(sys.stdin)
fmt = lambda us: "%.2f ms" % (us / 1000) if us >= 1000 else "%.0f µs" % us
l = r["latency_us"]
assert [s["code"] for s in r["statuses"]] == ["OK"], r["statuses"]
print("| %d | {:,} | %s | %s |".format(round(r["calls_per_second"])) % (r["concurrency"], fmt(l["p50"]), fmt(l["p99"])))'
done
