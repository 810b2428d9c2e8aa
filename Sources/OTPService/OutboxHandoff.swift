import AuthConcurrency
import Synchronization

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The shortcut from a Start to the dispatcher running in the same process.
///
/// Without it a Start writes its message `queued` with a `NOTIFY`, and after the commit a
/// dispatcher worker (of any replica) hears the notification and claims the row with a
/// `FOR UPDATE SKIP LOCKED` update before sending it. With it, a Start that finds this
/// process's dispatcher running, with room in its queue, writes the message already claimed
/// (`sending`, leased for ``OTPServiceConfiguration/claimLease`` to the worker name
/// ``Reservation/worker``) and without a `NOTIFY`, and after its commit hands it to the
/// dispatcher's workers in memory: one statement less per code (the claim, the second most
/// expensive of a sign-in), no `NOTIFY` (at commit PostgreSQL serializes every transaction that
/// notified, database-wide), no wake-up through the LISTEN connection.
///
/// Nothing is lost: the row is committed before the hand-over, so when the process dies first
/// (or the dispatcher stopped meanwhile) the lease runs out and any replica's sweep claims the
/// message as it claims any message whose worker died: delivery stays at least once, a crash
/// delays the code by the lease plus a sweep. The queue is bounded (four messages per worker):
/// when it is full, or no dispatcher runs here (`AUTH_OTP_DISPATCH_WORKERS=0`), a Start takes the
/// `NOTIFY` path, so a busy replica's starts still reach the others' workers. Resends always
/// take it.
final class OutboxHandoff: Sendable {
    /// What a Start writes into its message's claim.
    struct Reservation: Sendable {
        /// `claimed_by`: the name the dispatcher's workers record outcomes under.
        var worker: String
        /// `claimed_until`.
        var leaseUntil: Date
    }

    private struct State {
        /// The running dispatcher that takes hand-overs (one per service; others only claim).
        var owner: ObjectIdentifier?
        /// False from the owner's graceful shutdown on: no new places.
        var accepting = false
        var worker = ""
        var lease: Duration = .seconds(30)
        var capacity = 0
        var wake: WakeSignal?
        var queue: [ClaimedMessage] = []
        /// Starts that reserved a place and have not handed their message over (or given the
        /// place back) yet.
        var reserved = 0
    }

    private let state = Mutex(State())

    /// A running dispatcher takes the hand-overs; false when another one has them.
    func open(owner: OTPDispatcher, worker: String, lease: Duration, capacity: Int, wake: WakeSignal) -> Bool {
        state.withLock { state in
            guard state.owner == nil, capacity > 0 else { return false }
            state.owner = ObjectIdentifier(owner)
            state.accepting = true
            state.worker = worker
            state.lease = lease
            state.capacity = capacity
            state.wake = wake
            return true
        }
    }

    /// The dispatcher's graceful shutdown began: Starts take the `NOTIFY` path from now on
    /// (those that reserved a place still hand their message over).
    func stopReserving(owner: OTPDispatcher) {
        state.withLock { state in
            if state.owner == ObjectIdentifier(owner) { state.accepting = false }
        }
    }

    /// The dispatcher's workers have stopped. Returns what was handed over and not taken, for
    /// the dispatcher to send before it ends; later hand-overs are left to their lease.
    func close(owner: OTPDispatcher) -> [ClaimedMessage] {
        state.withLock { state in
            guard state.owner == ObjectIdentifier(owner) else { return [] }
            state.owner = nil
            state.accepting = false
            state.wake = nil
            defer { state.queue.removeAll() }
            return state.queue
        }
    }

    /// A place for one Start's message, or nil: write it `queued` with a `NOTIFY`.
    func reserve(now: Date) -> Reservation? {
        state.withLock { state in
            guard state.accepting, state.queue.count + state.reserved < state.capacity else { return nil }
            state.reserved += 1
            return Reservation(worker: state.worker, leaseUntil: now.addingTimeInterval(state.lease.timeInterval))
        }
    }

    /// The Start that reserved a place did not write the claimed message (refused, failed).
    func release() {
        state.withLock { $0.reserved = max(0, $0.reserved - 1) }
    }

    /// The Start committed `message`, claimed as reserved: a worker sends it. When the
    /// dispatcher stopped meanwhile, it is left to its lease (and any replica's sweep).
    func hand(_ message: ClaimedMessage) {
        let wake = state.withLock { state -> WakeSignal? in
            state.reserved = max(0, state.reserved - 1)
            guard state.owner != nil else { return nil }
            state.queue.append(message)
            return state.wake
        }
        wake?.wakeOne()
    }

    /// The next handed-over message, if any (workers look here before claiming).
    func take() -> ClaimedMessage? {
        state.withLock { state in
            state.queue.isEmpty ? nil : state.queue.removeFirst()
        }
    }

    /// Whether a running dispatcher takes hand-overs now (tests).
    var isOpen: Bool { state.withLock { $0.accepting } }

    /// Messages handed over and not taken, and places reserved (tests).
    var backlog: (queued: Int, reserved: Int) { state.withLock { ($0.queue.count, $0.reserved) } }
}
