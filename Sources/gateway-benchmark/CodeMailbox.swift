import Synchronization

/// Codes that otp-dispatch's webhook provider delivered, by destination, handed to the sign-in
/// waiting for them. A code may arrive before its sign-in waits (the webhook can beat the
/// answer to `/v1/otp/send`): it is kept until then.
final class CodeMailbox: Sendable {
    struct Delivery: Sendable {
        var code: String
        var arrived: ContinuousClock.Instant
    }

    struct TimedOut: Error, CustomStringConvertible {
        var destination: String
        var description: String { "no code for \(destination) arrived in time" }
    }

    private enum Entry {
        case waiting(CheckedContinuation<Delivery, any Error>)
        case arrived(Delivery)
        /// The wait timed out before the waiter was registered.
        case expired
    }

    private let entries = Mutex<[String: Entry]>([:])
    /// Deliveries nobody waited for or will wait for (a retried message, a late one from an
    /// earlier run): counted, not kept beyond their destination's entry.
    let unclaimed = Atomic<Int>(0)

    /// Hands `code` to whoever waits for `destination`, or keeps it for them.
    func deliver(destination: String, code: String) {
        let delivery = Delivery(code: code, arrived: .now)
        let waiter: CheckedContinuation<Delivery, any Error>? = entries.withLock { entries in
            switch entries[destination] {
            case .waiting(let continuation):
                entries[destination] = nil
                return continuation
            case .arrived, .expired:
                unclaimed.add(1, ordering: .relaxed)
                return nil
            case nil:
                entries[destination] = .arrived(delivery)
                return nil
            }
        }
        waiter?.resume(returning: delivery)
    }

    /// The code for `destination`: at once if it came already, else when it comes, or
    /// ``TimedOut`` after `timeout`.
    func code(for destination: String, timeout: Duration) async throws -> Delivery {
        let timer = Task {
            try await Task.sleep(for: timeout)
            self.fail(destination: destination)
        }
        defer { timer.cancel() }
        return try await withCheckedThrowingContinuation { continuation in
            let ready: Result<Delivery, TimedOut>? = entries.withLock { entries in
                switch entries[destination] {
                case .arrived(let delivery):
                    entries[destination] = nil
                    return .success(delivery)
                case .expired:
                    entries[destination] = nil
                    return .failure(TimedOut(destination: destination))
                case .waiting, nil:
                    entries[destination] = .waiting(continuation)
                    return nil
                }
            }
            if let ready { continuation.resume(with: ready.mapError { $0 as any Error }) }
        }
    }

    private func fail(destination: String) {
        let waiter: CheckedContinuation<Delivery, any Error>? = entries.withLock { entries in
            switch entries[destination] {
            case .waiting(let continuation):
                entries[destination] = nil
                return continuation
            case nil:
                entries[destination] = .expired
                return nil
            case .arrived, .expired:
                return nil
            }
        }
        waiter?.resume(throwing: TimedOut(destination: destination))
    }
}
