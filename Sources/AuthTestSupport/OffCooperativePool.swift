import Foundation

/// Runs blocking work (a `recv`, a `waitpid` without `WNOHANG`, a semaphore, a long computation)
/// on a thread of its own and awaits its result.
///
/// Swift Testing runs every test as a task on the cooperative pool, which has one thread per
/// core: two on the machines CI runs on. A test that blocks one of them for seconds halves what
/// every other test of the run gets; two such tests stop all of them, so deadlines of a few
/// seconds elsewhere expire and timers fire late (issue 18: `deadline_exceeded` in the mTLS
/// tests, a 36 s load harness test whose work takes milliseconds). Blocking calls reached from
/// async test code go through here.
public func offCooperativePool<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        let thread = Thread { continuation.resume(with: Result { try body() }) }
        thread.name = "test blocking call"
        thread.start()
    }
}

/// ``offCooperativePool(_:)`` for work that cannot fail.
public func offCooperativePool<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { continuation in
        let thread = Thread { continuation.resume(returning: body()) }
        thread.name = "test blocking call"
        thread.start()
    }
}

/// Checks `condition` every `interval` until it holds (true) or `bound` has passed (false), for
/// conditions nothing notifies (a row in `pg_stat_activity`, a port that accepts again). The
/// bound tells *stuck* from *slow*: a minute, which no correct run on a loaded machine comes
/// near; a test never asserts on how long the wait took (docs/testing.md).
public func eventually(
    bound: Duration = .seconds(60),
    interval: Duration = .milliseconds(20),
    _ condition: () async throws -> Bool
) async rethrows -> Bool {
    let deadline = ContinuousClock.now + bound
    while true {
        if try await condition() { return true }
        if ContinuousClock.now >= deadline { return false }
        try? await Task.sleep(for: interval)
    }
}
