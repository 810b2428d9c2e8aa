import Synchronization

/// A value shared between test tasks, event loops and threads: a `Mutex` a closure can capture.
public final class Locked<Value: Sendable>: Sendable {
    private let mutex: Mutex<Value>

    public init(_ value: Value) { self.mutex = Mutex(value) }

    public func withLock<R: Sendable>(_ body: (inout Value) -> R) -> R { self.mutex.withLock { body(&$0) } }
}
