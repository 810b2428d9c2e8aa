import NIOCore
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
        case waiting(EventLoopPromise<Delivery>, deadline: ContinuousClock.Instant)
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
        let waiter: EventLoopPromise<Delivery>? = entries.withLock { entries in
            switch entries[destination] {
            case .waiting(let promise, _):
                entries[destination] = nil
                return promise
            case .arrived:
                unclaimed.add(1, ordering: .relaxed)
                return nil
            case nil:
                entries[destination] = .arrived(delivery)
                return nil
            }
        }
        waiter?.succeed(delivery)
    }

    /// The code for `destination`, on `eventLoop`: at once if it came already, else when it
    /// comes, or ``TimedOut`` once ``timeout`` has passed (while ``expireWaits(every:)`` runs).
    func code(for destination: String, on eventLoop: any EventLoop) -> EventLoopFuture<Delivery> {
        let promise = eventLoop.makePromise(of: Delivery.self)
        let (ready, displaced): (Delivery?, EventLoopPromise<Delivery>?) = entries.withLock { entries in
            if case .arrived(let delivery) = entries[destination] {
                entries[destination] = nil
                return (delivery, nil)
            }
            // An earlier wait for the same number (two sign-ins drew it) cannot tell its code
            // apart: it is displaced and failed.
            var earlier: EventLoopPromise<Delivery>?
            if case .waiting(let waiting, _) = entries[destination] { earlier = waiting }
            entries[destination] = .waiting(promise, deadline: .now + timeout)
            return (nil, earlier)
        }
        displaced?.fail(TimedOut(destination: destination))
        if let ready { promise.succeed(ready) }
        return promise.futureResult
    }

    /// Fails the waits past their deadline with ``TimedOut``, every `interval`, until cancelled.
    func expireWaits(every interval: Duration) async {
        while (try? await Task.sleep(for: interval)) != nil {
            let now = ContinuousClock.now
            let expired: [(String, EventLoopPromise<Delivery>)] = entries.withLock { entries in
                var expired: [(String, EventLoopPromise<Delivery>)] = []
                for (destination, entry) in entries {
                    if case .waiting(let promise, let deadline) = entry, deadline <= now {
                        expired.append((destination, promise))
                    }
                }
                for (destination, _) in expired { entries[destination] = nil }
                return expired
            }
            for (destination, promise) in expired { promise.fail(TimedOut(destination: destination)) }
        }
    }
}
