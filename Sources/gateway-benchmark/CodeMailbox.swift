import Synchronization

/// Codes that otp-dispatch's webhook provider delivered, by destination, handed to the sign-in
/// waiting for them. A code may arrive before its sign-in waits (the webhook can beat the
/// answer to `/v1/otp/send`): it is kept until then.
///
/// A wait gives up after the mailbox's `timeout`, checked by ``expireWaits(every:)`` running
/// beside the load: one timer for every sign-in instead of a sleeping task per wait.
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
        case waiting(CheckedContinuation<Delivery, any Error>, deadline: ContinuousClock.Instant)
        case arrived(Delivery)
    }

    /// How long a sign-in waits for its code.
    let timeout: Duration
    private let entries = Mutex<[String: Entry]>([:])
    /// Deliveries nobody waited for or will wait for (a retried message, a late one from an
    /// earlier run): counted, not kept beyond their destination's entry.
    let unclaimed = Atomic<Int>(0)

    init(timeout: Duration) {
        self.timeout = timeout
    }

    /// Hands `code` to whoever waits for `destination`, or keeps it for them.
    func deliver(destination: String, code: String) {
        let delivery = Delivery(code: code, arrived: .now)
        let waiter: CheckedContinuation<Delivery, any Error>? = entries.withLock { entries in
            switch entries[destination] {
            case .waiting(let continuation, _):
                entries[destination] = nil
                return continuation
            case .arrived:
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
    /// ``TimedOut`` once ``timeout`` has passed (while ``expireWaits(every:)`` runs).
    func code(for destination: String) async throws -> Delivery {
        try await withCheckedThrowingContinuation { continuation in
            let ready: Delivery? = entries.withLock { entries in
                if case .arrived(let delivery) = entries[destination] {
                    entries[destination] = nil
                    return delivery
                }
                entries[destination] = .waiting(continuation, deadline: .now + timeout)
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }

    /// Fails the waits past their deadline with ``TimedOut``, every `interval`, until cancelled.
    func expireWaits(every interval: Duration) async {
        while (try? await Task.sleep(for: interval)) != nil {
            let now = ContinuousClock.now
            let expired: [(String, CheckedContinuation<Delivery, any Error>)] = entries.withLock { entries in
                var expired: [(String, CheckedContinuation<Delivery, any Error>)] = []
                for (destination, entry) in entries {
                    if case .waiting(let continuation, let deadline) = entry, deadline <= now {
                        expired.append((destination, continuation))
                    }
                }
                for (destination, _) in expired { entries[destination] = nil }
                return expired
            }
            for (destination, continuation) in expired {
                continuation.resume(throwing: TimedOut(destination: destination))
            }
        }
    }
}
