#!/usr/bin/env bash
# Where a slow refresh comes from (issue 24, "Latency outliers"; docs/benchmarks.md): ROUNDS
# rounds of what scripts/bench/all.sh runs on one PostgreSQL (pgbench -M prepared -N -c 16, then
# session-benchmark's Refresh at 16 in flight), on a cluster that logs every statement over
# 50 ms, lock waits, checkpoints and autovacuum, with `vmstat 1` beside. For each round: the
# row's p99 and max, the slowest call and when it started, and what PostgreSQL logged and
# vmstat saw within a second of it.
#
# Usage: scripts/bench/refresh-outliers.sh [ROUNDS] [SECONDS]      (defaults 5 and 10)
# Environment: BENCH_BUILD_PATH (.build-bench) the release build to use (built when
#   session-benchmark is missing there), PG_BIN (/usr/lib/postgresql/15/bin).
# Output: a summary on standard output; everything raw in .data/refresh-outliers/<timestamp>/.
set -euo pipefail
export AUTH_BENCHMARKS=1
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
root=$(pwd)
rounds="${1:-5}"
seconds="${2:-10}"
build_path="${BENCH_BUILD_PATH:-.build-bench}"
pg_bin="${PG_BIN:-/usr/lib/postgresql/15/bin}"
log() { echo "refresh-outliers: $*" >&2; }

bin="$build_path/release"
if [[ ! -x "$bin/session-benchmark" ]]; then
    log "building session-benchmark (release, $build_path)"
    swift build -c release --scratch-path "$build_path" --product session-benchmark >&2
fi
raw="$root/.data/refresh-outliers/$(date -u +%Y-%m-%dT%H%M%SZ)"
mkdir -p "$raw"
pg_dir="$root/.data/pg-refresh-outliers"
pids=()
started_pg=0
# shellcheck source=../lib/stop-processes.sh
source "$root/scripts/lib/stop-processes.sh"
cleanup() {
    local status=$?
    trap - EXIT INT TERM
    ((${#pids[@]} == 0)) || stop_processes 10 "${pids[@]}"
    if ((started_pg)); then scripts/postgres.sh destroy "$pg_dir" >/dev/null 2>&1 || true; fi
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

scripts/postgres.sh destroy "$pg_dir" >/dev/null 2>&1 || true
started_pg=1
# (pg_ctl hands these to a shell: no |, ; or spaces inside a value. The default log_line_prefix,
# "%m [%p] ", starts each line with its time.)
export POSTGRES_EXTRA_OPTIONS="-c log_min_duration_statement=50 -c log_lock_waits=on -c deadlock_timeout=100ms \
-c log_checkpoints=on -c log_autovacuum_min_duration=0"
database_url=$(scripts/postgres.sh start "$pg_dir" 2>"$raw/postgres-start.log" | tail -n 1)
data_dir=$(psql "$database_url" -Atc "SHOW data_directory")
# scripts/postgres.sh keeps the cluster in DIR, or (as root, when its user cannot reach DIR)
# under /var/tmp linked from DIR/cluster.
pg_log="$pg_dir/postgres.log"
[[ -f "$pg_log" ]] || pg_log="$pg_dir/cluster/postgres.log"
[[ -f "$pg_log" ]] || { log "no postgres.log in $pg_dir"; exit 1; }
pgbench="$pg_bin/pgbench"
[[ -x "$pgbench" ]] || pgbench=$(command -v pgbench)
"$pgbench" -i -q "$database_url" >"$raw/pgbench-init.log" 2>&1
vmstat -t 1 $(((rounds * (2 * seconds + 12)) + 30)) >"$raw/vmstat.log" 2>&1 &
pids+=($!)
log "data directory $data_dir; raw output in ${raw#"$root"/}"

printf '| round | Refresh/s | p99 | p99.9 | max | slowest call | PostgreSQL within 1 s | vmstat within 1 s (r b us sy id wa st) |\n'
printf '|---:|---:|---:|---:|---:|---|---|---|\n'
for round in $(seq "$rounds"); do
    timeout "$((seconds + 60))" "$pgbench" -M prepared -N -c 16 -T "$seconds" -n "$database_url" \
        >"$raw/pgbench-$round.out" 2>&1 || log "pgbench round $round failed"
    timeout "$((seconds + 120))" "$bin/session-benchmark" --database-url "$database_url" --calls refresh \
        --concurrency 16 --seconds "$seconds" --warmup 2 --result-file "$raw/session-$round.tsv" \
        >"$raw/session-$round.out" 2>&1 || log "session-benchmark round $round failed"
    row=$(awk -F'\t' 'NR == 2 { printf "%s|%s|%s|%s", $5, $7, $8, $9 }' "$raw/session-$round.tsv")
    IFS='|' read -r rate p99 p999 max <<<"$row"
    slowest=$(grep -m1 '^- Refresh' "$raw/session-$round.out" | sed 's/^- Refresh, 16 in flight: //')
    # The slowest call's start (HH:MM:SS), then PostgreSQL's lines and vmstat's within a second.
    at=$(sed -n 's/.*started \([0-9:]*\)\.\([0-9]*\) UTC.*/\1/p' <<<"$slowest")
    nearby_pg="—"
    nearby_vm="—"
    if [[ -n "$at" ]]; then
        seconds_of_day() { IFS=: read -r h m s <<<"$1"; echo $((10#$h * 3600 + 10#$m * 60 + 10#$s)); }
        target=$(seconds_of_day "$at")
        nearby_pg=$(awk -v t="$target" '$1 ~ /^[0-9]{4}-/ {
                split($2, c, ":"); s = c[1] * 3600 + c[2] * 60 + int(c[3]);
                if (s >= t - 1 && s <= t + 4) { $1 = ""; $3 = ""; print substr($0, 1, 100) }
            }' "$pg_log" | head -n 3 | paste -sd ';' -)
        nearby_vm=$(awk -v t="$target" 'NF >= 18 {
                split($NF, c, ":"); s = c[1] * 3600 + c[2] * 60 + c[3];
                if (s >= t - 1 && s <= t + 4) printf "%s %s %s %s %s %s %s; ", $1, $2, $13, $14, $15, $16, $17
            }' "$raw/vmstat.log")
    fi
    printf '| %s | %s | %s µs | %s µs | %s µs | %s | %s | %s |\n' "$round" "$rate" "$p99" "$p999" "$max" \
        "${slowest:-—}" "${nearby_pg:-none}" "${nearby_vm:-—}"
done
cp "$pg_log" "$raw/postgres.log" 2>/dev/null || true
log "PostgreSQL's log: ${raw#"$root"/}/postgres.log"
