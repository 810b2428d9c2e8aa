#!/usr/bin/env bash
# Regenerates all code derived from proto/**/*.proto (see docs/codegen.md):
#   Sources/CAuthProto/                  protoc-c output (.pb-c.c; .pb-c.h under include/) + umbrella header
#   Sources/AuthProtobuf/Generated/      Swift message and enum types (*.pb.swift)
#   Sources/AuthAPI/Generated/           Swift service stubs (*.rpc.swift)
#
# Usage: scripts/generate-protos.sh           regenerate in place, removing stale generated files
#        scripts/generate-protos.sh --check   regenerate into a temporary folder and exit 1 with a
#                                             summary if the committed output differs (for CI)
#
# Installs what it needs when missing: protoc-c and the protobuf-c headers with apt-get, the Python
# package `protobuf` (scripts/codegen/requirements.txt) with pip.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CODEGEN="$ROOT/scripts/codegen"

check=0
for arg in "$@"; do
    case "$arg" in
        --check) check=1 ;;
        -h|--help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "generate-protos: unknown argument '$arg' (try --help)" >&2; exit 2 ;;
    esac
done

log() { echo "generate-protos: $*" >&2; }

as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else
        log "need root to run: $*"; return 1
    fi
}

apt_install() {
    log "installing $* with apt-get"
    export DEBIAN_FRONTEND=noninteractive
    if ! as_root apt-get install -y -q "$@" >/dev/null; then
        as_root apt-get update -q >/dev/null
        as_root apt-get install -y -q "$@" >/dev/null
    fi
}

# --- tools -----------------------------------------------------------------------------------
missing_pkgs=()
command -v protoc-c >/dev/null || missing_pkgs+=(protobuf-c-compiler)
[ -f /usr/include/protobuf-c/protobuf-c.h ] || missing_pkgs+=(libprotobuf-c-dev)
if [ "${#missing_pkgs[@]}" -gt 0 ]; then
    command -v apt-get >/dev/null || { log "missing ${missing_pkgs[*]} and no apt-get to install them"; exit 1; }
    apt_install "${missing_pkgs[@]}"
fi

PYTHON="${PYTHON:-python3}"
command -v "$PYTHON" >/dev/null || { log "python3 is required"; exit 1; }
# The range below is the one in scripts/codegen/requirements.txt.
if ! "$PYTHON" -c '
import google.protobuf as p, google.protobuf.descriptor_pb2
v = tuple(int(x) for x in p.__version__.split(".")[:2])
raise SystemExit(0 if (4, 21) <= v < (8, 0) else 1)
' >/dev/null 2>&1; then
    log "installing Python requirements (scripts/codegen/requirements.txt) with pip"
    if ! "$PYTHON" -m pip install --quiet --disable-pip-version-check -r "$CODEGEN/requirements.txt"; then
        # A distribution's own python3 refuses pip installs (PEP 668); the package is harmless there.
        log "retrying pip with PIP_BREAK_SYSTEM_PACKAGES=1"
        PIP_BREAK_SYSTEM_PACKAGES=1 "$PYTHON" -m pip install --quiet --disable-pip-version-check \
            -r "$CODEGEN/requirements.txt"
    fi
fi

# --- inputs ----------------------------------------------------------------------------------
cd "$ROOT/proto"
mapfile -t protos < <(find . -type f -name '*.proto' | sed 's|^\./||' | LC_ALL=C sort)
if [ "${#protos[@]}" -eq 0 ]; then
    log "no .proto files under proto/"
    exit 1
fi

tmp="$(mktemp -d "${TMPDIR:-/tmp}/generate-protos.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/c"

# --- protoc-c: C code and the descriptor set the Swift generator reads --------------------------
if ! protoc-c --proto_path="$ROOT/proto" --c_out="$tmp/c" \
        --descriptor_set_out="$tmp/descriptors.pb" --include_imports --include_source_info \
        "${protos[@]}"; then
    log "protoc-c failed (see above); note that protoc-c 1.4 rejects proto3 'optional'"
    exit 1
fi
protoc_c_version="$(protoc-c --version | sed -n 1p)"  # sed reads all: no SIGPIPE under pipefail

# --- Swift code, comparison or write-back ------------------------------------------------------
args=(--descriptor-set "$tmp/descriptors.pb" --c-out "$tmp/c" --root "$ROOT"
      --protoc-c-version "$protoc_c_version")
[ "$check" -eq 1 ] && args+=(--check)
"$PYTHON" "$CODEGEN/generate_swift.py" "${args[@]}" "${protos[@]}"
