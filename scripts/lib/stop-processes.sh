# Sourced by the benchmark scripts: stopping what a script started in the background.

# any_alive PID...: whether one of the processes still runs.
any_alive() {
    local pid
    for pid in "$@"; do kill -0 "$pid" 2>/dev/null && return 0; done
    return 1
}

# stop_processes SECONDS PID...: SIGTERM to each, then, after at most SECONDS of graceful
# shutdown, SIGKILL to what still runs; waits for them all.
stop_processes() {
    local seconds=$1
    shift
    (($# > 0)) || return 0
    kill -TERM "$@" 2>/dev/null || true
    local attempt
    for attempt in $(seq $((seconds * 5))); do
        any_alive "$@" || break
        sleep 0.2
    done
    kill -KILL "$@" 2>/dev/null || true
    wait "$@" 2>/dev/null || true
}
