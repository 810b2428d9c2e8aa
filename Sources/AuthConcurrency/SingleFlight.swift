import Synchronization

/// Runs one operation at a time for all its callers: a caller that comes while one runs waits
/// for that one's result instead of starting its own. The one "one fetch in flight" of the
/// system: the gateway's and identity's JWK Set caches, session's signing keys, the gateway's
/// readiness probe. The operation runs in a task of its own, so a caller that is cancelled
/// stops waiting for it but does not cancel it for the others.
///
/// A cache in front of it checks its value with `run(reusing:_:)`, under the lock that starts
/// operations, and its operation stores the value before it returns: checked before `run`, or
/// stored after it, a caller that comes between the operation's end and the store finds
/// neither a value nor an operation in flight, and starts another (a CI run saw 65 readiness
/// probes for 200 callers).
public final class SingleFlight<Value: Sendable>: Sendable {
    private struct State {
        var running: Task<Result<Value, any Error>, Never>?
        var waiting = 0
    }

    private let state = Mutex(State())

    public init() {}

    /// The result of the operation in flight, or of `operation` started now when none is.
    public func run(_ operation: @escaping @Sendable () async throws -> Value) async throws -> Value {
        try await result(reusing: { nil }, operation).get()
    }

    /// ``run(_:)`` for an operation that cannot fail.
    public func run(_ operation: @escaping @Sendable () async -> Value) async -> Value {
        await run(reusing: { nil }, operation)
    }

    /// What `cached` gives, asked under the lock that starts operations, else ``run(_:)``.
    /// `operation` stores its value where `cached` finds it before it returns.
    public func run(
        reusing cached: () -> Value?,
        _ operation: @escaping @Sendable () async throws -> Value
    ) async throws -> Value {
        try await result(reusing: cached, operation).get()
    }

    /// ``run(reusing:_:)`` for an operation that cannot fail.
    public func run(reusing cached: () -> Value?, _ operation: @escaping @Sendable () async -> Value) async -> Value {
        switch await result(reusing: cached, operation) {
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

    private enum Start {
        case cached(Value)
        case waiting(Task<Result<Value, any Error>, Never>)
    }

    private func result(
        reusing cached: () -> Value?,
        _ operation: @escaping @Sendable () async throws -> Value
    ) async -> Result<Value, any Error> {
        let start = state.withLock { state -> Start in
            if let value = cached() { return .cached(value) }
            state.waiting += 1
            if let running = state.running { return .waiting(running) }
            let task = Task<Result<Value, any Error>, Never> {
                do {
                    return .success(try await operation())
                } catch {
                    return .failure(error)
                }
            }
            state.running = task
            return .waiting(task)
        }
        let task: Task<Result<Value, any Error>, Never>
        switch start {
        case .cached(let value): return .success(value)
        case .waiting(let running): task = running
        }
        let result = await task.value
        state.withLock { state in
            state.waiting -= 1
            if state.running == task { state.running = nil }
        }
        return result
    }
}
