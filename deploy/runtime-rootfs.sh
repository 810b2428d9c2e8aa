#!/bin/bash
# Builds the whole filesystem of the runtime image in ROOTFS; deploy/Dockerfile runs it in a
# Debian 12 slim stage that has the executables' Debian libraries installed, the staged
# executables in STAGING (deploy/stage-binaries.sh) and the Swift runtime in
# /usr/lib/swift/linux, then copies ROOTFS into an empty image:
#
#   deploy/runtime-rootfs.sh STAGING ROOTFS
#
# ROOTFS gets the executables and resource bundles (/opt/auth/bin), bash, coreutils and grep
# (the probes and healthchecks run them), every shared library those load according to `ldd`
# (the Swift runtime in /usr/lib/swift/linux, libpq, OpenSSL, protobuf-c, glibc, ...), CA
# certificates, time zones, OpenSSL's configuration, nsswitch.conf, the loader's cache, the
# users root and auth (10001), and /tmp. Nothing else of Debian: no package manager, perl or
# documentation (about 25 MB instead of the 91 MB of Debian slim with those libraries).
set -euo pipefail

[ $# -eq 2 ] || { echo "usage: deploy/runtime-rootfs.sh STAGING ROOTFS" >&2; exit 2; }
staging="$1"
root="$2"

copy() {  # copy PATH: PATH at the same place in ROOTFS; for a symlink, also what it points to
    local dir file
    dir="$(cd "$(dirname "$1")" && pwd -P)"
    file="$dir/$(basename "$1")"
    if [ -e "$root$file" ] || [ -L "$root$file" ]; then return 0; fi
    mkdir -p "$root$dir"
    if [ -d "$file" ] && [ ! -L "$file" ]; then mkdir -p "$root$file"; return 0; fi
    cp -P --preserve=mode,timestamps "$file" "$root$file"
    if [ -L "$file" ]; then copy "$(readlink -f "$file")"; fi
}

mkdir -p "$root/opt/auth" "$root/etc/ld.so.conf.d"
# Debian's merged /usr: /bin, /lib, /lib64, ... are symlinks into /usr.
for link in /bin /sbin /lib /lib32 /lib64 /libx32; do
    if [ -L "$link" ]; then cp -P "$link" "$root$link"; fi
done
cp -R "$staging/bin" "$root/opt/auth/bin"

programs=("$root"/opt/auth/bin/*)
while IFS= read -r path; do
    if [ -f "$path" ] && [ -x "$path" ] && [ ! -L "$path" ]; then
        copy "$path"
        programs+=("$path")
    fi
done < <(dpkg -L bash coreutils grep | grep -E '^/(usr/)?s?bin/')

# The shared libraries (and the loader) every program loads, transitively (ldd lists them all).
for program in "${programs[@]}"; do
    if [ -d "$program" ]; then continue; fi
    { ldd "$program" 2>/dev/null || true; } | awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^\//) print $i }'
done | sort -u | while IFS= read -r library; do copy "$library"; done

for path in /etc/ssl/certs/ca-certificates.crt /etc/ssl/openssl.cnf /usr/lib/ssl/openssl.cnf \
    /usr/lib/ssl/certs /etc/nsswitch.conf /etc/ld.so.conf /etc/ld.so.conf.d/* /usr/lib/os-release \
    /etc/os-release; do
    copy "$path"
done
mkdir -p "$root/usr/share"
cp -R /usr/share/zoneinfo "$root/usr/share/zoneinfo"
grep -E '^(root|auth):' /etc/passwd >"$root/etc/passwd"
grep -E '^(root|auth):' /etc/group >"$root/etc/group"
mkdir -p -m 1777 "$root/tmp"
ldconfig -r "$root"
