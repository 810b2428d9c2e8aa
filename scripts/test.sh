#!/usr/bin/env bash
# Runs every test of the project on a fresh Debian machine: installs what is missing, checks
# that generated code is up to date, starts a throwaway PostgreSQL, builds (no warnings
# allowed in our code), runs the image and the compose stack with those executables under
# podman, runs the codec tests under AddressSanitizer/LeakSanitizer, then the whole suite.
#
#   scripts/test.sh               everything (the README's test command; CI runs it)
#   scripts/test.sh --stress N    builds, then runs the whole Swift suite N times in a row while
#                                 two CPU hogs (stress-ng --cpu 2) load the machine; stops at the
#                                 first failing run and prints its failures and output
#                                 (docs/testing.md#a-loaded-machine)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
stress_runs=""
if [[ "${1:-}" == "--stress" ]]; then
    stress_runs="${2:-}"
    [[ "$stress_runs" =~ ^[1-9][0-9]*$ ]] || { echo "usage: scripts/test.sh [--stress N]" >&2; exit 2; }
elif [[ -n "${1:-}" ]]; then
    echo "usage: scripts/test.sh [--stress N]" >&2
    exit 2
fi
source scripts/lib/system-packages.sh
ensure_system_packages
# At most 8 tests at once (Swift Testing's setting; unset, it starts all ~600 together). On two
# cores every await of every test then queued behind hundreds of others: a hop to the pool or an
# event loop took seconds, and deadlines and Hello timeouts that the tests are not about expired
# (docs/testing.md#a-loaded-machine).
export SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH="${SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH:-8}"
# The benchmark executables are in the package only with this set (Package.swift): the tests
# build them so that they cannot rot.
export AUTH_BENCHMARKS=1
if [[ -n "$stress_runs" ]]; then
    ensure_packages stress-ng
    mkdir -p .data
    echo "== starting a throwaway PostgreSQL in .data/pg-test"
    url=$(scripts/postgres.sh start "$root/.data/pg-test" | tail -n 1)
    trap 'scripts/postgres.sh stop "$root/.data/pg-test" >/dev/null 2>&1 || true' EXIT
    export AUTH_TEST_DATABASE_URL="$url"
    echo "== build"
    swift build --build-tests
    scripts/jose-check/install.sh >/dev/null
    scripts/lib/stress-suite.sh "$stress_runs"
    exit 0
fi

echo "== generated code is up to date; the generator's own tests"
scripts/generate-protos.sh --check
python3 scripts/codegen/test_generate_swift.py
echo "== the generator's kitchen-sink self-test (every field kind, built and run in a scratch package)"
scripts/codegen/selftest.sh
echo "== identity's password NFKC tables match this toolchain's Foundation (docs/identity.md)"
scripts/codegen/nfkc/generate.sh --check

echo "== test code the compiler is known to miscompile (docs/testing.md)"
scripts/check-test-patterns.sh
echo "== Swift sources formatted as .swift-format says (swift format; scripts/format.sh)"
scripts/format.sh --check

mkdir -p .data
pg_dir="$root/.data/pg-test"
echo "== deployment files (docker-compose config, kubernetes-validate)"
scripts/check-deploy.sh
echo "== the gateway's OpenAPI document (openapi-spec-validator, issue 11's contract)"
scripts/check-openapi.sh

echo "== starting a throwaway PostgreSQL in $pg_dir"
url=$(scripts/postgres.sh start "$pg_dir" | tail -n 1)
trap 'scripts/postgres.sh stop "$pg_dir" >/dev/null 2>&1 || true' EXIT
export AUTH_TEST_DATABASE_URL="$url"

echo "== build"
swift build --build-tests 2>&1 | tee .data/build.log
# Warnings in our own code fail the run (dependencies' warnings are theirs).
if grep -E "^$root/(Sources|Tests)/[^:]+:[0-9]+:[0-9]+: warning:" .data/build.log; then
    echo "error: the build has warnings in our code (above)" >&2
    exit 1
fi

echo "== containers: deploy/Dockerfile's image with this build's executables, docker-compose.yml under podman, sign-in walk (about 5 min)"
# As root (podman's rootful mode is what works on these machines); it installs podman & co. when
# missing and removes every container, volume, network, image and process it made.
as_root=()
if [[ $(id -u) -ne 0 ]]; then as_root=(sudo); fi
"${as_root[@]}" deploy/smoke-test-podman.sh --bin-dir "$(swift build --show-bin-path)"

