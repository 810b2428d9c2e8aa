#!/usr/bin/env bash
# Issue 23 §1: the README's run command supervises the services. Starts scripts/run-local.sh on
# ports of its own (and its own PostgreSQL), then kills each service with SIGKILL in turn and
# measures how long until it answers again: a backend service when the gateway's
# /health/ready reports it SERVING from its new process, the gateway when /health/live answers.
# Fails if one takes longer than 3 s, or if run-local leaves a service running after its
# SIGTERM. Two loads run throughout: password sign-ins, and sign-ins by code (send + verify, to
# a test destination), which need otp-dispatch too. Then restarts PostgreSQL under the load: the services reconnect without a restart
# within 5 s, and a session acknowledged before it still refreshes. Prints one line per service
# with the time measured.
#
#   scripts/check-supervision.sh
#
# Needs `swift build` to have run (run-local.sh builds too, which is then a no-op).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
log() { echo "check-supervision: $*" >&2; }

work="$ROOT/.data/supervision"
scripts/postgres.sh stop "$work/pg" >/dev/null 2>&1 || true
rm -rf "$work"
mkdir -p "$work"
export AUTH_GATEWAY_PORT=18180 AUTH_IDENTITY_PORT=17201 AUTH_OTP_PORT=17202 AUTH_SESSION_PORT=17203
export AUTH_GATEWAY_ADMIN_PORT=19200 AUTH_OTP_METRICS_PORT=19202 AUTH_IDENTITY_METRICS_PORT=19201 AUTH_SESSION_METRICS_PORT=19203
export AUTH_LOG_LEVEL=warning
# The load signs in as fast as one client can: cheap hashes, no per-IP budget in the way.
export AUTH_IDENTITY_SCRYPT_LOG_N=10 AUTH_GATEWAY_RATE_LIMIT_PER_MINUTE=1000000
# The code sign-ins of the second load go to a test destination: a fixed code, never sent.
otp_email="supervision-otp@example.com"
otp_code=424242
export AUTH_OTP_TEST_DESTINATIONS="$otp_email=$otp_code"
base="http://127.0.0.1:$AUTH_GATEWAY_PORT"
run_dir="$work/state"
export AUTH_RUN_LOCAL_STATE="$run_dir"
pg_dir="$work/pg"
export AUTH_DATABASE_URL="$(scripts/postgres.sh start "$pg_dir" 2>"$work/postgres.log" | tail -n 1)"

scripts/run-local.sh > "$work/run-local.log" 2>&1 &
runner=$!
cleanup() {
    trap - EXIT INT TERM
    kill -TERM "$runner" 2>/dev/null || true
    wait "$runner" 2>/dev/null || true
    scripts/postgres.sh stop "$pg_dir" >/dev/null 2>&1 || true
}
trap cleanup EXIT INT TERM

# shellcheck source=lib/run-local-check.sh
source "$ROOT/scripts/lib/run-local-check.sh"
wait_until_ready

failed=0

# The load: one account, then sign-ins back to back until told to stop (at most 100,000).
email="supervision-$RANDOM@example.com"
password="Supervision-Check-42"
created=$(curl -s -o /dev/null -w '%{http_code}' -X POST "$base/v1/signup" -H 'content-type: application/json' \
    -d "{\"display_name\":\"Load\",\"email\":\"$email\",\"password\":\"$password\"}")
