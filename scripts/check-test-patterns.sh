#!/usr/bin/env bash
# Fails on test code that Swift 6.3.1 miscompiles.
#
# Inside a closure, a closure literal in an awaited expression inside #expect/#require, e.g.
#     try await withTestSchema { pool, _ in
#         #expect(await received.wait { $0.count == 1 })
#         let ok = await received.wait { $0.contains { $0.payload == "after" } }
# makes the second call run the FIRST closure: both get the same symbol. (This is what made
# PostgresListenerTests.resubscribesAfterTheConnectionIsKilled fail at random: its loop waited
# for `count == 1` after the count had passed 1.) A minimal reproducer and the write-up are in
# docs/testing.md. Bind the awaited value first, then expect it:
#     let arrived = await received.wait { $0.count == 1 }
#     #expect(arrived)
set -euo pipefail
cd "$(dirname "$0")/.."
if grep -rn -E '#(expect|require)\((try )?await [^)]*\{' Tests/; then
    echo "error: a closure literal inside an awaited #expect/#require (above); see scripts/check-test-patterns.sh" >&2
    exit 1
fi
