#!/usr/bin/env bash
# Validates the deployment files without a container engine or a cluster (docs/deployment.md):
#   - docker-compose.yml renders with deploy/compose.env.example (`docker-compose config`, and
#     with `--profile monitoring`), and stops with a message naming each required secret when
#     that secret is missing;
#   - every Kubernetes manifest in deploy/kubernetes/ (and the Secret template, and the optional
#     CloudNativePG and PodMonitor overlays) passes `kubernetes-validate --strict` for the oldest
#     and newest Kubernetes versions we target;
#   - deploy/check_deploy.py: ports (metrics ports included), addresses, probes, selectors,
#     secrets and hardening agree across the compose file, the manifests, deploy/Dockerfile and
#     deploy/prometheus/prometheus.yml; every alert in deploy/prometheus/alerts.yaml is complete
#     and tested, every panel of deploy/grafana/auth-backend.json has a query, and every metric
#     they read is a string literal in Sources/ (docs/deployment.md, "What operators watch");
#   - promtool: `check rules` on alerts.yaml and on the dashboard's queries, `test rules` on
#     deploy/prometheus/alerts.test.yaml.
# Prints one summary line; exits non-zero on any problem.
#
# Installs what it needs when missing, quietly: docker-compose with apt-get (without the
# recommended Docker engine), promtool with apt-get (Debian's prometheus package),
# kubernetes-validate with pip into a virtual environment under the git-ignored .data/. Needs no
# network once those are installed.
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

command -v promtool >/dev/null || apt_install prometheus

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

compose_config() {  # compose_config ENV_FILE [--profile NAME] [config args...]
    local env_file="$1" profile=()
    shift
    if [ "${1:-}" = --profile ]; then
        profile=(--profile "$2")
        shift 2
    fi
    "${clean_env[@]}" "${compose[@]}" "${profile[@]}" --project-directory "$ROOT" -f "$ROOT/docker-compose.yml" \
        --env-file "$env_file" config "$@"
}

# --- docker-compose ------------------------------------------------------------------------------
if ! compose_config "$ROOT/deploy/compose.env.example" >"$tmp/compose.yml" 2>"$tmp/compose.err"; then
    fail "docker-compose config with deploy/compose.env.example failed:"
    cat "$tmp/compose.err" >&2
fi
if ! compose_config "$ROOT/deploy/compose.env.example" --profile monitoring \
        >"$tmp/compose-monitoring.yml" 2>"$tmp/compose-monitoring.err"; then
    fail "docker-compose --profile monitoring config with deploy/compose.env.example failed:"
    cat "$tmp/compose-monitoring.err" >&2
fi
if ! compose_config "$ROOT/deploy/compose.env.example" --profile tracing \
        >"$tmp/compose-tracing.yml" 2>"$tmp/compose-tracing.err"; then
    fail "docker-compose --profile tracing config with deploy/compose.env.example failed:"
    cat "$tmp/compose-tracing.err" >&2
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
    "$ROOT"/deploy/kubernetes/cloudnative-pg/cluster.yaml "$ROOT"/deploy/kubernetes/monitoring/pod-monitor.yaml)
for version in "${KUBERNETES_VERSIONS[@]}"; do
    if ! "$venv/bin/kubernetes-validate" --strict --quiet --kubernetes-version "$version" \
            "${manifests[@]}" >"$tmp/kv.out" 2>&1; then
        fail "kubernetes-validate --strict (Kubernetes $version):"
        cat "$tmp/kv.out" >&2
    # cert-manager's, CloudNativePG's and the Prometheus Operator's kinds have no schema in
    # kubernetes-validate; check_deploy.py checks them.
    elif grep -v "Couldn't find schema for kind [A-Za-z]* with api version \(cert-manager.io\|postgresql.cnpg.io\|monitoring.coreos.com\)/v1 " "$tmp/kv.out" | grep -q .; then
        fail "kubernetes-validate warnings (Kubernetes $version):"
        cat "$tmp/kv.out" >&2
    fi
done

# --- consistency across the files ----------------------------------------------------------------
if ! summary="$("$venv/bin/python" "$ROOT/deploy/check_deploy.py" --compose-config "$tmp/compose.yml" \
        --compose-monitoring-config "$tmp/compose-monitoring.yml" \
        --compose-tracing-config "$tmp/compose-tracing.yml" \
        --kubernetes "$ROOT/deploy/kubernetes" --dockerfile "$ROOT/deploy/Dockerfile" \
        --prometheus "$ROOT/deploy/prometheus" --grafana "$ROOT/deploy/grafana/auth-backend.json" \
        --sources "$ROOT/Sources" --docs "$ROOT/docs/deployment.md" \
        --dashboard-rules "$tmp/dashboard-rules.yaml" | tail -n 1)"; then
    fail "deploy/check_deploy.py found the problems above"
fi

# --- Prometheus rules ----------------------------------------------------------------------------
# The alerts parse and pass their unit tests; the dashboard's queries (written by check_deploy.py
# as recording rules) parse.
if ! promtool check rules "$ROOT/deploy/prometheus/alerts.yaml" >"$tmp/promtool.out" 2>&1; then
    fail "promtool check rules deploy/prometheus/alerts.yaml:"
    cat "$tmp/promtool.out" >&2
fi
if ! (cd "$ROOT/deploy/prometheus" && promtool test rules alerts.test.yaml) >"$tmp/promtool.out" 2>&1; then
    fail "promtool test rules deploy/prometheus/alerts.test.yaml:"
    cat "$tmp/promtool.out" >&2
fi
if [ -s "$tmp/dashboard-rules.yaml" ] && ! promtool check rules "$tmp/dashboard-rules.yaml" >"$tmp/promtool.out" 2>&1; then
    fail "promtool check rules on deploy/grafana/auth-backend.json's queries:"
    cat "$tmp/promtool.out" >&2
fi

if [ "$failures" -gt 0 ]; then
    echo "check-deploy: FAILED ($failures problem(s) above); checked $summary"
    exit 1
fi
echo "check-deploy: OK - docker-compose.yml, deploy/Dockerfile, deploy/kubernetes, deploy/prometheus and deploy/grafana valid ($summary; Kubernetes ${KUBERNETES_VERSIONS[*]}; alert unit tests pass)"
