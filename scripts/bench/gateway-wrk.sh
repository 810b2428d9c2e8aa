#!/usr/bin/env bash
# The gateway under load, everything on this machine (docs/benchmarks.md, "Gateway: wrk and
# gateway-benchmark"): release-builds, starts its own PostgreSQL (.data/pg-bench, deleted at the
# end) and the four services (plaintext RPC, fresh secrets, limits raised for a load from one
# IP, otp-dispatch's SMS through the webhook provider to gateway-benchmark's receiver), then
# in one go, each load bounded to SECONDS:
#
#   wrk          GET /health/live on a bare Hummingbird route (gateway-benchmark bare): the ceiling
#   wrk          GET /health/live through the gateway's full middleware (same wrk settings)
#   wrk          GET /v1/session, rotating over signed-in sessions' access tokens
#   wrk          POST /v1/token/refresh, every request with its own unused refresh token
#   gateway-benchmark signins   full phone sign-ins (send, code by webhook, verify): closed loop,
#                then open loop at half the closed-loop rate
#
# and prints one Markdown table, then CPU per request by process. Every process and the
# PostgreSQL it started are stopped whatever happens; their logs are left in .data/gateway-wrk-logs/.
#
# Usage: scripts/bench/gateway-wrk.sh [SECONDS]           (default 10)
# Environment (defaults): GATEWAY_BENCH_CONNECTIONS (64) wrk connections, GATEWAY_BENCH_THREADS (2)
#   wrk threads, GATEWAY_BENCH_TOKENS (20000) sessions made for wrk, GATEWAY_BENCH_SIGNINS (16)
#   sign-ins in flight (closed loop; the open loop allows 4× that), GATEWAY_BENCH_PROFILE=1 (or
#   =signins) records `perf` of the services and PostgreSQL during the closed-loop sign-ins into
#   .data/gateway-wrk-perf/perf.data; =session or =refresh does so during that wrk load instead,
#   GATEWAY_BENCH_STATEMENTS=1 loads pg_stat_statements and prints the statements of the closed-loop
#   sign-ins (calls per sign-in, PostgreSQL time per call and per sign-in),
#   GATEWAY_BENCH_ALLOCATIONS=1 counts each service's allocation calls (malloc, calloc and
#   realloc of libc, through `perf` uprobes: slower while counting, so its rates are not comparable)
#   and system calls, and prints them per request after the CPU table,
#   GATEWAY_BENCH_ONLY_SIGNINS=1 runs the two sign-in loads alone (for comparing builds),
#   GATEWAY_BENCH_SUPABASE=1 adds the Supabase door's refresh and password grants beside /v1's
#   (POST /auth/v1/token?grant_type=refresh_token on Supabase-format sessions; POST /v1/login and
#   POST /auth/v1/token?grant_type=password with one confirmed account),
#   GATEWAY_BENCH_SKIP_BUILD=1 uses the existing release build, GATEWAY_BENCH_BUILD_PATH (.build)
#   the build folder (swift build --scratch-path; the binaries in its release/, e.g. .build-bench
#   for scripts/bench/all.sh), GATEWAY_BENCH_SUMMARY=FILE also writes the results as tab-separated
#   lines to FILE (header line first; one line per load: key, label, rate, p50/p99/p99.9/max µs,
#   errors, requests, then CPU µs per request of gateway, identity, otp-dispatch, session,
#   PostgreSQL, bare, the system's total and the load generator). AUTH_* variables already set win.
set -euo pipefail
export AUTH_BENCHMARKS=1   # the benchmark executables are in the package only with it (Package.swift)
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
root=$(pwd)
seconds="${1:-10}"
connections="${GATEWAY_BENCH_CONNECTIONS:-64}"
threads="${GATEWAY_BENCH_THREADS:-2}"
token_count="${GATEWAY_BENCH_TOKENS:-20000}"
signin_concurrency="${GATEWAY_BENCH_SIGNINS:-16}"
profile="${GATEWAY_BENCH_PROFILE:-0}"
statements="${GATEWAY_BENCH_STATEMENTS:-0}"
allocations="${GATEWAY_BENCH_ALLOCATIONS:-0}"
only_signins="${GATEWAY_BENCH_ONLY_SIGNINS:-0}"
supabase="${GATEWAY_BENCH_SUPABASE:-0}"
build_path="${GATEWAY_BENCH_BUILD_PATH:-.build}"
summary_file="${GATEWAY_BENCH_SUMMARY:-}"

log() { echo "gateway-wrk: $*" >&2; }

sudo=()
[[ $(id -u) == 0 ]] || sudo=(sudo)
if ! command -v wrk >/dev/null; then
    log "installing wrk"
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y wrk >&2 ||
        { "${sudo[@]}" apt-get update >&2 && DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y wrk >&2; }
