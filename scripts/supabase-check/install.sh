#!/usr/bin/env bash
# Installs Supabase's official Python client (PyPI `supabase-auth`, pinned in requirements.txt)
# into a virtual environment under the git-ignored .data/ folder, for the tests that drive the
# Supabase door with it (docs/supabase.md). Idempotent; prints the venv's python path.
set -euo pipefail
cd "$(dirname "$0")/../.."
venv=.data/supabase-venv
# Tests run in parallel may start this together: one installs while the others wait.
mkdir -p .data
exec 9>"$venv.lock"
flock 9
requirements=scripts/supabase-check/requirements.txt
if ! cmp -s "$requirements" "$venv/requirements.txt" 2>/dev/null; then
    rm -rf "$venv"
    mkdir -p .data
    python3 -m venv "$venv" >&2
    "$venv/bin/pip" install -q --disable-pip-version-check -r "$requirements" >&2
    cp "$requirements" "$venv/requirements.txt"
fi
echo "$(pwd)/$venv/bin/python"
