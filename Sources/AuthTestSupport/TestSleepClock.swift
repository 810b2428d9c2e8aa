import Synchronization

/// A `Clock` for code that sleeps (schedules, backoffs), driven by the test instead of time.
///
/// - In the default mode a sleep suspends until the test moves the clock past its deadline with
///   ``advance(by:)``; ``waitForSleeps(_:)`` lets the test wait until the code under test has
///   reached its n-th sleep, so nothing depends on timing.
/// - With `advancesOnSleep`, a sleep moves the clock to its deadline and returns at once (for
///   code whose waiting is to be measured, not controlled).
///
/// Cancelling a sleeping task ends its sleep with `CancellationError`.
public final class TestSleepClock: Clock, Sendable {
    public struct Instant: InstantProtocol {
        /// Time since the clock was created.
        public var offset: Duration

        public func advanced(by duration: Duration) -> Instant { Instant(offset: offset + duration) }
        public func duration(to other: Instant) -> Duration { other.offset - offset }
        public static func < (lhs: Instant, rhs: Instant) -> Bool { lhs.offset < rhs.offset }
    }

    private struct Sleeper {
        var id: UInt64
        var deadline: Instant
        var continuation: CheckedContinuation<Void, any Error>
    }

    private struct State {
        var now = Instant(offset: .zero)
        var sleepers: [Sleeper] = []
        var nextID: UInt64 = 0
        /// Sleeps started so far (including ones that returned at once).
        var sleepsStarted = 0
        var sleepWaiters: [(count: Int, continuation: CheckedContinuation<Void, Never>)] = []
    }

    private let state = Mutex(State())
    private let advancesOnSleep: Bool

    public init(advancesOnSleep: Bool = false) {
        self.advancesOnSleep = advancesOnSleep
    }

    public var now: Instant { state.withLock { $0.now } }
    public var minimumResolution: Duration { .zero }

    /// Sleeps started so far.
    public var sleepsStarted: Int { state.withLock { $0.sleepsStarted } }

    public func sleep(until deadline: Instant, tolerance: Duration? = nil) async throws {
        let id = state.withLock { state -> UInt64 in
            state.nextID += 1
            return state.nextID
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let (resume, waiters): (Result<Void, any Error>?, [CheckedContinuation<Void, Never>]) = state.withLock {
                    state in
                    state.sleepsStarted += 1
                    let reached = state.sleepWaiters.filter { $0.count <= state.sleepsStarted }.map(\.continuation)
                    state.sleepWaiters.removeAll { $0.count <= state.sleepsStarted }
                    if Task.isCancelled { return (.failure(CancellationError()), reached) }
                    if advancesOnSleep {
                        state.now = max(state.now, deadline)
                        return (.success(()), reached)
                    }
                    if deadline <= state.now { return (.success(()), reached) }
                    state.sleepers.append(Sleeper(id: id, deadline: deadline, continuation: continuation))
                    return (nil, reached)
                }
                for waiter in waiters { waiter.resume() }
                if let resume { continuation.resume(with: resume) }
            }
        } onCancel: {
            let sleeper = state.withLock { state -> Sleeper? in
                guard let index = state.sleepers.firstIndex(where: { $0.id == id }) else { return nil }
                return state.sleepers.remove(at: index)
            }
            sleeper?.continuation.resume(throwing: CancellationError())
        }
    }

    /// Moves the clock forward and wakes every sleep whose deadline has been reached.
    public func advance(by duration: Duration) {
        let due = state.withLock { state -> [Sleeper] in
            state.now = state.now.advanced(by: duration)
            let now = state.now
            let due = state.sleepers.filter { $0.deadline <= now }
            state.sleepers.removeAll { $0.deadline <= now }
            return due
        }
        for sleeper in due { sleeper.continuation.resume() }
    }

    /// Returns once `count` sleeps have started in total.
    public func waitForSleeps(_ count: Int) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let reached = state.withLock { state -> Bool in
                if state.sleepsStarted >= count { return true }
                state.sleepWaiters.append((count, continuation))
                return false
            }
            if reached { continuation.resume() }
        }
    }
}
