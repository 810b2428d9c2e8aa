import Synchronization

/// Runs one operation at a time for all its callers: a caller that comes while one runs waits
/// for that one's result instead of starting its own. The one "one fetch in flight" of the
/// system: the gateway's and identity's JWK Set caches, session's signing keys, the gateway's
/// readiness probe. The operation runs in a task of its own, so a caller that is cancelled
/// stops waiting for it but does not cancel it for the others.
public final class SingleFlight<Value: Sendable>: Sendable {
    private struct State {
        var running: Task<Result<Value, any Error>, Never>?
        var waiting = 0
    }

    private let state = Mutex(State())

    public init() {}

    /// The result of the operation in flight, or of `operation` started now when none is.
    public func run(_ operation: @escaping @Sendable () async throws -> Value) async throws -> Value {
        try await result(operation).get()
    }

    /// ``run(_:)`` for an operation that cannot fail.
    public func run(_ operation: @escaping @Sendable () async -> Value) async -> Value {
        switch await result(operation) {
        case .success(let value): return value
        case .failure(let error): preconditionFailure("an operation that cannot throw threw \(error)")
        }
    }

    /// Lets the next caller start a new operation even while one runs (its waiters still get
    /// its result): after the data it reads changed.
    public func forget() {
        state.withLock { $0.running = nil }
    }

    /// Whether an operation runs now.
    public var isRunning: Bool { state.withLock { $0.running != nil } }

    /// How many callers wait for an operation now (tests).
    public var waiting: Int { state.withLock { $0.waiting } }

    private func result(_ operation: @escaping @Sendable () async throws -> Value) async -> Result<Value, any Error> {
        let task = state.withLock { state in
            state.waiting += 1
            if let running = state.running { return running }
            let task = Task<Result<Value, any Error>, Never> {
                do {
                    return .success(try await operation())
                } catch {
                    return .failure(error)
                }
            }
            state.running = task
            return task
        }
        let result = await task.value
        state.withLock { state in
            state.waiting -= 1
            if state.running == task { state.running = nil }
        }
        return result
    }
}
