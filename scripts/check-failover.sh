#!/usr/bin/env bash
# Issue 23 §3: PostgreSQL fails over under load. Starts a primary and a synchronous streaming
# standby (scripts/postgres.sh start/standby, durable: fsync and synchronous_commit on), then
# scripts/run-local.sh with a libpq multi-host connection string
# (host=A,B port=…,… target_session_attrs=read-write), and a steady load of password sign-ins.
# Kills the primary with SIGKILL (scripts/postgres.sh crash), promotes the standby one second
# later, and measures the window of errors. Fails when:
#   - a sign-in answered anything but 200 or 503, or took longer than the RPC deadline;
#   - sign-ins did not succeed again within 5 s of the promotion;
#   - a service was restarted (each must reconnect by itself);
#   - a sign-in acknowledged (200) before the crash is lost: every one's refresh token must
#     refresh on the promoted standby (synchronous commit: what the primary acknowledged, the
#     standby has);
#   - a code cannot be sent and delivered after the failover.
# Prints the figures (error window, acknowledged sign-ins, lost ones).
#
#   scripts/check-failover.sh
#
# Needs `swift build` to have run (run-local.sh builds too, which is then a no-op).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
log() { echo "check-failover: $*" >&2; }

work="$ROOT/.data/failover"
for cluster in primary standby; do scripts/postgres.sh destroy "$work/$cluster" >/dev/null 2>&1 || true; done
rm -rf "$work"
mkdir -p "$work"
export AUTH_GATEWAY_PORT=18280 AUTH_IDENTITY_PORT=17301 AUTH_OTP_PORT=17302 AUTH_SESSION_PORT=17303
export AUTH_GATEWAY_ADMIN_PORT=19300 AUTH_OTP_METRICS_PORT=19302 AUTH_IDENTITY_METRICS_PORT=19301 AUTH_SESSION_METRICS_PORT=19303
export AUTH_LOG_LEVEL=notice
export AUTH_IDENTITY_SCRYPT_LOG_N=10 AUTH_GATEWAY_RATE_LIMIT_PER_MINUTE=1000000
export AUTH_RUN_LOCAL_STATE="$work/state"
base="http://127.0.0.1:$AUTH_GATEWAY_PORT"

durable="-c fsync=on -c synchronous_commit=on -c full_page_writes=on"
port_of() { sed -n 's/.*port=\([0-9]*\).*/\1/p' <<<"$1"; }
primary=$(POSTGRES_EXTRA_OPTIONS="$durable" scripts/postgres.sh start "$work/primary" 2>>"$work/postgres.log" | tail -n 1)
standby=$(POSTGRES_EXTRA_OPTIONS="$durable" scripts/postgres.sh standby "$work/primary" "$work/standby" \
    2>>"$work/postgres.log" | tail -n 1)
export AUTH_DATABASE_URL="host=127.0.0.1,127.0.0.1 port=$(port_of "$primary"),$(port_of "$standby") dbname=auth user=postgres target_session_attrs=read-write"
log "primary port $(port_of "$primary"), synchronous standby port $(port_of "$standby")"

scripts/run-local.sh > "$work/run-local.log" 2>&1 &
runner=$!
cleanup() {
    trap - EXIT INT TERM
    kill -TERM "$runner" 2>/dev/null || true
    wait "$runner" 2>/dev/null || true
    for cluster in primary standby; do scripts/postgres.sh destroy "$work/$cluster" >/dev/null 2>&1 || true; done
}
trap cleanup EXIT INT TERM

# shellcheck source=lib/run-local-check.sh
source "$ROOT/scripts/lib/run-local-check.sh"
wait_until_ready

failed=0
email="failover-$RANDOM@example.com"
password="Failover-Check-42"
created=$(curl -s -o /dev/null -w '%{http_code}' -X POST "$base/v1/signup" -H 'content-type: application/json' \
    -d "{\"display_name\":\"Load\",\"email\":\"$email\",\"password\":\"$password\"}")
[[ "$created" == 201 ]] || { log "FAIL: the load's account was not created (HTTP $created)"; exit 1; }

