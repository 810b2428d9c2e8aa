import Synchronization

/// Wakes waiters (the outbox dispatcher's workers, the RPC client's calls waiting for a
/// connection): ``wait(past:)`` returns ``Reason/all`` once ``wake()`` was called
/// after the generation the caller saw, so a wake between a worker's claim and its wait is not
/// lost. ``wakeOne()`` resumes a single waiter with ``Reason/one``; when none waits it is kept
/// (up to `maximumPendingWakes`: one per message notified while every worker was busy) for the
/// next ``wait(past:)``, which then returns at once, so it is not lost either.
public final class WakeSignal: Sendable {
    public enum Reason: Sendable {
        /// ``wake()`` (or cancellation): everyone looks again (the dispatcher's workers claim
        /// until nothing is due).
        case all
        /// ``wakeOne()``: one waiter's turn (a dispatcher worker takes one hand-over, or else
        /// claims until a claim comes back empty).
        case one
    }

    private struct State {
        var nextID: UInt64 = 0
        var waiters: [UInt64: CheckedContinuation<Reason, Never>] = [:]
        var pendingWakes = 0
    }

    private let state = Mutex(State())
    /// Moved on by ``wake()`` under the lock, read without it: callers read it on every RPC
    /// call (the client's wait for a connection), waiters compare it under the lock.
    private let generationCounter = Atomic<UInt64>(0)
    private let maximumPendingWakes: Int

    public init(maximumPendingWakes: Int = 1 << 20) {
        self.maximumPendingWakes = max(1, maximumPendingWakes)
    }

    public var generation: UInt64 { generationCounter.load(ordering: .acquiring) }

    /// How many callers wait right now (tests).
    public var waiting: Int { state.withLock { $0.waiters.count } }

    /// Resumes the longest-waiting waiter, or keeps the wake for the next ``wait(past:)``.
    public func wakeOne() {
        let waiter = state.withLock { state -> CheckedContinuation<Reason, Never>? in
            guard let id = state.waiters.keys.min() else {
                state.pendingWakes = min(state.pendingWakes + 1, maximumPendingWakes)
                return nil
            }
            return state.waiters.removeValue(forKey: id)
        }
        waiter?.resume(returning: .one)
    }

    /// Resumes every waiter and moves the generation on.
    public func wake() {
        let waiters = state.withLock { state -> [CheckedContinuation<Reason, Never>] in
            generationCounter.wrappingAdd(1, ordering: .releasing)
            let all = Array(state.waiters.values)
            state.waiters.removeAll()
            return all
        }
        for waiter in waiters { waiter.resume(returning: .all) }
    }

    /// Returns when the generation moved past `seen` or the task is cancelled (``Reason/all``),
    /// or for one ``wakeOne()`` (``Reason/one``).
    @discardableResult
    public func wait(past seen: UInt64) async -> Reason {
        let id = state.withLock { state -> UInt64 in
            state.nextID &+= 1
            return state.nextID
        }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Reason, Never>) in
                let resumeNow = state.withLock { state -> Reason? in
                    if generationCounter.load(ordering: .acquiring) != seen || Task.isCancelled { return .all }
                    if state.pendingWakes > 0 {
                        state.pendingWakes -= 1
                        return .one
                    }
                    state.waiters[id] = continuation
                    return nil
                }
                if let resumeNow { continuation.resume(returning: resumeNow) }
            }
        } onCancel: {
            let waiter = state.withLock { $0.waiters.removeValue(forKey: id) }
            waiter?.resume(returning: .all)
        }
    }
}
