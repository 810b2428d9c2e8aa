#!/usr/bin/env bash
# Installs the independent JOSE library used by verify.py (PyPI `joserfc`) into a virtual
# environment under the git-ignored .data/ folder. Idempotent; prints the venv's python path.
set -euo pipefail
cd "$(dirname "$0")/../.."
venv=.data/jose-venv
# Tests run in parallel may start this together: one installs while the others wait.
mkdir -p .data
exec 9>"$venv.lock"
flock 9
if ! "$venv/bin/python" -c 'import joserfc' >/dev/null 2>&1; then
    mkdir -p .data
    python3 -m venv "$venv" >&2
    "$venv/bin/pip" install -q --disable-pip-version-check 'joserfc>=1.0,<2' >&2
fi
echo "$(pwd)/$venv/bin/python"
