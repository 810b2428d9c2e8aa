#!/usr/bin/env bash
# scripts/lib/stress-suite.sh N: runs the built Swift suite (`swift test --skip-build
# --disable-xctest`) N times in a row while `stress-ng --cpu 2` keeps two CPU hogs busy, as a CI
# machine shared with other work or a developer's machine during a build would. Stops at the
# first failing run and prints its failing tests and the end of its output. Each run's time and
# the load average during it (mean and peak of /proc/loadavg's 1-minute figure, read every 5 s)
# are printed and kept in .data/stress/summary.txt; each run's whole output in
# .data/stress/run-K.log.
#
# Called by `scripts/test.sh --stress N`, which starts the database and builds first; the
# caller exports AUTH_TEST_DATABASE_URL.
set -euo pipefail
cd "$(dirname "$0")/../.."
runs="${1:?usage: scripts/lib/stress-suite.sh N}"
out=.data/stress
mkdir -p "$out"
: > "$out/summary.txt"
command -v stress-ng >/dev/null || { echo "stress-ng is missing (scripts/test.sh --stress installs it)" >&2; exit 1; }

hog_pid=""
sampler_pid=""
cleanup() {
    local pid
    for pid in "$hog_pid" "$sampler_pid"; do
        if [[ -n "$pid" ]]; then
            kill "$pid" 2>/dev/null || true
            wait "$pid" 2>/dev/null || true
        fi
    done
}
trap cleanup EXIT

say() { echo "$*" | tee -a "$out/summary.txt"; }

say "stress: $runs runs of the suite beside stress-ng --cpu 2 ($(nproc) cores), $(date -u +%FT%TZ)"
for run in $(seq 1 "$runs"); do
    # Two CPU hogs for this run only; the timeout bounds them even if this script is killed.
    stress-ng --cpu 2 --timeout 3600s --quiet &
    hog_pid=$!
    loads="$out/load-$run.txt"
    : > "$loads"
    (while true; do cut -d' ' -f1 /proc/loadavg >> "$loads"; sleep 5; done) &
    sampler_pid=$!
    log="$out/run-$run.log"
    started=$(date +%s)
    status=0
    swift test --skip-build --disable-xctest > "$log" 2>&1 || status=$?
    elapsed=$(( $(date +%s) - started ))
    cleanup
    hog_pid=""
    sampler_pid=""
    load=$(awk '{ sum += $1; if ($1 > max) max = $1 } END { if (NR) printf "load average mean %.2f, peak %.2f", sum / NR, max }' "$loads")
    summary=$(grep -E "Test run with [0-9]+ test" "$log" | tail -n 1 || true)
    if ((status == 0)); then
        say "run $run/$runs: passed in ${elapsed} s ($load): ${summary}"
    else
        say "run $run/$runs: FAILED (exit $status) in ${elapsed} s ($load): ${summary}"
        echo "---- failing tests and their issues (from $log):"
        grep -E "✘|recorded an issue|Fatal error|Crash|signal" "$log" | head -n 80 || true
        echo "---- the last 150 lines of $log:"
        tail -n 150 "$log"
        exit 1
    fi
done
say "stress: all $runs runs passed"