[[ "$created" == 201 ]] || { log "FAIL: the load's account was not created (HTTP $created)"; exit 1; }
(
    for _ in $(seq 1 100000); do
        [[ -e "$work/stop-load" ]] && break
        sent=$(date +%s%3N)
        answer=$(curl -s -o /dev/null --max-time 10 -w '%{http_code} %{time_total}' -X POST "$base/v1/login" \
            -H 'content-type: application/json' -d "{\"email\":\"$email\",\"password\":\"$password\"}" || true)
        echo "$answer $sent"
    done
) > "$work/load.txt" 2>/dev/null &
load=$!
# The second load: sign-ins by code (send, then verify with the test destination's code), which
# need otp-dispatch too; each line "status seconds sent-ms" of the step that ended it.
(
    for _ in $(seq 1 100000); do
        [[ -e "$work/stop-load" ]] && break
        sent=$(date +%s%3N)
        answer=$(curl -s --max-time 10 -w '\n%{http_code} %{time_total}' -X POST "$base/v1/otp/send" \
            -H 'content-type: application/json' -d "{\"email\":\"$otp_email\"}" || true)
        status=$(tail -n 1 <<<"$answer")
        id=$(head -n 1 <<<"$answer" | grep -o '"verification_id":"[^"]*"' | cut -d'"' -f4 || true)
        if [[ "${status%% *}" == 200 && -n "$id" ]]; then
            status=$(curl -s -o /dev/null --max-time 10 -w '%{http_code} %{time_total}' -X POST "$base/v1/otp/verify" \
                -H 'content-type: application/json' -d "{\"verification_id\":\"$id\",\"code\":\"$otp_code\"}" || true)
        fi
        echo "$status $sent"
    done
) > "$work/otp-load.txt" 2>/dev/null &
otp_load=$!
sleep 1
# Sign-ins succeed again (the gateway reconnects to a restarted service with backoff, after
# its readiness already says SERVING): waited for before each kill, so that a kill's window
# holds only what that kill caused. At most 30 s.
for service in identity otp-dispatch session gateway; do
    signing_in "$(now_ms)" || { log "FAIL: sign-ins did not succeed again before killing $service"; failed=1; }
    old=$(cat "$run_dir/$service.pid")
    start=$(now_ms)
    kill -KILL "$old"
    # The readiness answer is cached for a second: a new process and a fresh SERVING are both needed.
    while true; do
        new=$(cat "$run_dir/$service.pid" 2>/dev/null || echo "$old")
        if [[ "$new" != "$old" ]] && kill -0 "$new" 2>/dev/null; then
            if [[ "$service" == gateway ]]; then
                curl -sf --max-time 1 "$base/health/live" >/dev/null 2>&1 && break
            else
                sleep 1.05 # past the gateway's readiness cache
                ready && break
            fi
        fi
        (($(now_ms) - start > 30000)) && break
        sleep 0.05
    done
    back=$(now_ms)
    echo "$service $start $back" >> "$work/windows.txt"
    took=$((back - start))
    # A backend's time includes the 1.05 s wait past the readiness cache: subtract it.
    [[ "$service" == gateway ]] || took=$((took - 1050))
    line=$(grep -m1 "run-local: $service ended" "$work/run-local.log" || true)
    log "$service: SIGKILL -> answering again in ${took} ms ($line)"
    if ((took > 3000)) || [[ -z "$line" ]]; then failed=1; fi
done

# Issue 23 §3: a plain PostgreSQL restart under the load. No service is restarted: each pool
# reconnects by itself (backoff 0.1 s doubling to 2 s, ×0.75–1.25), so sign-ins succeed again
# within 5 s of PostgreSQL being back (2.5 s of backoff at most, plus a sign-in); meanwhile they
# answer 503, never another error; and a session acknowledged just before the restart lives on.
signing_in "$(now_ms)" || { log "FAIL: sign-ins did not succeed again before restarting PostgreSQL"; failed=1; }
pids_before=$(pids)
acknowledged=$(curl -s --max-time 10 -X POST "$base/v1/login" -H 'content-type: application/json' \
    -d "{\"email\":\"$email\",\"password\":\"$password\"}")
refresh_token=$(printf '%s' "$acknowledged" | python3 -c 'import json, sys; print(json.load(sys.stdin)["refresh_token"])')
pg_stopped=$(now_ms)
scripts/postgres.sh stop "$pg_dir" fast >/dev/null 2>>"$work/postgres.log"
sleep 2
scripts/postgres.sh start "$pg_dir" >/dev/null 2>>"$work/postgres.log"
pg_back=$(now_ms)
if signing_in "$pg_back"; then
    recovered=$(now_ms)
    echo "postgresql $pg_stopped $recovered" >> "$work/windows.txt"
    log "PostgreSQL restart: down $((pg_back - pg_stopped)) ms; sign-ins succeed again $((recovered - pg_back)) ms after it is back"
    if ((recovered - pg_back > 5000)); then log "FAIL: the services took over 5 s to reconnect"; failed=1; fi
else
    log "FAIL: sign-ins did not succeed again within 30 s of PostgreSQL being back"
    failed=1
fi
[[ "$(pids)" == "$pids_before" ]] || { log "FAIL: a service was restarted across the PostgreSQL restart"; failed=1; }
refreshed=$(curl -s -o /dev/null -w '%{http_code}' --max-time 10 -X POST "$base/v1/token/refresh" \
    -H 'content-type: application/json' -d "{\"refresh_token\":\"$refresh_token\"}")
if [[ "$refreshed" != 200 ]]; then
    log "FAIL: the session acknowledged before the restart does not refresh after it (HTTP $refreshed)"
    failed=1
