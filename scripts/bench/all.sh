#!/usr/bin/env bash
# Issue 24's figures in one run, each beside its reference measured in the same run, CPU per
# operation beside every rate, and one Markdown table (docs/benchmarks.md, "Everything at once").
# In order, each row SECONDS long (after 1 s of warm-up where the tool has one):
#
#   rpc-benchmark                 Health/Check in one process, 64 in flight, the default placement
#                                 (off the event loop), beside the plain and the batched echo
#   rpc-benchmark --inline-handlers   the same, handler started on the event loop
#   rpc-benchmark --serve/--target    Health/Check across processes (server and client each a
#                                 process), then the plain echo across processes the same way
#   pgbench, session-benchmark, pgbench   pgbench -M prepared -N -c 16 before and after session
#                                 Refresh at 16 in flight, on the same PostgreSQL (.data/pg-bench-all)
#   otp-benchmark --calls deliver   delivery through the webhook, default workers, one message per
#                                 claim and the default claim batch (messages: 500 × SECONDS)
#   gateway-wrk.sh                the whole system over HTTP (its own PostgreSQL, .data/pg-bench):
#                                 bare route, /health/live, GET /v1/session, refresh, sign-ins
#
# It prints the table with the exact commands, the git commit, the date and the machine's load,
# and writes it to .data/bench-all/<timestamp>.md (its rows as .tsv beside it, every tool's own
# output in .data/bench-all/<timestamp>/). Every process and PostgreSQL it starts are stopped
# whatever happens; every load is bounded (its own duration and a `timeout`).
#
# Usage: scripts/bench/all.sh [SECONDS]        per-row seconds, default 10 (BENCH_SECONDS)
#        scripts/bench/all.sh --compare [FILE.tsv...]   earlier runs side by side (default: all
#                                 of .data/bench-all/*.tsv)
# Environment: BENCH_SECONDS (10), BENCH_SKIP_BUILD=1 uses the existing build, BENCH_BUILD_PATH
#   (.build-bench: swift build --scratch-path, so the default .build and its lock are never
#   touched), PG_BIN (/usr/lib/postgresql/15/bin, for pgbench), BENCH_AUTOGROUP_OFF=1 (see
#   below). GATEWAY_BENCH_* pass through to gateway-wrk.sh.
#
# Scheduler autogroups: with kernel.sched_autogroup_enabled = 1 the kernel schedules each session
# as one group, and every PostgreSQL backend starts a session of its own (setsid), so on two
# cores a backend can wait hundreds of milliseconds for a core (docs/benchmarks.md, issue 24's
# fourth stop). The table's header says whether they were on. With BENCH_AUTOGROUP_OFF=1 (as
# root) the run turns them off and restores the setting when it ends; that removed the stalls
# but the sign-ins cost more CPU in those runs, so it is not the default.
set -euo pipefail
export AUTH_BENCHMARKS=1   # the benchmark executables are in the package only with it (Package.swift)
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
root=$(pwd)