echo "== codec tests under AddressSanitizer/LeakSanitizer"
# In a scratch package with only the codec: the sanitized build skips NIO, TLS, HTTP and the rest.
scripts/asan-codec-tests.sh

echo "== fuzzing the frame decoder and the envelope/message unpack (libFuzzer, 45 s)"
fuzz_status=0
scripts/fuzz/run.sh 45 > .data/fuzz.log 2>&1 || fuzz_status=$?
grep -E "DONE|stat::|ERROR|SUMMARY" .data/fuzz.log || true
if ((fuzz_status != 0)); then
    tail -n 60 .data/fuzz.log >&2
    echo "error: the fuzzer found a crash, leak, hang or memory blow-up (reproducer in .data/fuzz-artifacts)" >&2
    exit 1
fi

echo "== a client written from docs/protocol.md alone (Python) against a real identity process"
# Once in plaintext mode (shared-secret Hello), once over mutual TLS (Python's ssl), each against
# a new identity process. run_protocol_check NAME VAR=VALUE... (the identity's extra environment;
# the client's comes from the caller's environment).
run_protocol_check() {
    local name="$1"
    shift
    local log=".data/protocol-identity-$name.log"
    : > "$log"
    env "$@" AUTH_DATABASE_URL="$url" AUTH_IDENTITY_PORT=0 \
        "$(swift build --show-bin-path)/identity" 2> "$log" &
    local identity_pid=$!
    local port=""
    for _ in $(seq 1 100); do
        port=$(sed -n 's/.*port=\([0-9][0-9]*\).*RPC server listening.*/\1/p' "$log" | head -n 1 || true)
        [[ -n "$port" ]] && break
        sleep 0.1
    done
    if [[ -z "$port" ]]; then
        cat "$log" >&2
        kill "$identity_pid" 2>/dev/null || true
        echo "error: identity did not start ($name)" >&2
        exit 1
    fi
    local status=0
    AUTH_RPC_SERVER_NAME=identity scripts/protocol-check/check.sh "127.0.0.1:$port" || status=$?
    kill -TERM "$identity_pid" 2>/dev/null || true
    wait "$identity_pid" 2>/dev/null || true
    if ((status != 0)); then
        echo "error: the protocol check failed ($name)" >&2
        exit 1
    fi
}
protocol_secret=$(head -c 32 /dev/urandom | base64)
AUTH_RPC_SECRET="$protocol_secret" run_protocol_check plaintext AUTH_RPC_SECRET="$protocol_secret"
tls_dir=.data/protocol-tls
rm -rf "$tls_dir"
scripts/lib/make-dev-certs.sh "$tls_dir" identity authctl
AUTH_RPC_TLS_CERT="$tls_dir/authctl.pem" AUTH_RPC_TLS_KEY="$tls_dir/authctl.key" AUTH_RPC_TLS_CA="$tls_dir/ca.pem" \
    AUTH_RPC_SERVICE=authctl run_protocol_check tls \
    AUTH_RPC_TLS_CERT="$tls_dir/identity.pem" AUTH_RPC_TLS_KEY="$tls_dir/identity.key" AUTH_RPC_TLS_CA="$tls_dir/ca.pem"

echo "== schemathesis against the running gateway and its OpenAPI document (issue 11)"
scripts/check-gateway-schemathesis.sh --max-time 45

echo "== the run command supervises: each service killed with SIGKILL answers again within 3 s, PostgreSQL restarted under load (issue 23 §1, §3)"
scripts/check-supervision.sh

echo "== PostgreSQL fails over under load: a synchronous standby promoted, the services reconnect, nothing acknowledged lost (issue 23 §3)"
scripts/check-failover.sh

echo "== independent JOSE library for the session tests (joserfc in .data/jose-venv)"
scripts/jose-check/install.sh >/dev/null

echo "== Supabase's official Python client for the Supabase door's tests (.data/supabase-venv)"
scripts/supabase-check/install.sh >/dev/null

echo "== all tests"
swift test --disable-xctest
