#!/usr/bin/env bash
# Runs the protocol scenario (scenario.py) against a running auth RPC server.
#
#   AUTH_RPC_SECRET=<base64 secret> scripts/protocol-check/check.sh HOST:PORT        # plaintext
#   AUTH_RPC_TLS_CERT=a.pem AUTH_RPC_TLS_KEY=a.key AUTH_RPC_TLS_CA=ca.pem AUTH_RPC_SERVICE=authctl \
#       scripts/protocol-check/check.sh HOST:PORT                                     # mutual TLS
#
# AUTH_RPC_SERVER_NAME names the service expected at HOST:PORT (e.g. identity).
# Sets up the Python venv (.data/protocol-venv, PyPI `protobuf`) when missing. The message
# classes come from proto/ compiled by protoc-c --descriptor_set_out at run time.
# Exits non-zero on any failure; the last line is `N passed, M failed`.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
venv="$repo/.data/protocol-venv"

if [ $# -ne 1 ]; then
  echo "usage: $0 SERVICE_ADDRESS   (HOST:PORT; AUTH_RPC_SECRET or AUTH_RPC_TLS_* must be set)" >&2
  exit 2
fi
if [ -z "${AUTH_RPC_SECRET:-}" ] && [ -z "${AUTH_RPC_TLS_CERT:-}" ]; then
  echo "set AUTH_RPC_SECRET (plaintext) or AUTH_RPC_TLS_CERT, AUTH_RPC_TLS_KEY, AUTH_RPC_TLS_CA (mutual TLS)" >&2
  exit 2
fi
if ! command -v protoc-c >/dev/null 2>&1; then
  echo "protoc-c not found (apt-get install protobuf-c-compiler)" >&2
  exit 2
fi
if ! "$venv/bin/python" -c 'import google.protobuf' >/dev/null 2>&1; then
  echo "# setting up $venv" >&2
  mkdir -p "$(dirname "$venv")"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q protobuf
fi

export PYTHONDONTWRITEBYTECODE=1
exec "$venv/bin/python" "$here/scenario.py" "$1"
