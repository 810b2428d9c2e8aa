#!/usr/bin/env bash
# Writes Sources/AuthUnicode/CoreFoundationUnicodeTables.swift, the Unicode tables that
# AuthUnicode's UnicodeNFKC.swift needs to normalise passwords exactly as Foundation did (the stored hashes
# depend on it), read out of this toolchain's full Foundation (libFoundation.so).
#
#   scripts/codegen/nfkc/generate.sh           regenerate
#   scripts/codegen/nfkc/generate.sh --check   exit 1 when the committed file differs (CI)
#
# After a toolchain upgrade run it with --check and the AuthUnicodeTests: a Foundation whose
# normalisation changed changes what stored password hashes were computed over.
set -euo pipefail
cd "$(dirname "$0")/../../.."
output=Sources/AuthUnicode/CoreFoundationUnicodeTables.swift
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
swiftc -O scripts/codegen/nfkc/main.swift -o "$work/nfkc-generator"
if [[ "${1:-}" == --check ]]; then
    "$work/nfkc-generator" --check "$output"
else
    "$work/nfkc-generator" "$output"
fi
