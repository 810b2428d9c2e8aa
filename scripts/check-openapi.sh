#!/usr/bin/env bash
# Validates the gateway's OpenAPI document (Sources/AuthGateway/openapi.yaml, tracker issue 11):
#   - openapi-spec-validator: valid OpenAPI 3.1;
#   - scripts/openapi/check_contract.py: it holds issue 11's contract (every route, its error
#     statuses and reasons, the session body, security on exactly the authenticated routes,
#     Retry-After on every 429, X-Request-Id on every response, valid examples);
#   - scripts/openapi/yaml-to-json.py --check: Sources/AuthGateway/openapi.json (served at
#     GET /openapi.json) is what openapi.yaml gives.
# Prints one summary line; exits non-zero on any problem. `scripts/check-openapi.sh FILE` checks
# another copy of the document instead.
#
# Installs what it needs when missing, quietly: the PyPI packages pinned in
# scripts/openapi/requirements.txt, into a virtual environment under the git-ignored .data/.
# Needs no network once they are installed.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
spec="${1:-$ROOT/Sources/AuthGateway/openapi.yaml}"
requirements="$ROOT/scripts/openapi/requirements.txt"

log() { echo "check-openapi: $*" >&2; }

venv="$ROOT/.data/openapi-check/venv"
# The venv is current when it was made from this very requirements file.
if ! cmp -s "$requirements" "$venv/requirements.txt" 2>/dev/null; then
    log "installing openapi-spec-validator (scripts/openapi/requirements.txt) into .data/openapi-check/venv"
    rm -rf "$venv"
    mkdir -p "$(dirname "$venv")"
    if ! python3 -m venv "$venv" >/dev/null 2>&1; then
        rm -rf "$venv"
        log "installing python3-venv with apt-get"
        export DEBIAN_FRONTEND=noninteractive
        apt-get install -y -qq --no-install-recommends python3-venv >/dev/null 2>&1 ||
            { apt-get update -qq >/dev/null && apt-get install -y -qq --no-install-recommends python3-venv >/dev/null; }
        python3 -m venv "$venv" >/dev/null
    fi
    "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$requirements" >/dev/null
    cp "$requirements" "$venv/requirements.txt"
fi

failures=0
if ! out="$("$venv/bin/openapi-spec-validator" "$spec" 2>&1)"; then
    echo "$out" >&2
    log "FAIL: openapi-spec-validator: $spec is not a valid OpenAPI document"
    failures=$((failures + 1))
fi
if ! summary="$("$venv/bin/python" "$ROOT/scripts/openapi/check_contract.py" "$spec")"; then
    echo "$summary" >&2
    failures=$((failures + 1))
fi

# The JSON the gateway serves at /openapi.json is generated from the YAML and committed.
if [ -z "${1:-}" ] && ! "$venv/bin/python" "$ROOT/scripts/openapi/yaml-to-json.py" --check >&2; then
    failures=$((failures + 1))
fi

if [ "$failures" -gt 0 ]; then
    echo "check-openapi: FAILED ($failures check(s) above) for $spec"
    exit 1
fi
echo "check-openapi: OK - ${spec#"$ROOT"/} is valid OpenAPI 3.1 (openapi-spec-validator $("$venv/bin/pip" show openapi-spec-validator 2>/dev/null | sed -n 's/^Version: //p')); ${summary#check_contract: OK - }"
