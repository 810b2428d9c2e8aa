# Shared by scripts/check-supervision.sh and scripts/check-failover.sh (sourced): the system of
# scripts/run-local.sh watched from outside. Expects $base (the gateway's URL), $work (the
# check's folder, with load.txt lines "status seconds sent-ms …" and run-local.log), $runner
# (run-local's pid) and a log function.

now_ms() { date +%s%3N; }

# The gateway says every backend is SERVING.
ready() {
    local body
    body=$(curl -s --max-time 1 "$base/health/ready" 2>/dev/null) || return 1
    [[ "$body" == *'"status":"SERVING"'* ]]
}

# Waits (at most 5 minutes: the first build may run) until the system is ready; exits on failure.
wait_until_ready() {
    for _ in $(seq 1 1200); do
        ready && return 0
        kill -0 "$runner" 2>/dev/null || { cat "$work/run-local.log" >&2; log "FAIL: run-local.sh exited"; exit 1; }
        sleep 0.25
    done
    ready || { log "FAIL: the system did not become ready"; exit 1; }
}

# True once the load's latest sign-in, sent at or after `since` (ms), answered 200. At most 30 s.
signing_in() {
    local since=$1
    for _ in $(seq 1 600); do
        if tail -n 1 "$work/load.txt" 2>/dev/null | awk -v since="$since" '$1 == 200 && $3 >= since { found = 1 } END { exit !found }'; then
            return 0
        fi
        sleep 0.05
    done
    return 1
}

# The services' pids as run-local recorded them (a change means a service was restarted).
pids() {
    cat "$AUTH_RUN_LOCAL_STATE"/identity.pid "$AUTH_RUN_LOCAL_STATE"/otp-dispatch.pid \
        "$AUTH_RUN_LOCAL_STATE"/session.pid "$AUTH_RUN_LOCAL_STATE"/gateway.pid | tr '\n' ' '
}
