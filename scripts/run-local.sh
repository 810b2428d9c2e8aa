#!/usr/bin/env bash
# Runs the whole system locally on a fresh Debian machine: installs what is missing, starts a
# throwaway PostgreSQL (unless AUTH_DATABASE_URL is set), builds, and starts identity,
# otp-dispatch, session and gateway, each on its own port. Ctrl-C stops everything.
#
# RPC runs over mutual TLS: a development CA and one certificate per service (and one for
# authctl) are made in .data/tls with the openssl command (kept across runs). AUTH_RUN_PLAINTEXT=1
# runs plaintext RPC with the shared-secret Hello instead.
#
# AUTH_DEV_FAKE_PROVIDER=1 also starts `authctl dev-provider`, a stand-in Google, Apple and
# Facebook on 127.0.0.1:${AUTH_DEV_PROVIDER_PORT:-9400}, and points the browser sign-in at it
# (development only: refused with AUTH_ENVIRONMENT=production; README shows the flow with curl).
#
# AUTH_* variables already set in the environment win over the defaults below.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
source scripts/lib/system-packages.sh
ensure_system_packages
mkdir -p .data

pids=()
supervisors=()
pg_dir="$root/.data/pg-run"
started_pg=0
cleanup() {
    trap - INT TERM EXIT
    # The services in order, the gateway first (it stops taking requests, then drains), each
    # waited for; then the stand-in provider; PostgreSQL last.
    if [[ -n "${run_dir:-}" ]]; then
        touch "$run_dir/stopping"
        echo "Stopping services..." >&2
        for service in gateway session otp-dispatch identity; do
            local pid
            pid=$(cat "$run_dir/$service.pid" 2>/dev/null || true)
            [[ -n "$pid" ]] || continue
            kill -TERM "$pid" 2>/dev/null || true
            while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
        done
        wait "${supervisors[@]}" 2>/dev/null || true
    fi
    if ((${#pids[@]} > 0)); then
        kill -TERM "${pids[@]}" 2>/dev/null || true
        wait "${pids[@]}" 2>/dev/null || true
    fi
    if ((started_pg)); then scripts/postgres.sh stop "$pg_dir" >/dev/null 2>&1 || true; fi
}
trap cleanup INT TERM EXIT

if [[ -z "${AUTH_DATABASE_URL:-}" ]]; then
    echo "Starting a throwaway PostgreSQL in $pg_dir" >&2
    AUTH_DATABASE_URL=$(scripts/postgres.sh start "$pg_dir" | tail -n 1)
    started_pg=1
fi
export AUTH_DATABASE_URL

# A local secret for service-to-service credentials, kept across runs in the git-ignored .data.
if [[ -z "${AUTH_RPC_SECRET:-}" ]]; then
    if [[ ! -s .data/rpc-secret ]]; then
        (umask 077 && head -c 32 /dev/urandom | base64 > .data/rpc-secret)
    fi
    AUTH_RPC_SECRET=$(cat .data/rpc-secret)
fi
export AUTH_RPC_SECRET
tls_dir="$root/.data/tls"
plaintext="${AUTH_RUN_PLAINTEXT:-0}"
if [[ "$plaintext" != 1 ]]; then
    scripts/lib/make-dev-certs.sh "$tls_dir" identity otp-dispatch session gateway authctl
fi
# The master key that wraps session's signing keys at rest. It goes with the database in
# .data/pg-run: delete both or neither (session refuses a key that cannot unwrap its keys).
if [[ -z "${AUTH_MASTER_KEY:-}" ]]; then
    if [[ ! -s .data/master-key ]]; then
        (umask 077 && head -c 32 /dev/urandom | base64 > .data/master-key)
    fi
    AUTH_MASTER_KEY=$(cat .data/master-key)
fi
export AUTH_MASTER_KEY
# The secret otp-dispatch keys the codes' MACs with (codes in flight stop working without it).
if [[ -z "${AUTH_OTP_SECRET:-}" ]]; then
    if [[ ! -s .data/otp-secret ]]; then
        (umask 077 && head -c 32 /dev/urandom | base64 > .data/otp-secret)
    fi
    AUTH_OTP_SECRET=$(cat .data/otp-secret)
fi
export AUTH_OTP_SECRET
# Each service's Prometheus metrics (GET /metrics); the gateway's is AUTH_GATEWAY_ADMIN_PORT (9100).
export AUTH_IDENTITY_METRICS_PORT="${AUTH_IDENTITY_METRICS_PORT:-9101}"
export AUTH_OTP_METRICS_PORT="${AUTH_OTP_METRICS_PORT:-9102}"
export AUTH_SESSION_METRICS_PORT="${AUTH_SESSION_METRICS_PORT:-9103}"
export AUTH_ENVIRONMENT="${AUTH_ENVIRONMENT:-development}"
export AUTH_GATEWAY_PORT="${AUTH_GATEWAY_PORT:-8080}"
export AUTH_IDENTITY_PORT="${AUTH_IDENTITY_PORT:-7101}"
export AUTH_OTP_PORT="${AUTH_OTP_PORT:-7102}"
export AUTH_SESSION_PORT="${AUTH_SESSION_PORT:-7103}"
export AUTH_IDENTITY_ADDRESSES="${AUTH_IDENTITY_ADDRESSES:-127.0.0.1:$AUTH_IDENTITY_PORT}"
export AUTH_OTP_ADDRESSES="${AUTH_OTP_ADDRESSES:-127.0.0.1:$AUTH_OTP_PORT}"
export AUTH_SESSION_ADDRESSES="${AUTH_SESSION_ADDRESSES:-127.0.0.1:$AUTH_SESSION_PORT}"

configuration="${AUTH_BUILD_CONFIGURATION:-debug}"
echo "Building ($configuration)..." >&2
swift build -c "$configuration"
bin=$(swift build -c "$configuration" --show-bin-path)

if [[ "${AUTH_DEV_FAKE_PROVIDER:-0}" == 1 ]]; then
    if [[ "$AUTH_ENVIRONMENT" == production ]]; then
        echo "AUTH_DEV_FAKE_PROVIDER=1 signs anyone in as anyone: refused with AUTH_ENVIRONMENT=production" >&2
        exit 2
    fi
    provider_env="$root/.data/dev-provider.env"
    : > "$provider_env"
    "$bin/authctl" dev-provider --port "${AUTH_DEV_PROVIDER_PORT:-9400}" \
        --apple-key-out "$root/.data/dev-provider-apple.p8" > "$provider_env" &
    pids+=($!)
    for _ in $(seq 1 300); do
        grep -q '^AUTH_OAUTH_FACEBOOK_GRAPH_URL=' "$provider_env" && break
        kill -0 "${pids[-1]}" 2>/dev/null || { echo "authctl dev-provider did not start" >&2; exit 1; }
        sleep 0.1
    done
    set -a
    # shellcheck disable=SC1090
    source "$provider_env"
    set +a
    export AUTH_PUBLIC_URL="${AUTH_PUBLIC_URL:-http://127.0.0.1:$AUTH_GATEWAY_PORT}"
    export AUTH_OAUTH_REDIRECT_URLS="${AUTH_OAUTH_REDIRECT_URLS:-laten://auth/callback}"
    echo "Browser sign-in: Google, Apple and Facebook are the stand-in on 127.0.0.1:${AUTH_DEV_PROVIDER_PORT:-9400}; redirect_to may be $AUTH_OAUTH_REDIRECT_URLS" >&2
fi

# Each service runs under a supervisor that starts it again when it exits unexpectedly (issue 23
# §1): after 0.5 s, doubling to 10 s, back to 0.5 s once it has been up a minute; one line per
# restart names the service, how it ended and the attempt. Its pid is in $run_dir/<service>.pid
# (AUTH_RUN_LOCAL_STATE, default .data/run-local).
# Each runs in a session of its own (setsid), so a Ctrl-C in the terminal reaches only this
# script, which then stops them in order (cleanup above).
run_dir="${AUTH_RUN_LOCAL_STATE:-$root/.data/run-local}"
mkdir -p "$run_dir"
rm -f "$run_dir"/*.pid "$run_dir/stopping"
supervise() {
    local service=$1
    set +e
    local delay_ms=500 attempt=0
    while true; do
        local started=$SECONDS
        if [[ "$plaintext" == 1 ]]; then
            setsid "$bin/$service" &
        else
            # Each service its own certificate (variables already set win, as everywhere).
            AUTH_RPC_TLS_CERT="${AUTH_RPC_TLS_CERT:-$tls_dir/$service.pem}" \
                AUTH_RPC_TLS_KEY="${AUTH_RPC_TLS_KEY:-$tls_dir/$service.key}" \
                AUTH_RPC_TLS_CA="${AUTH_RPC_TLS_CA:-$tls_dir/ca.pem}" \
                setsid "$bin/$service" &
        fi
        local pid=$!
        echo "$pid" > "$run_dir/$service.pid"
        wait "$pid"
        local status=$?
        [[ -e "$run_dir/stopping" ]] && return 0
        local up=$((SECONDS - started))
        if ((up >= 60)); then delay_ms=500; attempt=0; fi
        attempt=$((attempt + 1))
        local how="exit status $status"
        if ((status > 128)); then how="signal $(kill -l $((status - 128)) 2>/dev/null || echo $((status - 128)))"; fi
        echo "run-local: $service ended ($how) after ${up}s; restart $attempt in $((delay_ms / 1000)).$(printf '%03d' $((delay_ms % 1000)))s" >&2
        sleep "$((delay_ms / 1000)).$(printf '%03d' $((delay_ms % 1000)))"
        [[ -e "$run_dir/stopping" ]] && return 0
        delay_ms=$((delay_ms * 2))
        ((delay_ms > 10000)) && delay_ms=10000
    done
}
supervisors=()
for service in identity otp-dispatch session gateway; do
    supervise "$service" &
    supervisors+=($!)
done
echo "Running: gateway on http://127.0.0.1:$AUTH_GATEWAY_PORT (identity :$AUTH_IDENTITY_PORT, otp-dispatch :$AUTH_OTP_PORT, session :$AUTH_SESSION_PORT). Ctrl-C stops." >&2
if [[ "$plaintext" == 1 ]]; then
    echo "RPC: plaintext; authctl needs AUTH_RPC_SECRET=\$(cat .data/rpc-secret)" >&2
else
    echo "RPC: mutual TLS; authctl needs AUTH_RPC_TLS_CERT=.data/tls/authctl.pem AUTH_RPC_TLS_KEY=.data/tls/authctl.key AUTH_RPC_TLS_CA=.data/tls/ca.pem" >&2
fi
# Runs until Ctrl-C or SIGTERM (the supervisors keep the services up meanwhile).
wait "${supervisors[@]}" || true
