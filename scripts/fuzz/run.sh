#!/usr/bin/env bash
# Fuzzes the RPC frame decoder, the envelope unpack (protobuf-c) and the message unpack with
# libFuzzer: builds Sources/rpc-fuzz with `-sanitize=fuzzer,address` into .build-fuzz, then
# runs it for the given seconds (default 45) starting from the committed seed corpus
# (scripts/fuzz/corpus). New inputs go to .data/fuzz-corpus, crash/leak/timeout reproducers
# to .data/fuzz-artifacts (both git-ignored); the exit status is non-zero when libFuzzer
# found one. Replay a reproducer without libFuzzer: `.build/debug/rpc-fuzz FILE`.
#
#   scripts/fuzz/run.sh            # ~45 s, as scripts/test.sh runs it
#   scripts/fuzz/run.sh 300        # a longer run
set -euo pipefail
cd "$(dirname "$0")/../.."
seconds=${1:-45}
jobs_dir=.data
mkdir -p "$jobs_dir/fuzz-corpus" "$jobs_dir/fuzz-artifacts"

# lld: gold crashes (internal error in dwarf_reader) on this link. -DAUTH_FUZZING selects
# the libFuzzer entry points in RPCFuzz.swift; C targets get coverage too (fuzzer-no-link).
swift build --scratch-path .build-fuzz --product rpc-fuzz \
    -Xswiftc -sanitize=fuzzer,address -Xswiftc -DAUTH_FUZZING -Xswiftc -use-ld=lld \
    -Xcc -fsanitize=fuzzer-no-link,address 2>&1 | grep -v "Cannot export local symbol" | tail -n 3
binary=.build-fuzz/debug/rpc-fuzz

# -timeout: an input taking over 5 s is a hang; -rss_limit_mb: memory growth is a failure;
# leaks are reported by LeakSanitizer after each input that mallocs more than it frees.
"$binary" \
    -max_total_time="$seconds" -timeout=5 -rss_limit_mb=2048 -max_len=4096 \
    -detect_leaks=1 -print_final_stats=1 \
    -artifact_prefix="$jobs_dir/fuzz-artifacts/" \
    "$jobs_dir/fuzz-corpus" scripts/fuzz/corpus
