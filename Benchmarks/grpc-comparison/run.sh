#!/usr/bin/env bash
# One run, one table: gRPC Swift 2 (HTTP/2, plaintext, unary, 64-byte raw payload) and our RPC
# (Health/Check), each a server process driven by its own client process at 1, 16 and 64 calls in
# flight on one connection, beside the plain TCP echo (rpc-benchmark's in-process ceiling).
# Release builds (the first takes several minutes); every row is bounded (SECONDS, default 5).
#
# Usage: Benchmarks/grpc-comparison/run.sh [SECONDS]
set -euo pipefail
export AUTH_BENCHMARKS=1   # the benchmark executables are in the package only with it (Package.swift)
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
seconds="${1:-5}"
levels="1 16 64"

swift build -c release --package-path "$here" >&2
(cd "$root" && swift build -c release --product rpc-benchmark >&2 && swift build -c release --product authctl >&2)
grpc="$here/.build/release/grpc-comparison"
bin="$root/.build/release"

tmp="$(mktemp -d)"
pids=()
cleanup() { for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done; rm -rf "$tmp"; }
trap cleanup EXIT
serve_for=$(( (seconds + 2) * 3 + 20 ))

# wait_for FILE PATTERN: the line of FILE matching PATTERN, once it is there.
wait_for() {
    for _ in $(seq 200); do
        line="$(grep -m1 "$2" "$1" || true)"
        [ -n "$line" ] && { echo "$line"; return; }
        sleep 0.1
    done
    echo "no '$2' in $1:" >&2; cat "$1" >&2; exit 1
}

# gRPC Swift 2: its server process and its client process.
"$grpc" serve --seconds "$serve_for" >"$tmp/grpc.log" 2>&1 &
pids+=($!)
grpc_port="$(wait_for "$tmp/grpc.log" "listening on" | sed 's/.*://')"
for level in $levels; do
    "$grpc" drive --port "$grpc_port" --concurrency "$level" --seconds "$seconds" --warmup 1 >"$tmp/grpc-$level.json"
done

# Ours: rpc-benchmark --serve (Health/Check) driven by authctl bench, each its own process.
export AUTH_RPC_SECRET
AUTH_RPC_SECRET="$(head -c 32 /dev/urandom | base64)"
"$bin/rpc-benchmark" --serve 0 --serve-seconds "$serve_for" >"$tmp/rpc.log" 2>&1 &
pids+=($!)
rpc_address="$(wait_for "$tmp/rpc.log" "serving Health/Check" | sed 's/^serving Health\/Check on \([^ ]*\) .*/\1/')"
for level in $levels; do
    "$bin/authctl" bench "$rpc_address" auth.health.v1.Health/Check --concurrency "$level" \
        --duration "$seconds" --warmup 1 --json >"$tmp/rpc-$level.json"
done

# The plain TCP echo ceiling (and our RPC with its client in the same process), same rows.
"$bin/rpc-benchmark" --no-tls --concurrency 1,16,64 --seconds "$seconds" --warmup 1 >"$tmp/echo.md"

python3 - "$tmp" "$levels" <<'PY'
import json, sys
tmp, levels = sys.argv[1], sys.argv[2].split()
fmt = lambda us: f"{us/1000:.2f} ms" if us >= 1000 else f"{us:.0f} µs"
echo = {}
for line in open(f"{tmp}/echo.md"):
    cells = [c.strip() for c in line.strip().strip("|").split("|")]
    if cells and cells[0] in levels:
        echo[cells[0]] = cells  # in flight, RPC calls/s, p50, p99, plain echo calls/s, p50, p99, …
print("| in flight | gRPC Swift 2 calls/s | p50 | p99 | our RPC calls/s | p50 | p99 | RPC / gRPC | plain TCP echo calls/s | p50 | p99 |")
print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for level in levels:
    g = json.load(open(f"{tmp}/grpc-{level}.json"))
    r = json.load(open(f"{tmp}/rpc-{level}.json"))
    assert [s["code"] for s in r["statuses"]] == ["OK"], r["statuses"]
    e = echo[level]
    print(f"| {level} | {round(g['calls_per_second']):,} | {fmt(g['latency_us']['p50'])} | {fmt(g['latency_us']['p99'])} "
          f"| {round(r['calls_per_second']):,} | {fmt(r['latency_us']['p50'])} | {fmt(r['latency_us']['p99'])} "
          f"| {r['calls_per_second'] / g['calls_per_second']:.1f}× | {e[4]} | {e[5]} | {e[6]} |")
PY
