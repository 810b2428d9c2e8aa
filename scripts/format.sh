#!/usr/bin/env bash
# Formats the Swift sources with .swift-format (swift-nio's settings: 4 spaces, 120 columns),
# generated code aside (the protoc-c stubs and the NFKC tables, which their generators write).
#
#   scripts/format.sh           rewrite the files in place
#   scripts/format.sh --check   exit 1, naming the files, when one is not formatted (CI)
set -euo pipefail
cd "$(dirname "$0")/.."

check=0
case "${1:-}" in
    --check) check=1 ;;
    "") ;;
    *) echo "format: unknown argument '$1' (try --check)" >&2; exit 2 ;;
esac

mapfile -t files < <(git ls-files --cached --others --exclude-standard '*.swift' \
    | grep -v -e '^Sources/AuthAPI/Generated/' -e '^Sources/AuthProtobuf/Generated/' \
        -e '^Sources/AuthUnicode/CoreFoundationUnicodeTables.swift$' \
    | while read -r file; do [ -f "$file" ] && echo "$file"; done)

if [ "$check" -eq 0 ]; then
    swift format format --configuration .swift-format --parallel --in-place "${files[@]}"
    exit 0
fi

# Format a copy and compare: the tree itself is never touched by a check.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for file in "${files[@]}"; do
    mkdir -p "$work/$(dirname "$file")"
    cp "$file" "$work/$file"
done
cp .swift-format "$work/"
(cd "$work" && swift format format --configuration .swift-format --parallel --in-place "${files[@]}")
unformatted=()
for file in "${files[@]}"; do
    cmp -s "$file" "$work/$file" || unformatted+=("$file")
done
if [ "${#unformatted[@]}" -gt 0 ]; then
    printf '%s\n' "${unformatted[@]}" >&2
    echo "format: ${#unformatted[@]} file(s) above are not formatted: run scripts/format.sh" >&2
    exit 1
fi
echo "format: ${#files[@]} Swift files formatted as .swift-format says"
