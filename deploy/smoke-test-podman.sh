#!/usr/bin/env bash
# End-to-end smoke test of deploy/Dockerfile and docker-compose.yml with podman, on a Debian 12
# machine without a Docker engine and without a reachable image registry. NOT run in CI.
#
#   deploy/smoke-test-podman.sh [--bin-dir DIR] [--keep-images]
#
#   --bin-dir DIR    host-built executables (default .build/release), built on Debian 12 with
#                    swift build -c release --static-swift-stdlib
#   --keep-images    keep the base images it builds (localhost/debian:bookworm and the
#                    PostgreSQL image) for the next run; the images of the run are removed anyway
#
# What it does (docs/deployment.md, "With podman instead of Docker"):
#   1. installs podman, runc, debootstrap, docker-compose when missing; uses its own
#      containers.conf (CONTAINERS_CONF) with the two settings these machines need;
#   2. builds localhost/debian:bookworm with debootstrap (unless present), an image holding the
#      host-built executables, then the real deploy/Dockerfile with SWIFT_IMAGE/RUNTIME_IMAGE/
#      BINARIES_FROM pointing at those, and a PostgreSQL 15 image from Debian's packages that
#      honours the official image's POSTGRES_USER/POSTGRES_PASSWORD/POSTGRES_DB;
#   3. starts podman's API service, runs healthchecks every 2 s (podman runs none without
#      systemd), and `docker-compose up -d` with generated secrets and an override file that
#      swaps in the local images and a free host port;
#   4. checks: every container healthy, GET /health/live and /health/ready answer 200 with all
#      three services SERVING, authctl works inside a container, the services run as uid 10001,
#      `docker-compose stop session` ends it by SIGTERM within the grace period and then
#      /health/ready answers 503 naming session;
#   5. removes every container, volume, network, image and process it started, whatever happens.
# Prints one summary line; exits 0 when every check passed.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin_dir="$ROOT/.build/release"
keep_images=0
while [ $# -gt 0 ]; do
    case "$1" in
        --bin-dir) bin_dir="$(cd "$2" && pwd)"; shift 2 ;;
        --keep-images) keep_images=1; shift ;;
        -h|--help) sed -n '2,30p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "smoke-test: unknown argument '$1' (try --help)" >&2; exit 2 ;;
    esac
done

log() { echo "smoke-test: $*" >&2; }
die() { log "$*"; exit 1; }

[ "$(id -u)" -eq 0 ] || die "run as root (podman's rootful mode is what works on these machines)"
if [ -S /var/run/docker.sock ] && command -v docker >/dev/null && docker info >/dev/null 2>&1; then
    die "a Docker engine runs here: use it directly (docs/deployment.md); this test is for podman-only machines"
fi

products=(identity otp-dispatch session gateway authctl)
for product in "${products[@]}"; do
    [ -x "$bin_dir/$product" ] || die "no $bin_dir/$product: build with 'swift build -c release --static-swift-stdlib' (or pass --bin-dir)"
    if ldd "$bin_dir/$product" 2>/dev/null | grep -q 'libswiftCore'; then
        die "$bin_dir/$product links the Swift runtime dynamically: build with --static-swift-stdlib"
    fi
done

# --- packages and podman settings ----------------------------------------------------------------
missing=()
for tool in podman:podman runc:runc debootstrap:debootstrap docker-compose:docker-compose curl:curl; do
    command -v "${tool%%:*}" >/dev/null || missing+=("${tool#*:}")
done
if [ "${#missing[@]}" -gt 0 ]; then
    log "installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    # No recommends: docker-compose recommends docker.io, a Docker engine.
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    # podman's own recommendations that matter for networking and healthchecks.
    apt-get install -y -qq netavark aardvark-dns catatonit slirp4netns uidmap fuse-overlayfs >/dev/null || true
fi

work="$(mktemp -d "${TMPDIR:-/tmp}/auth-smoke.XXXXXX")"
export CONTAINERS_CONF="$work/containers.conf"
cat >"$CONTAINERS_CONF" <<'EOF'
[containers]
default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]
[engine]
runtime = "runc"
EOF