fi
[[ "$profile" == 1 ]] && profile=signins
case "$profile" in 0 | signins | session | refresh) ;; *) log "GATEWAY_BENCH_PROFILE: 0, 1, signins, session or refresh"; exit 2 ;; esac
if [[ "$profile" != 0 || "$allocations" == 1 ]] && ! command -v perf >/dev/null; then
    log "installing linux-perf (GATEWAY_BENCH_PROFILE=$profile, GATEWAY_BENCH_ALLOCATIONS=$allocations)"
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y linux-perf >&2
fi
if [[ "$build_path" == .build ]]; then
    if [[ "${GATEWAY_BENCH_SKIP_BUILD:-0}" != 1 ]]; then
        log "building (release)"
        swift build -c release >&2
    fi
    bin=$(swift build -c release --show-bin-path)
else
    # Another build folder: never touches (nor waits for the lock of) the default .build.
    if [[ "${GATEWAY_BENCH_SKIP_BUILD:-0}" != 1 ]]; then
        log "building (release, $build_path)"
        swift build -c release --scratch-path "$build_path" >&2
    fi
    bin="$build_path/release"
    [[ "$bin" == /* ]] || bin="$root/$bin"
fi

pg_dir="$root/.data/pg-bench"
# One run at a time: another run's start or end would destroy this run's cluster under it (its
# services would then answer 503).
# shellcheck source=../lib/bench-lock.sh
source "$root/scripts/lib/bench-lock.sh"
hold_bench_lock "$root/.data/pg-bench.lock" "another gateway-wrk.sh run (using $pg_dir)"
work=$(mktemp -d "${TMPDIR:-/tmp}/gateway-wrk.XXXXXX")
pids=()
started_pg=0
# shellcheck source=../lib/stop-processes.sh
source "$root/scripts/lib/stop-processes.sh"
cleanup() {
    local status=$?
    trap - EXIT INT TERM
    if ((${#pids[@]} > 0)); then
        # Graceful shutdown, bounded: what still runs after 10 s is killed.
        stop_processes 10 "${pids[@]}"
    fi
    if ((started_pg)); then
        # PostgreSQL's log outlives the cluster, for the rows of "PostgreSQL during each load".
        [[ -n "${pg_log:-}" && -f "$pg_log" ]] && cp "$pg_log" "$root/.data/gateway-wrk-postgres.log" 2>/dev/null
        scripts/postgres.sh destroy "$pg_dir" >/dev/null 2>&1 || true
    fi
    if ((status != 0)); then
        log "failed; the services' logs:"
        tail -n 20 "$work"/*.log >&2 2>/dev/null || true
    fi
    # The processes' logs of the last run stay for a look (warnings and up by default).
    rm -rf "$root/.data/gateway-wrk-logs" && mkdir -p "$root/.data/gateway-wrk-logs"
    cp "$work"/*.log "$root/.data/gateway-wrk-logs/" 2>/dev/null || true
    rm -rf "$work"
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

log "load before: $(uptime)"

# A fresh cluster each run: the master key below is new, and session refuses stored keys it
# cannot unwrap.
scripts/postgres.sh destroy "$pg_dir" >/dev/null 2>&1 || true
started_pg=1
# PostgreSQL logs what may stall a load (checkpoints, autovacuum and autoanalyze, lock waits,
# statements of 50 ms or more); each load's row of "PostgreSQL during each load" counts them.
# Options already in POSTGRES_EXTRA_OPTIONS come first (e.g. auto_explain's, to read plans).
# (pg_ctl hands these to a shell: no |, ; or spaces inside a value.)
POSTGRES_EXTRA_OPTIONS="${POSTGRES_EXTRA_OPTIONS:+$POSTGRES_EXTRA_OPTIONS }-c log_checkpoints=on -c log_autovacuum_min_duration=0 -c log_min_duration_statement=50 \
-c log_lock_waits=on -c deadlock_timeout=100ms"
if [[ "$statements" == 1 ]]; then
    POSTGRES_EXTRA_OPTIONS+=" -c shared_preload_libraries=pg_stat_statements -c pg_stat_statements.track=all"
fi
export POSTGRES_EXTRA_OPTIONS
AUTH_DATABASE_URL=$(scripts/postgres.sh start "$pg_dir" 8>&- | tail -n 1)
export AUTH_DATABASE_URL
# scripts/postgres.sh keeps the cluster in DIR, or (as root, when its user cannot reach DIR)
# under /var/tmp linked from DIR/cluster.
pg_log="$pg_dir/postgres.log"
[[ -f "$pg_log" ]] || pg_log="$pg_dir/cluster/postgres.log"
[[ -f "$pg_log" ]] || { log "no postgres.log in $pg_dir"; exit 1; }
if [[ "$statements" == 1 ]]; then
    psql "$AUTH_DATABASE_URL" -qc "CREATE EXTENSION IF NOT EXISTS pg_stat_statements" >&2
fi

random_base64() { head -c 32 /dev/urandom | base64; }
export AUTH_RPC_SECRET="${AUTH_RPC_SECRET:-$(random_base64)}"
export AUTH_OTP_SECRET="${AUTH_OTP_SECRET:-$(random_base64)}"
export AUTH_MASTER_KEY="${AUTH_MASTER_KEY:-$(random_base64)}"
export AUTH_LOG_LEVEL="${AUTH_LOG_LEVEL:-warning}"
export AUTH_ENVIRONMENT=development
# The password rows (GATEWAY_BENCH_SUPABASE=1) compare the doors, not the hash.
[[ "$supabase" == 1 ]] && export AUTH_IDENTITY_SCRYPT_LOG_N="${AUTH_IDENTITY_SCRYPT_LOG_N:-12}"
export AUTH_IDENTITY_PORT="${AUTH_IDENTITY_PORT:-$(free_port)}"
export AUTH_OTP_PORT="${AUTH_OTP_PORT:-$(free_port)}"
export AUTH_SESSION_PORT="${AUTH_SESSION_PORT:-$(free_port)}"
export AUTH_GATEWAY_PORT="${AUTH_GATEWAY_PORT:-$(free_port)}"
export AUTH_GATEWAY_ADMIN_PORT="${AUTH_GATEWAY_ADMIN_PORT:-$(free_port)}"
export AUTH_IDENTITY_ADDRESSES="127.0.0.1:$AUTH_IDENTITY_PORT"
export AUTH_OTP_ADDRESSES="127.0.0.1:$AUTH_OTP_PORT"
export AUTH_SESSION_ADDRESSES="127.0.0.1:$AUTH_SESSION_PORT"
# wrk's requests all come from 127.0.0.1: the per-IP limits of the gateway and otp-dispatch would
# refuse a load from one address after a few dozen requests. The sign-ins come from random
# 10.x.y.z addresses through X-Forwarded-For (gateway-benchmark signins --forwarded-for), as app
# users behind a proxy the gateway trusts would: 127.0.0.1 is that proxy.
export AUTH_GATEWAY_TRUSTED_PROXIES="${AUTH_GATEWAY_TRUSTED_PROXIES:-127.0.0.1}"
export AUTH_GATEWAY_RATE_LIMIT_PER_MINUTE="${AUTH_GATEWAY_RATE_LIMIT_PER_MINUTE:-1000000000}"
export AUTH_IDENTITY_ACCOUNT_CHECKS_PER_HOUR="${AUTH_IDENTITY_ACCOUNT_CHECKS_PER_HOUR:-1000000000}"
export AUTH_OTP_STARTS_PER_IP_PER_HOUR="${AUTH_OTP_STARTS_PER_IP_PER_HOUR:-1000000}"
export AUTH_OTP_STARTS_PER_DESTINATION_PER_HOUR="${AUTH_OTP_STARTS_PER_DESTINATION_PER_HOUR:-100000}"
# Codes go to gateway-benchmark signins' receiver (it checks the signature with this secret).
webhook_port=$(free_port)
export AUTH_OTP_SMS_PROVIDER=webhook
export AUTH_OTP_WEBHOOK_URL="http://127.0.0.1:$webhook_port/otp"
export AUTH_OTP_WEBHOOK_SECRET="${AUTH_OTP_WEBHOOK_SECRET:-$(random_base64)}"
bare_port=$(free_port)

declare -A pid_of
for service in identity otp-dispatch session gateway; do
    "$bin/$service" >"$work/$service.log" 2>&1 8>&- &
    pids+=($!)
    pid_of[$service]=$!
done
"$bin/gateway-benchmark" bare --port "$bare_port" >"$work/bare.log" 2>&1 8>&- &
pids+=($!)
pid_of[bare]=$!

gateway="http://127.0.0.1:$AUTH_GATEWAY_PORT"
log "waiting for $gateway/health/ready"
for attempt in $(seq 600); do
    curl -fs "$gateway/health/ready" >/dev/null 2>&1 && grep -q listening "$work/bare.log" && break
    for service in "${!pid_of[@]}"; do
        kill -0 "${pid_of[$service]}" 2>/dev/null || { log "$service exited"; exit 1; }
    done
    ((attempt < 600)) || { log "not ready after 120 s"; exit 1; }
    sleep 0.2
done

# PostgreSQL's server processes: the postmaster and its children (the services' backends).
data_dir=$(psql "$AUTH_DATABASE_URL" -Atc "SHOW data_directory")
postmaster=$(head -n 1 "$data_dir/postmaster.pid")

# CPU ticks (user + system, 1/CLK_TCK s) of each measured process, "name=ticks" per line.
clock_ticks=$(getconf CLK_TCK)
ticks_of() { awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$1/stat" 2>/dev/null || echo 0; }
cpu_snapshot() {
    local service pg=0 pid
    for service in gateway identity otp-dispatch session bare; do
        echo "$service=$(ticks_of "${pid_of[$service]}")"
    done
    for pid in "$postmaster" $(pgrep -P "$postmaster"); do pg=$((pg + $(ticks_of "$pid"))); done
    echo "postgres=$pg"
}
cpu_rows=()
# timed_driver COMMAND...: runs the load generator (wrk, gateway-benchmark signins) with its
# output where the caller sends it, and leaves its CPU seconds (user + system, its children
# included) in $driver_cpu.
driver_cpu=0
timed_driver() {
    local TIMEFORMAT='%3U %3S' timing status=0
    # 5 and 6: the caller's stdout and stderr, for the command; `time` reports into the capture.
    { timing=$( { time "$@" 1>&5 2>&6; } 2>&1 ) || status=$?; } 5>&1 6>&2
    driver_cpu=$(tail -n 1 <<<"$timing" | awk '{ print $1 + $2 }')
    return "$status"
}
# cpu_row NAME REQUESTS BEFORE AFTER DRIVER_SECONDS: CPU µs per request of each process between
# two snapshots; the load generator's beside the total of the system's. The same figures,
# tab-separated, in $cpu_fields (for GATEWAY_BENCH_SUMMARY).
cpu_fields=""
cpu_row() {
    local name=$1 requests=$2 before=$3 after=$4 driver=$5 output
    output=$(python3 - "$name" "$requests" "$clock_ticks" "$before" "$after" "$driver" <<'EOF'
import sys
name, requests, hz = sys.argv[1], max(int(float(sys.argv[2])), 1), int(sys.argv[3])
parse = lambda text: dict(line.split("=") for line in text.split())
before, after = parse(sys.argv[4]), parse(sys.argv[5])
order = ["gateway", "identity", "otp-dispatch", "session", "postgres", "bare"]
used = {k: (int(after[k]) - int(before[k])) / hz / requests * 1e6 for k in order}
cells = ["%.0f" % used[k] if used[k] > 0 else "0" for k in order]
driver = float(sys.argv[6]) / requests * 1e6
print("| %s | %s | %.0f | %.0f |" % (name, " | ".join(cells), sum(used.values()), driver))
print("\t".join(["%.1f" % max(used[k], 0) for k in order] + ["%.1f" % sum(used.values()), "%.1f" % driver]))
EOF
)
    cpu_rows+=("$(head -n 1 <<<"$output")")
    cpu_fields=$(tail -n 1 <<<"$output")
}
# summary_row KEY LABEL RATE P50_US P99_US P999_US MAX_US ERRORS REQUESTS: one line of
# GATEWAY_BENCH_SUMMARY, with the CPU figures of the cpu_row just made.
summary_rows=()
summary_row() {
    local IFS=$'\t'
    summary_rows+=("$*"$'\t'"$cpu_fields")
}

rows=()
format_count() { python3 -c 'import sys; print("{:,}".format(round(float(sys.argv[1]))))' "$1"; }
format_us() { python3 -c 'import sys; v = float(sys.argv[1]); print("%.2f ms" % (v / 1000) if v >= 1000 else "%.0f µs" % v)' "$1"; }
bare_rate=""
run=0
# run_wrk KEY NAME URL SCRIPT PROFILE [SCRIPT ARGUMENTS...]: one bounded wrk run
# (scripts/bench/wrk/SCRIPT after report.lua), one table row (KEY: its name in
# GATEWAY_BENCH_SUMMARY). The first run is the ceiling the others are compared with.
# GATEWAY_BENCH_PROFILE: perf of the whole machine from 1 s into the load to its end; the report
# (scripts/bench/profile-report.py) names the four services, PostgreSQL's processes and the load
# generator (its pid in $work/driver.pid, see as_driver).
perf_pid=""
start_profile() {
    mkdir -p "$root/.data/gateway-wrk-perf"
    rm -f "$work/driver.pid"
    (sleep 1 && exec perf record -e cpu-clock -F 499 -g -a \
        -o "$root/.data/gateway-wrk-perf/perf.data" -- sleep "$((seconds - 1))") >"$work/perf.log" 2>&1 &
    perf_pid=$!
    pids+=($perf_pid)
}
finish_profile() {
    [[ -n "$perf_pid" ]] || return 0
    wait "$perf_pid" || true
    log "perf ($profile): $(tail -n 1 "$work/perf.log")"
    perf_pid=""
    local out="$root/.data/gateway-wrk-perf" service pid
    {
        for service in gateway identity otp-dispatch session; do printf '%s\t%s\n' "${pid_of[$service]}" "$service"; done
        for pid in "$postmaster" $(pgrep -P "$postmaster"); do printf '%s\tPostgreSQL\n' "$pid"; done
        [[ -s "$work/driver.pid" ]] && printf '%s\tload generator\n' "$(cat "$work/driver.pid")"
    } >"$out/processes.tsv"
    python3 scripts/bench/profile-report.py "$out/perf.data" "$out/processes.tsv" 15 >"$out/report.md" ||
        log "profile-report.py failed"
    log "profile report: .data/gateway-wrk-perf/report.md"
}
# "${as_driver[@]}" COMMAND...: runs COMMAND in place of a shell that first writes its pid (the
# profile's report names the load generator by it).
as_driver=(bash -c 'echo $$ >"$0"; exec "$@"' "$work/driver.pid")

# GATEWAY_BENCH_ALLOCATIONS: uprobes on libc's malloc, calloc and realloc (made once, kept by the
# kernel) and the system-call tracepoint, counted by one `perf stat` per service over each load;
# alloc_rows and syscall_rows hold the tables.
alloc_rows=()
syscall_rows=()
switch_rows=()
alloc_stats=()
probe_events=""
if [[ "$allocations" == 1 ]]; then
    libc=$(ldd "$bin/gateway" | awk '$1 == "libc.so.6" { print $3 }')
    for function in malloc calloc realloc; do
        perf probe -l 2>/dev/null | grep -q "probe_libc:$function " ||
            perf probe -q -x "$libc" --add "$function" >&2
    done
    probe_events="probe_libc:malloc,probe_libc:calloc,probe_libc:realloc,raw_syscalls:sys_enter,context-switches"
fi
start_counting() {
    [[ "$allocations" == 1 ]] || return 0
    alloc_stats=()
    local service
    for service in gateway identity otp-dispatch session; do
        perf stat -x, -e "$probe_events" -p "${pid_of[$service]}" -o "$work/alloc-$service.csv" &
        alloc_stats+=($!)
        pids+=($!)
    done
    sleep 0.3   # the probes are attached before the load starts
}
# begin_load: what a load's rows are measured from: the counters started, the CPU of every
# process (`before`), the start time (`load_started`), the machine's counters (`counters_mark`).
begin_load() {
    start_counting
    before=$(cpu_snapshot)
    load_started=$(date +%s.%N)
    counters_mark=$(machine_counters)
}
# finish_counting NAME REQUESTS: stops the counters; one row of allocation calls and one of
# system calls per request.
finish_counting() {
    [[ "$allocations" == 1 ]] || return 0
    local name=$1 requests=$2
    kill -INT "${alloc_stats[@]}" 2>/dev/null || true
    wait "${alloc_stats[@]}" 2>/dev/null || true
    local rows
    rows=$(python3 - "$name" "$requests" "$work" <<'EOF2'
import sys
name, requests, work = sys.argv[1], max(float(sys.argv[2]), 1), sys.argv[3]
allocations, syscalls, switches = [], [], []
for service in ["gateway", "identity", "otp-dispatch", "session"]:
    counts = {}
    for line in open("%s/alloc-%s.csv" % (work, service)):
        fields = line.strip().split(",")
        if len(fields) > 2 and fields[0].replace(".", "").isdigit():
            counts[fields[2]] = counts.get(fields[2], 0) + float(fields[0])
    allocations.append(sum(v for k, v in counts.items() if k.startswith("probe_libc")) / requests)
    syscalls.append(counts.get("raw_syscalls:sys_enter", 0) / requests)
    switches.append(counts.get("context-switches", 0) / requests)
for values in (allocations, syscalls, switches):
    print("| %s | %s | %.1f |" % (name, " | ".join("%.1f" % v for v in values), sum(values)))
EOF2
)
    alloc_rows+=("$(sed -n 1p <<<"$rows")")
    syscall_rows+=("$(sed -n 2p <<<"$rows")")
    switch_rows+=("$(sed -n 3p <<<"$rows")")
}

# The machine's major page faults so far (/proc/vmstat: code or data read back from disk; this
# VM pages out memory idle for a few seconds, DAMON `pageout`, docs/benchmarks.md) and the time
# its vCPUs were stolen by the host (/proc/stat, in ticks of 10 ms) and the time some task
# waited for I/O (pressure stall information, /proc/pressure/io "some", µs; 0 without PSI):
# "FAULTS STEAL IO".
machine_counters() {
    local io=0
    [[ -r /proc/pressure/io ]] && io=$(awk '$1 == "some" { sub("total=", "", $5); print $5 }' /proc/pressure/io)
    echo "$(awk '$1 == "pgmajfault" { print $2 }' /proc/vmstat) $(awk '$1 == "cpu" { print $9 }' /proc/stat) $io"
}
counters_mark=$(machine_counters)

# pg_events NAME START END: one row of $pg_rows, what PostgreSQL's log says happened between two
# `date +%s.%N` times: automatic vacuums and analyzes (with their tables), checkpoints, lock
# waits, statements of 50 ms or more (with the slowest); and the machine's major page faults
# since `counters_mark` was set at the load's start. The log's lines start with "%m", the
# time in the cluster's zone (UTC here; another zone's abbreviation is read as local time).
pg_rows=()
pg_events() {
    local row
    row=$(python3 - "$1" "$2" "$3" "$pg_log" "$counters_mark" "$(machine_counters)" <<'EOF2'
import calendar, re, sys, time
name, start, end, path = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
(faults_before, steal_before, io_before), (faults_after, steal_after, io_after) = (map(int, v.split()) for v in sys.argv[5:7])
machine = "%d | %d ms | %d ms" % (faults_after - faults_before, (steal_after - steal_before) * 10, (io_after - io_before) / 1000)
line_re = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)(\.\d+)? (\S+) ")
vacuums, analyzes, checkpoints, waits, slow = [], [], 0, 0, []
for line in open(path, errors="replace"):
    match = line_re.match(line)
    if not match:
        continue
    parsed = time.strptime(match.group(1), "%Y-%m-%d %H:%M:%S")
    at = (calendar.timegm(parsed) if match.group(3) in ("UTC", "GMT") else time.mktime(parsed)) + float(match.group(2) or 0)
    if not start <= at <= end:
        continue
    table = re.search(r'automatic (vacuum|analyze) of table "[^."]*\.([^"]*)"', line)
    if table:
        (vacuums if table.group(1) == "vacuum" else analyzes).append(table.group(2))
    elif "checkpoint starting" in line:
        checkpoints += 1
    elif "still waiting for" in line:
        waits += 1
    else:
        duration = re.search(r"duration: ([0-9.]+) ms", line)
        if duration:
            slow.append(float(duration.group(1)))
            # The statement itself, on the caller's log (stderr), shortened.
            print("  slow: " + " ".join(line.split())[:240], file=sys.stderr)
def tables(names):
    return "%d (%s)" % (len(names), ", ".join(sorted(set(names)))) if names else "0"
slowest = " (slowest %.0f ms)" % max(slow) if slow else ""
print("| %s | %s | %s | %d | %d | %d%s | %s |" % (name, tables(vacuums), tables(analyzes), checkpoints, waits, len(slow), slowest, machine))
EOF2
) || { log "reading PostgreSQL's log failed"; return 0; }
    pg_rows+=("$row")
    log "PostgreSQL during $1: $row"
}

run_wrk() {
    local key=$1 name=$2 url=$3 script=$4 profiled=$5
    shift 5
    run=$((run + 1))
    local lua="$work/wrk-$run.lua" out="$work/wrk-$run.out"
    cat scripts/bench/wrk/report.lua "scripts/bench/wrk/$script" >"$lua"
    local conns="${wrk_connections:-$connections}"
    log "wrk: $name (${seconds} s, $threads threads, $conns connections)"
    local before after load_started ended
    if [[ "$profile" == "$profiled" ]]; then start_profile; fi
    begin_load
    timed_driver timeout "$((seconds + 60))" "${as_driver[@]}" wrk -t "$threads" -c "$conns" -d "${seconds}s" --latency -s "$lua" "$url" -- "$@" >"$out" 2>&1
    ended=$(date +%s.%N)
    after=$(cpu_snapshot)
    pg_events "$name" "$load_started" "$ended"
    finish_profile
    cat "$out" >&2
    local result rate p50 p99 status_errors socket_errors requests p999 max
    result=$(grep '^WRK_RESULT' "$out" | tail -n 1)
    [[ -n "$result" ]] || { log "wrk printed no result"; exit 1; }
    read -r _ rate p50 p99 status_errors socket_errors requests p999 max <<<"$result"
    local ratio=""
    if [[ -z "$bare_rate" ]]; then
        bare_rate=$rate
        ratio="100 %"
    else
        ratio=$(python3 -c "print('%.0f %%' % (100 * $rate / $bare_rate))")
    fi
    rows+=("| $name | $(format_count "$rate") | $(format_us "$p50") | $(format_us "$p99") | $status_errors / $socket_errors | $ratio |")
    cpu_row "$name" "$requests" "$before" "$after" "$driver_cpu"
    finish_counting "$name" "$requests"
    summary_row "$key" "$name" "$rate" "$p50" "$p99" "$p999" "$max" "$((status_errors + socket_errors))" "$requests"
}

if [[ "$only_signins" != 1 ]]; then
    log "making $token_count signed-in sessions over RPC"
    tokens_started=$(date +%s.%N)
    counters_mark=$(machine_counters)
    timeout 900 "$bin/gateway-benchmark" tokens --count "$token_count" --out "$work/tokens" >&2
    pg_events "making $token_count sessions (before the loads)" "$tokens_started" "$(date +%s.%N)"

    run_wrk bare "GET /health/live, bare Hummingbird (ceiling)" "http://127.0.0.1:$bare_port/health/live" plain.lua -
    run_wrk health "GET /health/live, gateway" "$gateway/health/live" plain.lua -
    run_wrk session "GET /v1/session" "$gateway" session.lua session "$work/tokens/access-tokens.txt" "$threads"
    run_wrk refresh "POST /v1/token/refresh" "$gateway" refresh.lua refresh "$work/tokens/refresh-tokens.txt" "$threads"
fi

if [[ "$supabase" == 1 ]]; then
    # The Supabase door beside /v1 (docs/supabase.md, "Cost"): its refresh grant on sessions of
    # its own token format, and both doors' password sign-in with one confirmed account.
    log "making $token_count Supabase-format sessions and a password account over RPC"
    timeout 900 "$bin/gateway-benchmark" tokens --count "$token_count" --format supabase \
        --password-email bench-password@example.com --out "$work/tokens-supabase" >&2
    run_wrk supabase-refresh "POST /auth/v1/token?grant_type=refresh_token" "$gateway" refresh.lua - \
        "$work/tokens-supabase/refresh-tokens.txt" "$threads" "/auth/v1/token?grant_type=refresh_token"
    # Password sign-ins of one email: identity counts an attempt before its hash is checked
    # (parallel guesses cannot outrun the lockout), so more than a few in flight lock the email.
    # 4 connections, and a cheap hash (AUTH_IDENTITY_SCRYPT_LOG_N=12 below) so that the doors'
    # own work shows beside the hash.
    wrk_connections=4 run_wrk login "POST /v1/login" "$gateway" login.lua - /v1/login bench-password@example.com Bench-Password-42
    wrk_connections=4 run_wrk supabase-password "POST /auth/v1/token?grant_type=password" "$gateway" login.lua - \
        "/auth/v1/token?grant_type=password" bench-password@example.com Bench-Password-42
fi

# Sign-ins: closed loop, then open loop at half its rate.
# signin_row KEY LABEL FILE BEFORE AFTER DONE: DONE is the count of sign-ins the CPU snapshots
# bracket (the warm-up's included: every sign-in starts one verification).
signin_row() {
    local key=$1 label=$2 file=$3 before=$4 after=$5 done_count=$6
    local mode rate p50 p99 failed p999 max
    IFS=$'\t' read -r mode rate p50 p99 failed p999 max <"$file"
    rows+=("| phone sign-ins (send + code + verify), $label | $(format_count "$rate") | $p50 ms | $p99 ms | $failed failed | |")
    cpu_row "phone sign-in, $label" "$done_count" "$before" "$after" "$driver_cpu"
    finish_counting "phone sign-in, $label" "$done_count"
    local ms_to_us='import sys; print(" ".join("%.0f" % (float(v or 0) * 1000) for v in sys.argv[1:]))'
    local us
    read -r -a us <<<"$(python3 -c "$ms_to_us" "$p50" "$p99" "$p999" "$max")"
    summary_row "$key" "phone sign-ins (send + code + verify), $label" "$rate" "${us[@]}" "$failed" "$done_count"
}
verifications() { psql "$AUTH_DATABASE_URL" -Atc "SELECT count(*) FROM otp.verifications"; }
if [[ "$statements" == 1 ]]; then
    psql "$AUTH_DATABASE_URL" -qAtc "SELECT pg_stat_statements_reset()" >/dev/null
fi
verifications_before=$(verifications)
if [[ "$profile" == signins ]]; then start_profile; fi
log "gateway-benchmark signins: closed loop, $signin_concurrency in flight"
begin_load
timed_driver timeout "$((seconds * 2 + 60))" "${as_driver[@]}" "$bin/gateway-benchmark" signins --gateway "$gateway" --webhook-port "$webhook_port" \
    --webhook-secret "$AUTH_OTP_WEBHOOK_SECRET" --forwarded-for --concurrency "$signin_concurrency" --seconds "$seconds" \
    --warmup 1 --result-file "$work/signins-closed.tsv"
after=$(cpu_snapshot)
pg_events "phone sign-ins, closed loop" "$load_started" "$(date +%s.%N)"
# Every sign-in (warm-up included) starts one verification: that count divides the CPU and the calls.
signins_done=$(($(verifications) - verifications_before))
if [[ "$statements" == 1 ]]; then
    psql "$AUTH_DATABASE_URL" -qAt -F $'\t' -c "
        SELECT round(calls::numeric / $signins_done, 2), round((1000 * total_exec_time / calls)::numeric),
               round((1000 * total_exec_time / $signins_done)::numeric),
               left(regexp_replace(query, '\\s+', ' ', 'g'), 110)
        FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
        ORDER BY total_exec_time DESC LIMIT 40" >"$work/statements.tsv"
fi
signin_row signins-closed "closed loop, $signin_concurrency in flight" "$work/signins-closed.tsv" "$before" "$after" "$signins_done"
finish_profile

closed_rate=$(cut -f 2 "$work/signins-closed.tsv")
half_rate=$(python3 -c "print(max(1, round($closed_rate / 2)))")
log "gateway-benchmark signins: open loop at $half_rate/s (half the closed loop's rate)"
verifications_before=$(verifications)
begin_load
timed_driver timeout "$((seconds * 2 + 60))" "$bin/gateway-benchmark" signins --gateway "$gateway" --webhook-port "$webhook_port" \
    --webhook-secret "$AUTH_OTP_WEBHOOK_SECRET" --forwarded-for --concurrency $((signin_concurrency * 4)) --rate "$half_rate" \
    --seconds "$seconds" --warmup 1 --result-file "$work/signins-open.tsv"
after=$(cpu_snapshot)
pg_events "phone sign-ins, open loop" "$load_started" "$(date +%s.%N)"
signin_row signins-open "open loop at $half_rate/s" "$work/signins-open.tsv" "$before" "$after" \
    "$(($(verifications) - verifications_before))"

if [[ -n "$summary_file" ]]; then
    {
        printf 'key\tlabel\trate\tp50_us\tp99_us\tp999_us\tmax_us\terrors\trequests\tgateway_us\tidentity_us\totp_dispatch_us\tsession_us\tpostgres_us\tbare_us\tsystem_us\tload_generator_us\n'
        printf '%s\n' "${summary_rows[@]}"
    } >"$summary_file"
fi

echo
echo "Gateway under load, $(date -u '+%Y-%m-%d %H:%M UTC'), ${seconds} s per row; wrk -t $threads -c $connections --latency;"
echo "load average after: $(uptime | sed 's/.*load average: //')"
echo
echo "| route | req/s | p50 | p99 | errors: HTTP ≥ 400 / socket | vs bare |"
echo "|---|---:|---:|---:|---:|---:|"
printf '%s\n' "${rows[@]}"
echo
echo "CPU per request (µs; user + system of each process over the row, /proc/PID/stat; the load"
echo "generator's, wrk or gateway-benchmark, from its rusage, beside the total of the others):"
echo
echo "| load | gateway | identity | otp-dispatch | session | PostgreSQL | bare | total | load generator |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
printf '%s\n' "${cpu_rows[@]}"
echo
echo "PostgreSQL during each load (its log: automatic vacuums and analyzes with their tables,"
echo "checkpoints started, lock waits past 100 ms, statements of 50 ms or more) and the machine's"
echo "major page faults (/proc/vmstat pgmajfault: pages read back from disk), steal time (both"
echo "vCPUs' time taken by the host, /proc/stat) and I/O stall (time some task waited for I/O,"
echo "/proc/pressure/io):"
echo
echo "| load | automatic vacuums | automatic analyzes | checkpoints | lock waits | statements ≥ 50 ms | major page faults | steal | I/O stall |"
echo "|---|---|---|---:|---:|---:|---:|---:|---:|"
printf '%s\n' "${pg_rows[@]}"
# print_counted TITLE ROWS...: one counted table (per request and service, with the total).
print_counted() {
    echo
    echo "$1"
    echo
    echo "| load | gateway | identity | otp-dispatch | session | total |"
    echo "|---|---:|---:|---:|---:|---:|"
    shift
    printf '%s\n' "$@"
}
if [[ "$allocations" == 1 ]]; then
    print_counted "Allocation calls per request (libc malloc + calloc + realloc, counted by perf uprobes over the
row, warm-up included; PostgreSQL's palloc is not among them):" "${alloc_rows[@]}"
    print_counted "System calls per request (the raw_syscalls:sys_enter tracepoint, the same rows):" \
        "${syscall_rows[@]}"
    print_counted "Context switches per request (the context-switches software event, the same rows: each
thread that goes to sleep and is woken again counts one; a hop between threads costs one):" "${switch_rows[@]}"
fi
if [[ "$statements" == 1 ]]; then
    echo
    echo "PostgreSQL statements of the closed-loop sign-ins ($signins_done sign-ins, warm-up included;"
    echo "pg_stat_statements, execution time only, by total time):"
    echo
    echo "| calls per sign-in | µs per call | µs per sign-in | statement |"
    echo "|---:|---:|---:|---|"
    while IFS=$'\t' read -r per_signin per_call per_signin_us query; do
        echo "| $per_signin | $per_call | $per_signin_us | \`${query//|/\\|}\` |"
    done <"$work/statements.tsv"
fi
