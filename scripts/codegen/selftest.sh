#!/usr/bin/env bash
# Self-test of the generator on a kitchen-sink schema (every scalar type, repeated fields of every
# kind, oneofs with scalar/string/bytes/enum/message members, Swift keywords as names, acronyms,
# enum prefixes, a cross-file import, a service): generates it into a temporary Swift package with
# the real AuthProtobuf runtime and a stand-in AuthRPC, builds it (warnings are errors) and runs
# its tests. Takes about a minute. Run after changing scripts/codegen/ or Sources/AuthProtobuf/*.swift:
#   scripts/codegen/selftest.sh
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
HERE="$ROOT/scripts/codegen/selftest"
work="$(mktemp -d "${TMPDIR:-/tmp}/codegen-selftest.XXXXXX")"
trap 'rm -rf "$work"' EXIT

mkdir -p "$work/Sources/AuthProtobuf" "$work/Sources/AuthRPC" "$work/Tests/KitchenSinkTests" "$work/c"
cp -R "$ROOT/Sources/CProtobufC" "$work/Sources/"
cp -R "$ROOT/Sources/AuthText" "$work/Sources/"
cp "$ROOT"/Sources/AuthProtobuf/*.swift "$work/Sources/AuthProtobuf/"
cp -R "$ROOT"/Sources/AuthProtobuf/Dynamic "$work/Sources/AuthProtobuf/"
cp "$HERE/AuthRPCStub/AuthRPCStub.swift" "$work/Sources/AuthRPC/"
cp "$HERE/Tests/KitchenSinkTests.swift" "$work/Tests/KitchenSinkTests/"
cat > "$work/Package.swift" <<'SWIFT'
// swift-tools-version:6.0
import PackageDescription
let strict: [SwiftSetting] = [.enableUpcomingFeature("ExistentialAny"), .unsafeFlags(["-warnings-as-errors"])]
let package = Package(
    name: "codegen-selftest",
    targets: [
        .systemLibrary(name: "CProtobufC", pkgConfig: "libprotobuf-c"),
        .target(name: "CAuthProto", dependencies: ["CProtobufC"]),
        .target(name: "AuthText", swiftSettings: strict),
        .target(name: "AuthProtobuf", dependencies: ["AuthText", "CAuthProto", "CProtobufC"], swiftSettings: strict),
        .target(name: "AuthRPC", dependencies: ["AuthProtobuf"], swiftSettings: strict),
        .target(name: "AuthAPI", dependencies: ["AuthRPC", "AuthProtobuf"], swiftSettings: strict),
        .testTarget(name: "KitchenSinkTests", dependencies: ["AuthProtobuf", "AuthAPI", "AuthRPC"], swiftSettings: strict),
    ]
)
SWIFT

cd "$HERE/proto"
mapfile -t protos < <(find . -type f -name '*.proto' | sed 's|^\./||' | LC_ALL=C sort)
protoc-c --proto_path="$HERE/proto" --c_out="$work/c" --descriptor_set_out="$work/c/set.pb" \
    --include_imports --include_source_info "${protos[@]}"
python3 "$ROOT/scripts/codegen/generate_swift.py" --descriptor-set "$work/c/set.pb" --c-out "$work/c" \
    --root "$work" --protoc-c-version "$(protoc-c --version | sed -n 1p)" "${protos[@]}" >/dev/null

cd "$work"
swift build --build-tests
swift test --disable-xctest