tag="smoke-$$"
project="auth-smoke-$$"
binaries_image="localhost/auth-backend-binaries:$tag"
app_image="localhost/auth-backend:$tag"
postgres_image="localhost/auth-postgres:15-smoke"
base_image="localhost/debian:bookworm"
created_images=("$binaries_image" "$app_image")
podman_pid=""
healthcheck_pid=""
compose=(docker-compose --project-name "$project" --project-directory "$ROOT"
         -f "$ROOT/docker-compose.yml" -f "$work/override.yml" --env-file "$work/smoke.env")

cleanup() {
    local status=$?
    set +e
    if [ -n "$podman_pid" ] && [ -S "$work/podman.sock" ]; then
        "${compose[@]}" down --volumes --remove-orphans --timeout 20 >"$work/down.log" 2>&1 \
            || { log "docker-compose down failed:"; cat "$work/down.log" >&2; }
    fi
    # Anything of the project left behind (e.g. compose failed half-way).
    for id in $(podman ps -aq --filter "label=com.docker.compose.project=$project" 2>/dev/null); do
        podman rm -f "$id" >/dev/null 2>&1
    done
    for volume in $(podman volume ls -q --filter "label=com.docker.compose.project=$project" 2>/dev/null); do
        podman volume rm -f "$volume" >/dev/null 2>&1
    done
    for network in $(podman network ls -q --filter "label=com.docker.compose.project=$project" 2>/dev/null); do
        podman network rm -f "$network" >/dev/null 2>&1
    done
    [ -n "$healthcheck_pid" ] && kill "$healthcheck_pid" 2>/dev/null && wait "$healthcheck_pid" 2>/dev/null
    [ -n "$podman_pid" ] && kill "$podman_pid" 2>/dev/null && wait "$podman_pid" 2>/dev/null
    if [ "$keep_images" -eq 0 ]; then
        created_images+=("$postgres_image")
        [ "${built_base:-0}" -eq 1 ] && created_images+=("$base_image")
    fi
    for image in "${created_images[@]}"; do
        podman image exists "$image" 2>/dev/null && podman rmi -f "$image" >/dev/null 2>&1
    done
    podman image prune -f >/dev/null 2>&1   # dangling intermediate layers of our builds
    rm -rf "$work"
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- images ------------------------------------------------------------------------------------
if ! podman image exists "$base_image"; then
    mirror="$(sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -n 1)"
    mirror="${mirror:-http://deb.debian.org/debian}"
    log "building $base_image with debootstrap from $mirror (~1 min)"
    debootstrap --variant=minbase bookworm "$work/rootfs" "$mirror" >"$work/debootstrap.log" 2>&1 \
        || { cat "$work/debootstrap.log" >&2; die "debootstrap failed"; }
    tar -C "$work/rootfs" -c . | podman import --quiet - "$base_image" >/dev/null
    rm -rf "$work/rootfs"
    built_base=1
fi

log "building $binaries_image from $bin_dir"
mkdir -p "$work/binaries/staging/bin"
for product in "${products[@]}"; do
    install -m 0755 "$bin_dir/$product" "$work/binaries/staging/bin/"
    strip "$work/binaries/staging/bin/$product" 2>/dev/null || true   # as deploy/Dockerfile does
done
find -H "$bin_dir" -maxdepth 1 -type d -name '*.resources' -exec cp -R {} "$work/binaries/staging/bin/" \;
tar -C "$work/binaries" -c staging | podman import --quiet - "$binaries_image" >/dev/null

log "building $app_image with deploy/Dockerfile"
mkdir -p "$work/context"   # the runtime stage reads nothing from the context
podman build --quiet -f "$ROOT/deploy/Dockerfile" \
    --build-arg SWIFT_IMAGE="$base_image" --build-arg RUNTIME_IMAGE="$base_image" \
    --build-arg BINARIES_FROM="$binaries_image" -t "$app_image" "$work/context" >"$work/build.log" 2>&1 \
    || { cat "$work/build.log" >&2; die "podman build of deploy/Dockerfile failed"; }

if ! podman image exists "$postgres_image"; then
    log "building $postgres_image (Debian's PostgreSQL 15, official image's environment variables)"
    mkdir -p "$work/postgres"
    cat >"$work/postgres/entrypoint.sh" <<'EOF'
#!/bin/sh
# Like the official postgres image: initialise $PGDATA from POSTGRES_* on first start.
set -eu
export PATH="/usr/lib/postgresql/15/bin:$PATH"
if [ ! -s "$PGDATA/PG_VERSION" ]; then
    pwfile="$(mktemp)"
    printf '%s' "$POSTGRES_PASSWORD" >"$pwfile"
    initdb -D "$PGDATA" -U "$POSTGRES_USER" --pwfile="$pwfile" --auth-local=trust --auth-host=scram-sha-256 >/dev/null
    rm -f "$pwfile"
    echo "host all all all scram-sha-256" >>"$PGDATA/pg_hba.conf"
    pg_ctl -D "$PGDATA" -o "-c listen_addresses=''" -w start >/dev/null
    createdb -U "$POSTGRES_USER" "$POSTGRES_DB"
    pg_ctl -D "$PGDATA" -m fast -w stop >/dev/null
fi
exec postgres -D "$PGDATA" -c listen_addresses='*'
EOF
    cat >"$work/postgres/Containerfile" <<EOF
FROM $base_image
RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends postgresql-15 \
    && rm -rf /var/lib/apt/lists/* \
    && mkdir -p /var/lib/postgresql/data /var/run/postgresql \
    && chown -R postgres:postgres /var/lib/postgresql /var/run/postgresql && chmod 700 /var/lib/postgresql/data
COPY entrypoint.sh /usr/local/bin/entrypoint.sh
ENV PGDATA=/var/lib/postgresql/data
USER postgres
STOPSIGNAL SIGINT
ENTRYPOINT ["/bin/sh", "/usr/local/bin/entrypoint.sh"]
EOF
    podman build --quiet -t "$postgres_image" "$work/postgres" >"$work/postgres-build.log" 2>&1 \
        || { cat "$work/postgres-build.log" >&2; die "building the PostgreSQL image failed"; }
fi

# --- compose up ----------------------------------------------------------------------------------
port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
"$ROOT/scripts/lib/make-dev-certs.sh" "$work/tls" identity otp-dispatch session gateway authctl
chown 10001:10001 "$work/tls"/*.key    # the containers' user reads the keys
chmod 755 "$work/tls"
cat >"$work/smoke.env" <<EOF
AUTH_TLS_DIR=$work/tls
AUTH_MASTER_KEY=$(openssl rand -base64 32)
AUTH_OTP_SECRET=$(openssl rand -base64 32)
AUTH_POSTGRES_PASSWORD=$(openssl rand -hex 24)
AUTH_IMAGE=$app_image
AUTH_GATEWAY_PUBLISHED_PORT=$port
EOF
cat >"$work/override.yml" <<EOF
services:
  postgres:
    image: $postgres_image
EOF

podman system service --time=0 "unix://$work/podman.sock" >"$work/podman-service.log" 2>&1 &
podman_pid=$!
export DOCKER_HOST="unix://$work/podman.sock"
for _ in $(seq 50); do [ -S "$work/podman.sock" ] && break; sleep 0.2; done
[ -S "$work/podman.sock" ] || die "podman system service did not start"

# podman runs no healthchecks without systemd: run them, for this project's containers only.
(
    while sleep 2; do
        for id in $(podman ps -q --filter "label=com.docker.compose.project=$project"); do
            podman healthcheck run "$id" >/dev/null 2>&1 || true
        done
    done
) &
healthcheck_pid=$!

log "docker-compose up (project $project, gateway on 127.0.0.1:$port)"
if ! timeout 300 "${compose[@]}" up -d --no-build >"$work/up.log" 2>&1; then
    cat "$work/up.log" >&2
    "${compose[@]}" ps >&2 || true
    "${compose[@]}" logs --no-color --tail 30 >&2 || true
    die "docker-compose up failed"
fi

failures=0
check() {  # check DESCRIPTION COMMAND...
    local description="$1"
    shift
    if "$@" >/dev/null; then log "ok: $description"; else log "FAIL: $description"; failures=$((failures + 1)); fi
}
wait_for() {  # wait_for SECONDS COMMAND...: retries COMMAND every second
    local deadline=$((SECONDS + $1))
    shift
    until "$@"; do [ "$SECONDS" -lt "$deadline" ] || return 1; sleep 1; done
}
container() { podman ps -q --filter "label=com.docker.compose.project=$project" --filter "label=com.docker.compose.service=$1" | head -n 1; }
healthy() { [ "$(podman inspect --format '{{.State.Health.Status}}' "$(container "$1")" 2>/dev/null)" = healthy ]; }
all_healthy() { for s in postgres identity otp-dispatch session gateway; do healthy "$s" || return 1; done; }
http_status() { curl -s -o "$work/body" -w '%{http_code}' --max-time 5 "http://127.0.0.1:$port$1" || true; }
ready_ok() {
    [ "$(http_status /health/ready)" = 200 ] && grep -q '"identity":"SERVING"' "$work/body" \
        && grep -q '"otp-dispatch":"SERVING"' "$work/body" && grep -q '"session":"SERVING"' "$work/body"
}
ready_without_session() {
    [ "$(http_status /health/ready)" = 503 ] && grep -q '"session":"UNREACHABLE"' "$work/body"
}

check "every container healthy (postgres, identity, otp-dispatch, session, gateway)" wait_for 90 all_healthy
check "GET /health/live answers 200" wait_for 10 test "$(http_status /health/live)" = 200
check "GET /health/ready answers 200 with identity, otp-dispatch, session SERVING" wait_for 30 ready_ok
log "/health/ready: $(cat "$work/body" 2>/dev/null)"
check "authctl health inside the identity container" \
    podman exec "$(container identity)" authctl health --target 127.0.0.1:7101 --timeout 2
check "session reachable from the gateway container by its compose name" \
    podman exec "$(container gateway)" authctl health --target session:7103 --timeout 2
for bundle in "$work"/binaries/staging/bin/*.resources; do
    [ -e "$bundle" ] || continue
    check "resource bundle $(basename "$bundle") next to the executables" \
        podman exec "$(container session)" test -d "/opt/auth/bin/$(basename "$bundle")"
done
# The Kubernetes manifests' exec commands (probes, preStop, command), run in the image as written.
identity_id="$(container identity)"
while IFS= read -r json; do
    mapfile -t argv < <(python3 -c 'import json, sys; print("\n".join(json.loads(sys.argv[1])))' "$json")
    case "${argv[0]}" in
        /opt/auth/bin/identity|/bin/sleep) check "Kubernetes command ${argv[0]} exists in the image" podman exec "$identity_id" test -x "${argv[0]}" ;;
        *) check "Kubernetes exec of identity succeeds: ${argv[*]}" podman exec "$identity_id" "${argv[@]}" ;;
    esac
done < <(sed -n 's/^ *command: \(\[.*\]\) *$/\1/p' "$ROOT/deploy/kubernetes/20-identity.yaml")
check "services run as uid 10001" test "$(podman exec "$(container session)" id -u)" = 10001
check "the root filesystem is read-only" \
    bash -c "! podman exec '$(container gateway)' touch /opt/auth/probe 2>/dev/null"

session_id="$(container session)"
started=$SECONDS
"${compose[@]}" stop --timeout 15 session >"$work/stop.log" 2>&1 || true
stop_seconds=$((SECONDS - started))
exit_code="$(podman inspect --format '{{.State.ExitCode}}' "$session_id" 2>/dev/null || echo '?')"
check "session stops on SIGTERM within the grace period (exit $exit_code after ${stop_seconds}s)" \
    test "$exit_code" = 0 -a "$stop_seconds" -lt 15
check "GET /health/ready answers 503 naming session once it is stopped" wait_for 15 ready_without_session

if [ "$failures" -gt 0 ]; then
    log "logs of the stack:"
    "${compose[@]}" logs --no-color --tail 40 >&2 || true
    echo "smoke-test: FAILED ($failures check(s) above)"
    exit 1
fi
echo "smoke-test: OK - image built from deploy/Dockerfile, compose stack healthy, /health/ready 200, graceful stop verified"
