#!/usr/bin/env bash
# Puts what the runtime image needs from a Swift build into one folder, the layout
# deploy/Dockerfile's runtime stage copies (used by its builder stage and by
# deploy/smoke-test-podman.sh, so both images are laid out alike):
#
#   deploy/stage-binaries.sh BIN_DIR STAGING_DIR [--no-strip]
#
#   STAGING_DIR/bin/             identity, otp-dispatch, session, gateway, authctl (their
#                                resources, migrations and the like, are embedded in them)
#   STAGING_DIR/lib/swift/linux/ the Swift runtime libraries the executables load: only those
#                                `ldd` resolves into the toolchain's runtime folder (the folder
#                                of libswiftCore.so), once for all five executables
#
# BIN_DIR is `swift build [-c release] --show-bin-path` of a build on Debian 12 that links the
# Swift runtime dynamically (the default; not --static-swift-stdlib). Executables and libraries
# are stripped of symbols and debug info unless --no-strip. The runtime image puts the libraries
# in /usr/lib/swift/linux and lists that folder in /etc/ld.so.conf.d, so executables find them
# whatever rpath their toolchain gave them.
set -euo pipefail

die() { echo "stage-binaries: $*" >&2; exit 1; }

[ $# -ge 2 ] || die "usage: deploy/stage-binaries.sh BIN_DIR STAGING_DIR [--no-strip]"
bin_dir="$1"
staging="$2"
strip_files=1
[ "${3:-}" = --no-strip ] && strip_files=0

products=(identity otp-dispatch session gateway authctl)
for product in "${products[@]}"; do
    [ -x "$bin_dir/$product" ] || die "no $bin_dir/$product: build first (swift build)"
done

swift_core="$(ldd "$bin_dir/authctl" | awk '$1 == "libswiftCore.so" { print $3 }')"
[ -n "$swift_core" ] \
    || die "$bin_dir/authctl does not load libswiftCore.so: build without --static-swift-stdlib"
runtime_dir="$(dirname "$swift_core")"

mkdir -p "$staging/bin" "$staging/lib/swift/linux"
libraries=()
for product in "${products[@]}"; do
    if ldd "$bin_dir/$product" | grep -q 'not found'; then
        ldd "$bin_dir/$product" | grep 'not found' >&2
        die "$product needs libraries this machine lacks"
    fi
    # The gateway and authctl reach the database only through the services (docs/architecture.md):
    # neither links libpq.
    case "$product" in
        gateway | authctl)
            if ldd "$bin_dir/$product" | grep -q 'libpq\.so'; then
                die "$product loads libpq: something it depends on imports AuthPostgres (the gateway and authctl build on AuthConfiguration, not AuthServiceRuntime)"
            fi ;;
    esac
    install -m 0755 "$bin_dir/$product" "$staging/bin/"
    mapfile -t -O "${#libraries[@]}" libraries < <(ldd "$bin_dir/$product" | awk -v dir="$runtime_dir/" 'index($3, dir) == 1 { print $3 }')
done
# Only FoundationEssentials: full Foundation would bring ICU (40 MB; docs/deployment.md, "Image size").
for library in $(printf '%s\n' "${libraries[@]}" | sort -u); do
    case "$(basename "$library")" in
        libFoundation.so | libFoundationInternationalization.so | lib_FoundationICU.so)
            die "$library is loaded by an executable: something imports full Foundation (find it with: readelf -p .swift1_autolink_entries on the build's objects)" ;;
    esac
    install -m 0644 "$library" "$staging/lib/swift/linux/"
done

if [ "$strip_files" -eq 1 ]; then
    for product in "${products[@]}"; do strip "$staging/bin/$product"; done
    # --strip-unneeded keeps the dynamic symbols other objects link against.
    for library in "$staging"/lib/swift/linux/*.so; do strip --strip-unneeded "$library"; done
fi
chmod -R a+rX,go-w "$staging"
echo "stage-binaries: $(du -sh "$staging/bin" | cut -f1) of executables, $(ls "$staging/lib/swift/linux" | wc -l) Swift runtime libraries ($(du -sh "$staging/lib" | cut -f1)) in $staging" >&2
