import Synchronization

/// At most `limit` holders at once (a counting semaphore for async code): ``withPermit(_:)``
/// waits for a permit, runs its body, and hands the permit to the longest waiter. The outbox
/// dispatcher bounds each provider's concurrent sends with it. Waiting is not cancellable: a
/// permit comes back when a holder's body ends, and holders' bodies are bounded (a provider
/// request has its timeout).
public final class ConcurrencyLimit: Sendable {
    private struct State {
        var available: Int
        var nextID: UInt64 = 0
        var waiters: [(id: UInt64, continuation: CheckedContinuation<Void, Never>)] = []
    }

    private let state: Mutex<State>
    public let limit: Int

    public init(limit: Int) {
        precondition(limit > 0, "a concurrency limit is at least 1")
        self.limit = limit
        self.state = Mutex(State(available: limit))
    }

    /// Holders right now (tests and metrics).
    public var inUse: Int { state.withLock { limit - $0.available } }

    /// Callers waiting for a permit right now.
    public var waiting: Int { state.withLock { $0.waiters.count } }

    /// Runs `body` holding one permit.
    public func withPermit<R: Sendable>(_ body: () async throws -> R) async rethrows -> R {
        await acquire()
        defer { release() }
        return try await body()
    }

    private func acquire() async {
        let acquired = state.withLock { state -> Bool in
            guard state.available > 0 else { return false }
            state.available -= 1
            return true
        }
        if acquired { return }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now = state.withLock { state -> Bool in
                // A permit may have come back between the first look and here.
                if state.available > 0 {
                    state.available -= 1
                    return true
                }
                state.nextID &+= 1
                state.waiters.append((state.nextID, continuation))
                return false
            }
            if now { continuation.resume() }
        }
    }

    private func release() {
        let next = state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard !state.waiters.isEmpty else {
                state.available += 1
                return nil
            }
            // The permit passes straight to the longest waiter.
            return state.waiters.removeFirst().continuation
        }
        next?.resume()
    }
}
