import Dispatch
import NIOPosix
import Synchronization

/// How many times per second `threads` dedicated threads can run an operation that blocks or
/// computes (a JWT verification, a bare scrypt hash, a statement on a connection of the thread's
/// own): the reference a service's calls/s is set beside. Runs on threads of its own (an
/// `NIOThreadPool`), never on Swift's concurrency pool, and stops after `duration`.
public enum ThreadedThroughput {
    /// What one measured run counted.
    public struct Count: Sendable {
        public var operations: Int
        /// From the start signal to the last thread's end.
        public var elapsed: Duration

        public var perSecond: Double { Double(operations) / elapsed.seconds }
    }

    /// Runs `operation` on `threads` threads for `duration`, `batch` calls between clock reads,
    /// and returns operations per second; the first error thrown stops every thread and is thrown.
    public static func measure(
        threads: Int,
        duration: Duration,
        batch: Int = 1,
        operation: @escaping @Sendable () throws -> Void
    ) async throws -> Double {
        try await measure(
            threads: threads,
            duration: duration,
            batch: batch,
            setUp: {},
            operation: { _ in try operation() },
            around: { run in try await run().perSecond }
        )
    }

    /// Like ``measure(threads:duration:batch:operation:)``, with a state per thread: `setUp`
    /// makes it on the thread that then uses it (a database connection, which must stay on one
    /// thread), before the clock starts, and `operation` is given it. `around` runs once every
    /// thread is set up and calls `run` once: `run` starts the threads' loops, waits for them
    /// and returns what they counted, while every state is still held, so `around` can take
    /// marks just before and after (the CPU of the processes the states talk to). The states
    /// are dropped, on their threads, after `around` returns. A `setUp` that throws stops the
    /// measurement before `around` runs; its error is thrown.
    public static func measure<State, Outcome>(
        threads: Int,
        duration: Duration,
        batch: Int = 1,
        setUp: @escaping @Sendable () throws -> State,
        operation: @escaping @Sendable (State) throws -> Void,
        around: (_ run: () async throws -> Count) async throws -> Outcome
    ) async throws -> Outcome {
        precondition(threads > 0 && batch > 0, "threads and batch must be positive")
        let tally = Tally()
        let gates = Gates()
        let pool = NIOThreadPool(numberOfThreads: threads)
        pool.start()
        let outcome: Result<Outcome, any Error> = await withTaskGroup(of: Void.self) { group in
            for _ in 0..<threads {
                gates.ready.enter()
                gates.finished.enter()
                group.addTask {
                    do {
                        try await pool.runIfActive {
                            runThread(setUp: setUp, operation: operation, batch: batch, tally: tally, gates: gates)
                        }
                    } catch {
                        // The pool was not active: the body never ran.
                        tally.fail(error)
                        gates.ready.leave()
                        gates.finished.leave()
                    }
                }
            }
            await gates.ready.reached()
            var started = false
            var outcome: Result<Outcome, any Error>
            if let error = tally.failure.withLock({ $0 }) {
                outcome = .failure(error)
            } else {
                do {
                    outcome = .success(
                        try await around {
                            precondition(!started, "run is called once")
                            started = true
                            let start = ContinuousClock.now
                            gates.deadline.withLock { $0 = start + duration }
                            for _ in 0..<threads { gates.go.signal() }
                            await gates.finished.reached()
                            let elapsed = ContinuousClock.now - start
                            if let error = tally.failure.withLock({ $0 }) { throw error }
                            return Count(operations: tally.total.load(ordering: .relaxed), elapsed: elapsed)
                        }
                    )
                } catch {
                    outcome = .failure(error)
                }
            }
            if !started {
                // The threads wait for the start: let them through without running.
                tally.stopped.store(true, ordering: .relaxed)
                for _ in 0..<threads { gates.go.signal() }
            }
            for _ in 0..<threads { gates.release.signal() }
            await group.waitForAll()
            return outcome
        }
        try? await pool.shutdownGracefully()
        return try outcome.get()
    }

    /// One thread's part: its state, the wait for the start, its loop until the deadline (at
    /// least one batch, even on a thread that starts late on a busy machine), the wait for the
    /// release that drops its state.
    private static func runThread<State>(
        setUp: () throws -> State,
        operation: (State) throws -> Void,
        batch: Int,
        tally: Tally,
        gates: Gates
    ) {
        var state: State?
        do {
            state = try setUp()
        } catch {
            tally.fail(error)
        }
        gates.ready.leave()
        gates.go.wait()
        if let state, !tally.stopped.load(ordering: .relaxed) {
            let end = gates.deadline.withLock { $0 }
            var count = 0
            do {
                repeat {
                    for _ in 0..<batch { try operation(state) }
                    count += batch
                } while ContinuousClock.now < end && !tally.stopped.load(ordering: .relaxed)
            } catch {
                tally.fail(error)
            }
            tally.total.add(count, ordering: .relaxed)
        }
        gates.finished.leave()
        gates.release.wait()
        withExtendedLifetime(state) {}
    }
}

/// What the threads of one measurement add up.
private final class Tally: Sendable {
    let total = Atomic<Int>(0)
    let failure = Mutex<(any Error)?>(nil)
    /// Set by the first thread that fails: the others stop too.
    let stopped = Atomic<Bool>(false)

    func fail(_ error: any Error) {
        failure.withLock { $0 = $0 ?? error }
        stopped.store(true, ordering: .relaxed)
    }
}

/// Where the threads of one measurement wait for the measuring task and it for them.
private final class Gates: Sendable {
    /// Left by each thread once its state is made (or failed).
    let ready = DispatchGroup()
    /// Signalled once per thread to start its loop.
    let go = DispatchSemaphore(value: 0)
    /// When the loops stop; set just before `go`.
    let deadline = Mutex<ContinuousClock.Instant>(.now)
    /// Left by each thread once its loop is over.
    let finished = DispatchGroup()
    /// Signalled once per thread to drop its state and end.
    let release = DispatchSemaphore(value: 0)
}

extension DispatchGroup {
    /// Suspends until every `enter` has been left.
    fileprivate func reached() async {
        await withCheckedContinuation { continuation in notify(queue: .global()) { continuation.resume() } }
    }
}