fi

touch "$work/stop-load"
wait "$load" || true
wait "$otp_load" || true
# The code sign-ins: 200, or 503 while a service they need was dead, or no gateway at all.
otp_total=$(wc -l < "$work/otp-load.txt")
otp_ok=$(awk '$1 == 200' "$work/otp-load.txt" | wc -l)
otp_other=$(awk '$1 != 200 && $1 != 503 && $1 != "000"' "$work/otp-load.txt" | wc -l)
otp_slowest=$(awk 'BEGIN { m = 0 } $2 > m { m = $2 } END { printf "%.3f", m }' "$work/otp-load.txt")
log "code sign-ins: $otp_total: $otp_ok 200, $(awk '$1 == 503' "$work/otp-load.txt" | wc -l) 503, $(awk '$1 == "000"' "$work/otp-load.txt" | wc -l) refused, $otp_other other; slowest step ${otp_slowest}s"
if ((otp_other > 0)); then log "FAIL: code sign-ins answered otherwise:"; awk '$1 != 200 && $1 != 503 && $1 != "000"' "$work/otp-load.txt" | cut -d' ' -f1 | sort | uniq -c >&2; failed=1; fi
if awk -v m="$otp_slowest" 'BEGIN { exit !(m > 6) }'; then log "FAIL: a code sign-in step took ${otp_slowest}s, past the RPC deadline"; failed=1; fi
((otp_ok > 0)) || { log "FAIL: no code sign-in succeeded"; failed=1; }
while read -r service from to; do
    answered=$(awk -v from="$from" -v to="$to" '$3 >= from && $3 <= to' "$work/otp-load.txt" | wc -l)
    errors=$(awk -v from="$from" -v to="$to" '$3 >= from && $3 <= to && $1 != 200' "$work/otp-load.txt" | wc -l)
    log "code sign-ins while $service was down: $answered, $errors not 200"
done < "$work/windows.txt"
# 200: signed in; 503: a backend it needed was dead at that moment; 000: no gateway to connect to.
total=$(wc -l < "$work/load.txt")
ok=$(awk '$1 == 200' "$work/load.txt" | wc -l)
unavailable=$(awk '$1 == 503' "$work/load.txt" | wc -l)
refused=$(awk '$1 == "000"' "$work/load.txt" | wc -l)
other=$(awk '$1 != 200 && $1 != 503 && $1 != "000"' "$work/load.txt" | wc -l)
slowest=$(awk 'BEGIN { m = 0 } $2 > m { m = $2 } END { printf "%.3f", m }' "$work/load.txt")
log "load: $total sign-ins: $ok 200, $unavailable 503, $refused refused (gateway down), $other other; slowest ${slowest}s"
if ((other > 0)); then log "FAIL: sign-ins answered otherwise:"; awk '$1 != 200 && $1 != 503 && $1 != "000"' "$work/load.txt" | sort | uniq -c | head >&2; failed=1; fi
if awk -v m="$slowest" 'BEGIN { exit !(m > 6) }'; then log "FAIL: a sign-in took ${slowest}s, past the RPC deadline"; failed=1; fi
((ok > 0)) || { log "FAIL: no sign-in succeeded"; failed=1; }
# A sign-in needs identity and session: while otp-dispatch is down it must keep answering.
while read -r service from to; do
    errors=$(awk -v from="$from" -v to="$to" '$3 >= from && $3 <= to && $1 != 200' "$work/load.txt" | wc -l)
    answered=$(awk -v from="$from" -v to="$to" '$3 >= from && $3 <= to' "$work/load.txt" | wc -l)
    log "load while $service was down: $answered sign-ins, $errors not 200"
    if [[ "$service" == otp-dispatch ]] && ((errors > 0)); then
        log "FAIL: sign-ins, which do not need otp-dispatch, failed while it was down"
        failed=1
    fi
done < "$work/windows.txt"

kill -TERM "$runner"
wait "$runner" || true
for service in identity otp-dispatch session gateway; do
    pid=$(cat "$run_dir/$service.pid")
    if kill -0 "$pid" 2>/dev/null; then log "FAIL: $service ($pid) still runs after run-local's SIGTERM"; failed=1; fi
done
((failed == 0)) || { tail -40 "$work/run-local.log" >&2; log "FAIL"; exit 1; }
log "OK - each service killed with SIGKILL answered again within 3 s under the load; PostgreSQL restarted under it, the services reconnected by themselves; SIGTERM stopped everything"
