import AuthTestSupport
import Dispatch
import Foundation
import Synchronization

/// Lets `count` threads (pool threads running transaction bodies) meet before going on. Gives up
/// after `timeout` so that a test fails instead of hanging.
final class ThreadBarrier: Sendable {
    private let count: Int
    private let arrived = Mutex(0)
    private let semaphore = DispatchSemaphore(value: 0)

    init(count: Int) { self.count = count }

    @discardableResult
    func arriveAndWait(timeout: Double = 5) -> Bool {
        let arrived = self.arrived.withLock { value in
            value += 1
            return value
        }
        if arrived == self.count {
            for _ in 1..<self.count { self.semaphore.signal() }
            return true
        }
        return self.semaphore.wait(timeout: .now() + timeout) == .success
    }
}

/// A counter shared between test tasks and pool threads.
final class Counter: Sendable {
    private let state = Mutex((current: 0, maximum: 0, total: 0))

    /// Increments, returning the new value.
    @discardableResult
    func increment() -> Int {
        self.state.withLock { state in
            state.current += 1
            state.total += 1
            state.maximum = max(state.maximum, state.current)
            return state.current
        }
    }

    func decrement() { self.state.withLock { $0.current -= 1 } }

    var current: Int { self.state.withLock { $0.current } }
    var maximum: Int { self.state.withLock { $0.maximum } }
    var total: Int { self.state.withLock { $0.total } }
}

/// Collects what an async sequence produces; a test waits for a condition on it. Waiting is
/// driven by the appends themselves (each append re-checks the waiting conditions under the
/// lock), not by polling with sleeps.
final class Collected<Element: Sendable>: Sendable {
    private struct Waiter {
        let condition: @Sendable ([Element], Bool) -> Bool
        let continuation: CheckedContinuation<Bool, Never>
    }

    private struct State {
        var items: [Element] = []
        var finished = false
        var waiters: [Int: Waiter] = [:]
        var nextWaiterID = 0

        /// Removes and returns the waiters whose condition now holds.
        mutating func takeSatisfied() -> [CheckedContinuation<Bool, Never>] {
            let satisfied = self.waiters.filter { $0.value.condition(self.items, self.finished) }
            for id in satisfied.keys { self.waiters[id] = nil }
            return satisfied.values.map(\.continuation)
        }
    }

    private let state = Mutex(State())

    func append(_ element: Element) {
        let ready = self.state.withLock { state in
            state.items.append(element)
            return state.takeSatisfied()
        }
        ready.forEach { $0.resume(returning: true) }
    }

    func finish() {
        let ready = self.state.withLock { state in
            state.finished = true
            return state.takeSatisfied()
        }
        ready.forEach { $0.resume(returning: true) }
    }

    var elements: [Element] { self.state.withLock { $0.items } }
    var finished: Bool { self.state.withLock { $0.finished } }

    /// Waits until `condition` holds on the elements, up to `timeout` seconds; returns whether
    /// it holds.
    @discardableResult
    func wait(timeout: Double = 5, until condition: @escaping @Sendable ([Element]) -> Bool) async -> Bool {
        await self.wait(timeout: timeout) { elements, _ in condition(elements) }
    }

    /// Waits until the sequence has ended, up to `timeout` seconds.
    func waitUntilFinished(timeout: Double = 5) async -> Bool {
        await self.wait(timeout: timeout) { _, finished in finished }
    }

    private func wait(timeout: Double, condition: @escaping @Sendable ([Element], Bool) -> Bool) async -> Bool {
        await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
            let id: Int? = self.state.withLock { state in
                if condition(state.items, state.finished) { return nil }
                let id = state.nextWaiterID
                state.nextWaiterID += 1
                state.waiters[id] = Waiter(condition: condition, continuation: continuation)
                return id
            }
            guard let id else {
                continuation.resume(returning: true)
                return
            }
            Task {
                try? await Task.sleep(for: .milliseconds(Int(timeout * 1000)))
                let expired = self.state.withLock { $0.waiters.removeValue(forKey: id) }
                expired?.continuation.resume(returning: false)
            }
        }
    }
}

/// Starts consuming `stream` into a ``Collected``.
func collect<Element: Sendable>(_ stream: AsyncStream<Element>) -> (Collected<Element>, Task<Void, Never>) {
    let collected = Collected<Element>()
    let task = Task {
        for await element in stream { collected.append(element) }
        collected.finish()
    }
    return (collected, task)
}

/// A short random suffix for names (channels, application names).
func uniqueSuffix() -> String {
    String(UUID().uuidString.replacingOccurrences(of: "-", with: "").prefix(12)).lowercased()
}

/// Seconds elapsed since `start`.
func seconds(since start: ContinuousClock.Instant) -> Double {
    let (seconds, attoseconds) = (ContinuousClock.now - start).components
    return Double(seconds) + Double(attoseconds) / 1e18
}

/// A thread that opens TCP sockets and closes them again, over and over, so that descriptor
/// numbers are taken and freed all the time, as the RPC server and clients of a service do.
final class SocketChurn: @unchecked Sendable {
    // @unchecked Sendable: `thread` is touched only by `start` and `stop`, called from one test
    // task; the flags and counters are atomics.
    private let running = Atomic<Bool>(false)
    private let opened = Atomic<Int>(0)

    func start() {
        self.running.store(true, ordering: .sequentiallyConsistent)
        let thread = Thread { [self] in
            while self.running.load(ordering: .sequentiallyConsistent) {
                var descriptors: [Int32] = []
                for _ in 0..<Int.random(in: 1...4) {
                    let descriptor = closeOnExecTCPSocket()
                    if descriptor >= 0 { descriptors.append(descriptor) }
                }
                self.opened.add(descriptors.count, ordering: .relaxed)
                usleep(50)
                descriptors.forEach { close($0) }
            }
        }
        thread.start()
    }

    /// Stops the thread (idempotent) and returns how many sockets it opened.
    @discardableResult
    func stop() -> Int {
        self.running.store(false, ordering: .sequentiallyConsistent)
        return self.opened.load(ordering: .relaxed)
    }
}