if [[ "${1:-}" == --compare ]]; then
    shift
    if (($# == 0)); then
        shopt -s nullglob
        set -- "$root"/.data/bench-all/*.tsv
        (($# > 0)) || { echo "all.sh: no runs in .data/bench-all/ yet" >&2; exit 1; }
    fi
    exec python3 scripts/bench/all-report.py compare "$@"
fi

seconds="${1:-${BENCH_SECONDS:-10}}"
[[ "$seconds" =~ ^[0-9]+$ ]] && ((seconds >= 1 && seconds <= 120)) ||
    { echo "all.sh: SECONDS must be a whole number in 1...120" >&2; exit 2; }
build_path="${BENCH_BUILD_PATH:-.build-bench}"
bin="$build_path/release"
[[ "$bin" == /* ]] || bin="$root/$bin"
pg_bin="${PG_BIN:-/usr/lib/postgresql/15/bin}"
# One run at a time: a second run would destroy this run's cluster (.data/pg-bench-all) under it.
# shellcheck source=../lib/bench-lock.sh
source "$root/scripts/lib/bench-lock.sh"
hold_bench_lock "$root/.data/pg-bench-all.lock" "another all.sh run"
stamp=$(date -u '+%Y-%m-%dT%H%M%SZ')
out_dir="$root/.data/bench-all"
raw="$out_dir/$stamp"
mkdir -p "$raw"
started_at=$SECONDS

log() { echo "all.sh [$((SECONDS - started_at)) s]: $*" >&2; }

sudo=()
[[ $(id -u) == 0 ]] || sudo=(sudo)
if ! command -v wrk >/dev/null; then
    log "installing wrk"
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y wrk >&2 ||
        { "${sudo[@]}" apt-get update >&2 && DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y wrk >&2; }
fi

# Scheduler autogroups (see the header): with BENCH_AUTOGROUP_OFF=1, turned off for the run.
autogroup_knob=/proc/sys/kernel/sched_autogroup_enabled
autogroup_restore=""
autogroup="not in this kernel"
if [[ -r "$autogroup_knob" ]]; then
    autogroup="on"
    if [[ $(cat "$autogroup_knob") == 0 ]]; then
        autogroup="off"
    elif [[ "${BENCH_AUTOGROUP_OFF:-0}" == 1 && -w "$autogroup_knob" ]] && echo 0 >"$autogroup_knob" 2>/dev/null; then
        autogroup_restore=1
        autogroup="off for the run (on before, restored after)"
    fi
fi

# What it started: background processes (killed by pid) and the PostgreSQL cluster.
pids=()
pg_dir="$root/.data/pg-bench-all"
started_pg=0
# shellcheck source=../lib/stop-processes.sh
source "$root/scripts/lib/stop-processes.sh"
cleanup() {
    local status=$?
    trap - EXIT INT TERM
    if ((${#pids[@]} > 0)) && any_alive "${pids[@]}"; then
        log "stopping ${pids[*]}"
        # gateway-wrk.sh stops its services and cluster on TERM; give it time, then kill.
        stop_processes 60 "${pids[@]}"
    fi
    if ((started_pg)); then scripts/postgres.sh destroy "$pg_dir" >/dev/null 2>&1 || true; fi
    if [[ -n "$autogroup_restore" ]]; then echo "$autogroup_restore" >"$autogroup_knob" 2>/dev/null || true; fi
    ((status == 0)) || log "stopped (status $status); outputs so far in ${raw#"$root"/}/"
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# The commands as run, for the report (paths relative to the repository root).
commands="$raw/commands.txt"
: >"$commands"
# record COMMAND...: one line of $commands, each argument quoted when the shell needs it.
record() {
    local words=() word
    for word in "$@"; do
        word=${word//"$root/"/}
        if [[ -z "$word" || "$word" =~ [^A-Za-z0-9_./:=,@%+-] ]]; then
            word="'${word//\'/\'\\\'\'}'"
        fi
        words+=("$word")
    done
    echo "${words[*]}" >>"$commands"
}
# step NAME COMMAND...: runs a bounded command in the background (so a signal reaches the trap at
# once) with its stdout in $raw/NAME.out and its stderr in $raw/NAME.log; a failure is noted in
# $raw/failed and the run goes on with the other steps.
step() {
    local name=$1
    shift
    record "$@"
    "$@" >"$raw/$name.out" 2>"$raw/$name.log" &
    local pid=$!
    pids+=("$pid")
    local status=0
    wait "$pid" || status=$?
    forget_pid "$pid"
    if ((status != 0)); then
        log "$name failed (status $status): $(tail -n 3 "$raw/$name.log" | tr '\n' ' ')"
        echo "$name" >>"$raw/failed"
    fi
    return 0
}
# wait_for_line FILE PATTERN: the first line of FILE matching PATTERN, once it is there (≤ 60 s).
wait_for_line() {
    local attempt line
    for attempt in $(seq 600); do
        line=$(grep -m 1 "$2" "$1" 2>/dev/null || true)
        [[ -n "$line" ]] && { echo "$line"; return 0; }
        sleep 0.1
    done
    return 1
}
# forget_pid PID: it ended (and was waited for): the trap must not signal its number again.
forget_pid() {
    local kept=() pid
    for pid in "${pids[@]}"; do [[ "$pid" == "$1" ]] || kept+=("$pid"); done
    pids=("${kept[@]}")
}
stop_pid() {
    kill -TERM "$1" 2>/dev/null || true
    wait "$1" 2>/dev/null || true
    forget_pid "$1"
}

uptime >"$raw/uptime-before.txt"
# The tree measured: HEAD and its changed tracked files when the run starts.
commit=$(git rev-parse --short HEAD)
dirty=$(git status --porcelain --untracked-files=no | wc -l)
log "per-row seconds: $seconds; outputs in ${raw#"$root"/}/; load: $(uptime | sed 's/.*load average: //')"

if [[ "${BENCH_SKIP_BUILD:-0}" != 1 ]]; then
    log "building (release, --scratch-path $build_path)"
    record AUTH_BENCHMARKS=1 swift build -c release --scratch-path "$build_path"
    swift build -c release --scratch-path "$build_path" >&2
fi
for executable in rpc-benchmark session-benchmark otp-benchmark gateway-benchmark gateway identity otp-dispatch session; do
    [[ -x "$bin/$executable" ]] || { log "$bin/$executable missing: build first (without BENCH_SKIP_BUILD=1)"; exit 1; }
done
bench_started=$SECONDS

# 1. RPC in one process: default placement, then --inline-handlers, 64 in flight, each beside the
#    plain and the batched echo of its own run. Three rows of 1 + SECONDS each.
rpc_bound=$((4 * (seconds + 1) + 60))
log "rpc-benchmark (default placement), then --inline-handlers"
step rpc-default timeout "$rpc_bound" "$bin/rpc-benchmark" --no-tls --concurrency 64 --seconds "$seconds" \
    --warmup 1 --result-file "$raw/rpc-default.tsv"
step rpc-inline timeout "$rpc_bound" "$bin/rpc-benchmark" --no-tls --inline-handlers --concurrency 64 \
    --seconds "$seconds" --warmup 1 --result-file "$raw/rpc-inline.tsv"

# 2. RPC across processes: rpc-benchmark --serve (a process) driven by rpc-benchmark --target
#    (another), then the plain echo the same way; CPU per call counts both processes.
export AUTH_RPC_SECRET
AUTH_RPC_SECRET="$(head -c 32 /dev/urandom | base64)"
echo 'export AUTH_RPC_SECRET="$(head -c 32 /dev/urandom | base64)"' >>"$commands"
across() {
    local name=$1 pattern=$2
    shift 2
    local serve_seconds=$((seconds + 60))
    record "$bin/rpc-benchmark" --serve 0 --serve-seconds "$serve_seconds" "$@"
    sed -i '$ s/$/ \&/' "$commands"
    "$bin/rpc-benchmark" --serve 0 --serve-seconds "$serve_seconds" "$@" >"$raw/$name-server.out" 2>&1 8>&- &
    local server=$!
    pids+=("$server")
    local line address
    if ! line=$(wait_for_line "$raw/$name-server.out" "$pattern"); then
        log "$name: the server did not start"
        echo "$name" >>"$raw/failed"
        stop_pid "$server"
        return 0
    fi
    address=$(sed 's/.* on \([^ ]*\) for .*/\1/' <<<"$line")
    step "$name" timeout "$((2 * (seconds + 1) + 60))" "$bin/rpc-benchmark" --target "$address" "$@" \
        --concurrency 64 --seconds "$seconds" --warmup 1 --result-file "$raw/$name.tsv" --cpu-pid "$server"
    stop_pid "$server"
}
log "rpc-benchmark across processes: Health/Check, then the plain echo"
across rpc-across "serving Health/Check on"
across echo-across "serving the plain echo on" --echo

# 3. PostgreSQL for the service benchmarks: pgbench, session Refresh at 16 in flight, pgbench.
log "PostgreSQL in ${pg_dir#"$root"/}"
scripts/postgres.sh destroy "$pg_dir" >/dev/null 2>&1 || true
started_pg=1
database_url=$(scripts/postgres.sh start "$pg_dir" 2>"$raw/postgres.log" 8>&- | tail -n 1)
record scripts/postgres.sh start "${pg_dir#"$root"/}"
pgbench="$pg_bin/pgbench"
[[ -x "$pgbench" ]] || pgbench=$(command -v pgbench) || { log "no pgbench (package postgresql)"; exit 1; }
data_dir=$(psql "$database_url" -Atc "SHOW data_directory")
postmaster=$(head -n 1 "$data_dir/postmaster.pid")
clock_ticks=$(getconf CLK_TCK)
# CPU ticks of the whole PostgreSQL server: the postmaster (with its reaped children, whose
# time it inherits: pgbench's backends end with the run) and its live children.
server_ticks() {
    local total pid
    total=$(awk '{ sub(/^.*\) /, ""); print $12 + $13 + $14 + $15 }' "/proc/$postmaster/stat")
    for pid in $(pgrep -P "$postmaster"); do
        total=$((total + $(awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$pid/stat" 2>/dev/null || echo 0)))
    done
    echo "$total"
}
record "$pgbench" -i -q "$database_url"
"$pgbench" -i -q "$database_url" >"$raw/pgbench-init.log" 2>&1
# run_pgbench NAME: one bounded pgbench run as issue 24 names it; its output, its own CPU seconds
# and the server's CPU ticks over the run in $raw/NAME.*.
run_pgbench() {
    local name=$1 before after
    psql "$database_url" -qc "VACUUM ANALYZE pgbench_accounts, pgbench_history" >/dev/null
    before=$(server_ticks)
    local TIMEFORMAT='%3U %3S'
    record "$pgbench" -M prepared -N -c 16 -T "$seconds" -n -l --aggregate-interval 1 \
        --log-prefix "$raw/$name" "$database_url"
    { time timeout "$((seconds + 60))" "$pgbench" -M prepared -N -c 16 -T "$seconds" -n -l \
        --aggregate-interval 1 --log-prefix "$raw/$name" "$database_url" >"$raw/$name.out" 2>"$raw/$name.log"; } \
        2>"$raw/$name.time" || { echo "$name" >>"$raw/failed"; log "$name failed"; }
    sleep 0.3   # the backends' exit reaped, their time in the postmaster's
    after=$(server_ticks)
    echo "$(((after - before))) $clock_ticks" >"$raw/$name.server-ticks"
}
log "pgbench -M prepared -N -c 16 (before)"
run_pgbench pgbench-before
log "session-benchmark: Refresh, 16 in flight"
step session timeout "$((seconds + 120))" "$bin/session-benchmark" --database-url "$database_url" --calls refresh \
    --concurrency 16 --seconds "$seconds" --warmup 1 --result-file "$raw/session.tsv"
log "pgbench -M prepared -N -c 16 (after)"
run_pgbench pgbench-after

# 4. Delivery through the webhook, default workers: one message per claim, then the default
#    claim batch (AUTH_OTP_CLAIM_BATCH, read from the service's configuration).
default_batch=$(sed -n 's/.*public var claimBatchSize: Int = \([0-9][0-9]*\).*/\1/p' \
    Sources/OTPService/OTPServiceConfiguration.swift | head -n 1)
default_batch=${default_batch:-16}
messages=$((500 * seconds))
log "otp-benchmark: delivery of $messages messages, claim batch 1 then $default_batch"
step otp-deliver timeout 900 "$bin/otp-benchmark" --database-url "$database_url" --calls deliver \
    --messages "$messages" --claim-batches "1,$default_batch" --result-file "$raw/otp-deliver.tsv"
echo "$default_batch" >"$raw/otp-default-batch"
scripts/postgres.sh destroy "$pg_dir" >/dev/null 2>&1 || true
started_pg=0

# 5. The whole system over HTTP: gateway-wrk.sh with its own cluster and services.
log "gateway-wrk.sh $seconds"
step gateway-wrk env GATEWAY_BENCH_SKIP_BUILD=1 GATEWAY_BENCH_BUILD_PATH="$build_path" \
    GATEWAY_BENCH_SUMMARY="$raw/gateway.tsv" timeout "$((12 * seconds + 900))" scripts/bench/gateway-wrk.sh "$seconds"

uptime >"$raw/uptime-after.txt"
bench_seconds=$((SECONDS - bench_started))
log "measured in $bench_seconds s; the table:"
{
    echo "commit=$commit"
    echo "dirty=$dirty"
    echo "date=$(date -u '+%Y-%m-%d %H:%M UTC')"
    echo "seconds=$seconds"
    echo "runtime=$bench_seconds"
    echo "cores=$(nproc)"
    echo "autogroup=$autogroup"
    if [[ "${BENCH_SKIP_BUILD:-0}" == 1 ]]; then
        echo "build=$build_path, not rebuilt (BENCH_SKIP_BUILD=1)"
    else
        echo "build=$build_path"
    fi
} >"$raw/meta.txt"
python3 scripts/bench/all-report.py table "$raw" "$out_dir/$stamp.md" "$out_dir/$stamp.tsv"
echo
echo "Written to .data/bench-all/$stamp.md (rows: $stamp.tsv; every tool's output: $stamp/)."
if [[ -s "$raw/failed" ]]; then
    log "failed steps: $(paste -sd ' ' "$raw/failed")"
    exit 1
fi
