import Synchronization

/// Calls a router in the same process, with the same deadline, cancellation and error rules
/// as the TCP transport. For tests of services without sockets.
public struct InProcessTransport: ClientTransport {
    public let router: RPCRouter
    /// The caller name handlers see as authenticated.
    public let authenticatedCaller: String

    public init(router: RPCRouter, authenticatedCaller: String) {
        self.router = router
        self.authenticatedCaller = authenticatedCaller
    }

    public func unary(_ call: ClientCall) async throws -> [UInt8] {
        guard let route = router.route(forPath: call.method.path) else {
            throw RPCError.unimplemented(path: call.method.path)
        }
        let deadline = call.timeout.map { ContinuousClock.now + $0 }
        let context = ServerContext(
            method: call.method,
            metadata: call.metadata,
            deadline: deadline,
            authenticatedCaller: authenticatedCaller,
            peer: "in-process"
        )
        let payload = call.payload
        let result = await DeadlineRace.run(until: deadline) {
            await route.run(payload: payload, context: context)
        }
        return try result.get()
    }
}

extension RPCError {
    static func unimplemented(path: String) -> RPCError {
        RPCError(
            code: .unimplemented,
            message: "Method \(path) is not served here.",
            reason: RPCError.Reason.unknownMethod
        )
    }

    static let deadlineExceeded = RPCError(
        code: .deadlineExceeded,
        message: "The call's deadline passed before it finished.",
        reason: RPCError.Reason.deadlineExceeded
    )
}

/// Runs an operation in its own task and returns its result, or DEADLINE_EXCEEDED as soon as
/// the deadline passes (the operation's task is then cancelled and its result dropped), or
/// CANCELLED when the calling task is cancelled.
public enum DeadlineRace {
    public static func run(
        until deadline: ContinuousClock.Instant?,
        _ operation: @escaping @Sendable () async -> Result<[UInt8], RPCError>
    ) async -> Result<[UInt8], RPCError> {
        let outcome = RaceState()
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Result<[UInt8], RPCError>, Never>) in
                let work = Task {
                    let result = await operation()
                    outcome.withLock { $0.finish(result) }?.resume(returning: result)
                }
                let timer: Task<Void, Never>? = deadline.map { deadline in
                    Task {
                        try? await Task.sleep(until: deadline, clock: .continuous)
                        guard !Task.isCancelled else { return }
                        let expired = Result<[UInt8], RPCError>.failure(.deadlineExceeded)
                        if let waiting = outcome.withLock({ $0.finish(expired) }) {
                            work.cancel()
                            waiting.resume(returning: expired)
                        }
                    }
                }
                let early = outcome.withLock { state -> Result<[UInt8], RPCError>? in
                    state.work = work
                    state.timer = timer
                    if let result = state.result {
                        // Finished (or was cancelled) before we got here: stop the rest.
                        work.cancel()
                        timer?.cancel()
                        return result
                    }
                    state.continuation = continuation
                    return nil
                }
                if let early { continuation.resume(returning: early) }
            }
        } onCancel: {
            let cancelled = Result<[UInt8], RPCError>.failure(
                RPCError(code: .cancelled, message: "The caller cancelled the call.", reason: RPCError.Reason.cancelled)
            )
            let (waiting, work) = outcome.withLock { state in (state.finish(cancelled), state.work) }
            work?.cancel()
            waiting?.resume(returning: cancelled)
        }
    }

    /// Shared by the operation, the timer and the cancellation handler.
    final class RaceState: Sendable {
        private let state = Mutex(OneShot())

        func withLock<R>(_ body: (inout OneShot) -> R) -> R {
            state.withLock { body(&$0) }
        }
    }

    struct OneShot: ~Copyable {
        var result: Result<[UInt8], RPCError>?
        var continuation: CheckedContinuation<Result<[UInt8], RPCError>, Never>?
        var work: Task<Void, Never>?
        var timer: Task<Void, Never>?

        /// Records the first result; returns the continuation to resume, if it was waiting.
        mutating func finish(
            _ result: Result<[UInt8], RPCError>
        ) -> CheckedContinuation<Result<[UInt8], RPCError>, Never>? {
            guard self.result == nil else { return nil }
            self.result = result
            timer?.cancel()
            defer { continuation = nil }
            return continuation
        }
    }
}