# The load: sign-ins back to back; each line "status seconds sent-ms answered-ms refresh-token"
# (curl's "%{http_code} %{time_total}" makes the first two).
(
    for _ in $(seq 1 100000); do
        [[ -e "$work/stop-load" ]] && break
        sent=$(now_ms)
        answer=$(curl -s --max-time 10 -w '\n%{http_code} %{time_total}' -X POST "$base/v1/login" \
            -H 'content-type: application/json' -d "{\"email\":\"$email\",\"password\":\"$password\"}" || true)
        status=$(tail -n 1 <<<"$answer")
        token=$(head -n 1 <<<"$answer" | grep -o '"refresh_token":"[^"]*"' | cut -d'"' -f4 || true)
        echo "$status $sent $(now_ms) ${token:--}"
    done
) > "$work/load.txt" 2>/dev/null &
load=$!
signing_in "$(now_ms)" || { log "FAIL: sign-ins did not succeed before the failover"; failed=1; }
sleep 2
pids_before=$(pids)

crashed=$(now_ms)
scripts/postgres.sh crash "$work/primary" 2>>"$work/postgres.log"
sleep 1
scripts/postgres.sh promote "$work/standby" >/dev/null 2>>"$work/postgres.log"
promoted=$(now_ms)
if signing_in "$promoted"; then
    recovered=$(now_ms)
    log "failover: primary killed; standby promoted $((promoted - crashed)) ms later; sign-ins succeed again $((recovered - promoted)) ms after the promotion ($((recovered - crashed)) ms after the crash)"
    if ((recovered - promoted > 5000)); then log "FAIL: over 5 s of errors after the promotion"; failed=1; fi
else
    log "FAIL: sign-ins did not succeed again within 30 s of the promotion"
    failed=1
    recovered=$(now_ms)
fi
sleep 1
touch "$work/stop-load"
wait "$load" || true
[[ "$(pids)" == "$pids_before" ]] || { log "FAIL: a service was restarted across the failover"; failed=1; }

total=$(wc -l < "$work/load.txt")
ok=$(awk '$1 == 200' "$work/load.txt" | wc -l)
unavailable=$(awk '$1 == 503' "$work/load.txt" | wc -l)
other=$(awk '$1 != 200 && $1 != 503' "$work/load.txt" | wc -l)
slowest=$(awk 'BEGIN { m = 0 } $2 > m { m = $2 } END { printf "%.3f", m }' "$work/load.txt")
first_error=$(awk -v from="$crashed" '$1 != 200 && $3 >= from - 10000 { print $3; exit }' "$work/load.txt")
last_error=$(awk '$1 != 200 { t = $4 } END { printf "%.0f", t }' "$work/load.txt")
log "load: $total sign-ins: $ok 200, $unavailable 503, $other other; slowest ${slowest}s; errors from ${first_error:-none} to $last_error ($(( ${last_error:-0} - ${first_error:-$last_error} )) ms)"
if ((other > 0)); then log "FAIL: sign-ins answered otherwise:"; awk '$1 != 200 && $1 != 503' "$work/load.txt" | cut -d' ' -f1 | sort | uniq -c >&2; failed=1; fi
if awk -v m="$slowest" 'BEGIN { exit !(m > 6) }'; then log "FAIL: a sign-in took ${slowest}s, past the RPC deadline"; failed=1; fi

# Nothing acknowledged is lost: every sign-in answered 200 before the crash still refreshes.
acknowledged=0
lost=0
while read -r status _ _ answered token; do
    [[ "$status" == 200 && "$token" != - ]] || continue
    ((answered < crashed)) || continue
    acknowledged=$((acknowledged + 1))
    code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 10 -X POST "$base/v1/token/refresh" \
        -H 'content-type: application/json' -d "{\"refresh_token\":\"$token\"}")
    [[ "$code" == 200 ]] || lost=$((lost + 1))
done < "$work/load.txt"
log "sign-ins acknowledged before the crash: $acknowledged; lost (their session no longer refreshes): $lost"
((acknowledged > 0)) || { log "FAIL: no sign-in was acknowledged before the crash"; failed=1; }
((lost == 0)) || failed=1

# Codes are sent and delivered after the failover (otp-dispatch's writes and its outbox).
sent=$(curl -s -o /dev/null -w '%{http_code}' -X POST "$base/v1/otp/send" -H 'content-type: application/json' \
    -d '{"email":"after-failover@example.com"}')
delivered=0
for _ in $(seq 1 200); do
    grep -q "after-failover@example.com" "$work/run-local.log" && { delivered=1; break; }
    sleep 0.05
done
log "a code after the failover: HTTP $sent, delivered: $delivered"
[[ "$sent" == 200 && "$delivered" == 1 ]] || { log "FAIL: no code after the failover"; failed=1; }

((failed == 0)) || { tail -40 "$work/run-local.log" >&2; log "FAIL"; exit 1; }
log "OK - the standby took over under load: only 503s, for $((recovered - crashed)) ms from the crash; nothing acknowledged lost; no service restarted"
