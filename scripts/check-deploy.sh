#!/usr/bin/env bash
# Validates the deployment files without a container engine or a cluster (docs/deployment.md):
#   - docker-compose.yml renders with deploy/compose.env.example (`docker-compose config`), and
#     stops with a message naming each required secret when that secret is missing;
#   - every Kubernetes manifest in deploy/kubernetes/ (and the Secret template) passes
#     `kubernetes-validate --strict` for the oldest and newest Kubernetes versions we target;
#   - deploy/check_deploy.py: ports, addresses, probes, selectors, secrets and hardening agree
#     across the compose file, the manifests and deploy/Dockerfile.
# Prints one summary line; exits non-zero on any problem.
#
# Installs what it needs when missing, quietly: docker-compose with apt-get (without the
# recommended Docker engine), kubernetes-validate with pip into a virtual environment under the
# git-ignored .data/. Needs no network once those are installed.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

KUBERNETES_VALIDATE_VERSION=1.37.0
# Oldest and newest Kubernetes the manifests are meant for.
KUBERNETES_VERSIONS=(1.29.0 1.37.0)
REQUIRED_COMPOSE_SECRETS=(AUTH_TLS_DIR AUTH_POSTGRES_PASSWORD AUTH_MASTER_KEY AUTH_OTP_SECRET)

log() { echo "check-deploy: $*" >&2; }

as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else
        log "need root to run: $*"; return 1
    fi
}

apt_install() {
    command -v apt-get >/dev/null || { log "missing $* and no apt-get to install it"; return 1; }
    log "installing $* with apt-get"
    export DEBIAN_FRONTEND=noninteractive
    if ! as_root apt-get install -y -qq --no-install-recommends "$@" >/dev/null 2>&1; then
        as_root apt-get update -qq >/dev/null
        as_root apt-get install -y -qq --no-install-recommends "$@" >/dev/null
    fi
}

# --- tools ---------------------------------------------------------------------------------------
compose=()
if command -v docker-compose >/dev/null; then
    compose=(docker-compose)
elif command -v docker >/dev/null && docker compose version >/dev/null 2>&1; then
    compose=(docker compose)
else
    apt_install docker-compose
    compose=(docker-compose)
fi

venv="$ROOT/.data/deploy-check/venv"
if [ "$("$venv/bin/kubernetes-validate" --version 2>/dev/null)" != "$KUBERNETES_VALIDATE_VERSION" ]; then
    log "installing kubernetes-validate $KUBERNETES_VALIDATE_VERSION into .data/deploy-check/venv"
    rm -rf "$venv"
    mkdir -p "$(dirname "$venv")"
    if ! python3 -m venv "$venv" >/dev/null 2>&1; then
        rm -rf "$venv"
        apt_install python3-venv
        python3 -m venv "$venv" >/dev/null
    fi
    "$venv/bin/pip" install --quiet --disable-pip-version-check \
        "kubernetes-validate==$KUBERNETES_VALIDATE_VERSION" >/dev/null
fi

tmp="$(mktemp -d "${TMPDIR:-/tmp}/check-deploy.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT

failures=0
fail() { log "FAIL: $*"; failures=$((failures + 1)); }

# The caller's environment must not fill in (or hide) values: compose only sees the env file.
clean_env=(env)
while IFS= read -r name; do clean_env+=(-u "$name"); done < <(compgen -e | grep -E '^(AUTH_|COMPOSE_|DOCKER_)' || true)

compose_config() {  # compose_config ENV_FILE [args...]
    local env_file="$1"
    shift
    "${clean_env[@]}" "${compose[@]}" --project-directory "$ROOT" -f "$ROOT/docker-compose.yml" \
        --env-file "$env_file" config "$@"
}

# --- docker-compose ------------------------------------------------------------------------------
if ! compose_config "$ROOT/deploy/compose.env.example" >"$tmp/compose.yml" 2>"$tmp/compose.err"; then
    fail "docker-compose config with deploy/compose.env.example failed:"
    cat "$tmp/compose.err" >&2
fi
for secret in "${REQUIRED_COMPOSE_SECRETS[@]}"; do
    grep -v "^$secret=" "$ROOT/deploy/compose.env.example" >"$tmp/without.env"
    if compose_config "$tmp/without.env" -q >/dev/null 2>"$tmp/without.err"; then
        fail "docker-compose config succeeds without $secret (it must be required)"
    elif ! grep -q "set $secret" "$tmp/without.err"; then
        fail "docker-compose config without $secret does not say to set it:"
        cat "$tmp/without.err" >&2
    fi
done

# --- Kubernetes schemas --------------------------------------------------------------------------
manifests=("$ROOT"/deploy/kubernetes/[0-9]*.yaml "$ROOT"/deploy/kubernetes/templates/*.yaml
    "$ROOT"/deploy/kubernetes/cloudnative-pg/cluster.yaml)
for version in "${KUBERNETES_VERSIONS[@]}"; do
    if ! "$venv/bin/kubernetes-validate" --strict --quiet --kubernetes-version "$version" \
            "${manifests[@]}" >"$tmp/kv.out" 2>&1; then
        fail "kubernetes-validate --strict (Kubernetes $version):"
        cat "$tmp/kv.out" >&2
    # cert-manager's and CloudNativePG's kinds have no schema in kubernetes-validate;
    # check_deploy.py checks them.
    elif grep -v "Couldn't find schema for kind [A-Za-z]* with api version \(cert-manager.io\|postgresql.cnpg.io\)/v1 " "$tmp/kv.out" | grep -q .; then
        fail "kubernetes-validate warnings (Kubernetes $version):"
        cat "$tmp/kv.out" >&2
    fi
done

# --- consistency across the files ----------------------------------------------------------------
if ! summary="$("$venv/bin/python" "$ROOT/deploy/check_deploy.py" --compose-config "$tmp/compose.yml" \
        --kubernetes "$ROOT/deploy/kubernetes" --dockerfile "$ROOT/deploy/Dockerfile" | tail -n 1)"; then
    fail "deploy/check_deploy.py found the problems above"
fi

if [ "$failures" -gt 0 ]; then
    echo "check-deploy: FAILED ($failures problem(s) above); checked $summary"
    exit 1
fi
echo "check-deploy: OK - docker-compose.yml, deploy/Dockerfile and deploy/kubernetes valid ($summary; Kubernetes ${KUBERNETES_VERSIONS[*]})"
