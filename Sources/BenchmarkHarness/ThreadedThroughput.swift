import NIOPosix
import Synchronization

/// How many times per second `threads` dedicated threads can run a CPU-bound operation (a JWT
/// verification, a bare scrypt hash): the reference a service's calls/s is set beside. Runs on
/// threads of its own (an `NIOThreadPool`), never on Swift's concurrency pool, and stops after `duration`.
public enum ThreadedThroughput {
    /// Runs `operation` on `threads` threads for `duration`, `batch` calls between clock reads,
    /// and returns operations per second; the first error thrown stops every thread and is thrown.
    public static func measure(
        threads: Int,
        duration: Duration,
        batch: Int = 1,
        operation: @escaping @Sendable () throws -> Void
    ) async throws -> Double {
        precondition(threads > 0 && batch > 0, "threads and batch must be positive")
        let tally = Tally()
        let clock = ContinuousClock()
        let start = clock.now
        let end = start + duration
        let pool = NIOThreadPool(numberOfThreads: threads)
        pool.start()
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<threads {
                group.addTask {
                    // One blocking loop per pool thread.
                    try? await pool.runIfActive {
                        var count = 0
                        do {
                            // At least one batch, even on a thread that starts late on a busy machine.
                            repeat {
                                for _ in 0..<batch { try operation() }
                                count += batch
                            } while clock.now < end && !tally.stopped.load(ordering: .relaxed)
                        } catch {
                            tally.failure.withLock { $0 = $0 ?? error }
                            tally.stopped.store(true, ordering: .relaxed)
                        }
                        tally.total.add(count, ordering: .relaxed)
                    }
                }
            }
        }
        try? await pool.shutdownGracefully()
        if let error = tally.failure.withLock({ $0 }) { throw error }
        let elapsed = clock.now - start
        return Double(tally.total.load(ordering: .relaxed)) / elapsed.seconds
    }
}

/// What the threads of one measurement add up.
private final class Tally: Sendable {
    let total = Atomic<Int>(0)
    let failure = Mutex<(any Error)?>(nil)
    /// Set by the first thread that fails: the others stop too.
    let stopped = Atomic<Bool>(false)
}
