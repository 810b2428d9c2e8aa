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

    var maximum: Int { self.state.withLock { $0.maximum } }
    var total: Int { self.state.withLock { $0.total } }
}

/// Collects what an async sequence produces, for polling from a test.
final class Collected<Element: Sendable>: Sendable {
    private let items = Mutex<[Element]>([])
    private let finishedFlag = Mutex(false)

    func append(_ element: Element) { self.items.withLock { $0.append(element) } }
    func finish() { self.finishedFlag.withLock { $0 = true } }

    var elements: [Element] { self.items.withLock { $0 } }
    var finished: Bool { self.finishedFlag.withLock { $0 } }

    /// Waits (polling) until `condition` holds on the elements, up to `timeout` seconds.
    @discardableResult
    func wait(timeout: Double = 5, until condition: ([Element]) -> Bool) async -> Bool {
        let deadline = ContinuousClock.now + .milliseconds(Int(timeout * 1000))
        while ContinuousClock.now < deadline {
            if condition(self.elements) { return true }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return condition(self.elements)
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

/// Runs blocking work on a dispatch thread and awaits its result.
func onThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        DispatchQueue.global().async { continuation.resume(with: Result(catching: body)) }
    }
}

/// A value shared between test tasks and pool threads.
final class Locked<Value: Sendable>: Sendable {
    private let mutex: Mutex<Value>

    init(_ value: Value) { self.mutex = Mutex(value) }

    func withLock<R: Sendable>(_ body: (inout Value) -> R) -> R { self.mutex.withLock { body(&$0) } }
}
