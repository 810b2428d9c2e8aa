import AuthPostgres
import BenchmarkHarness
import Dispatch
import Foundation
import Logging
import Synchronization

/// What one statement costs a service through its ``PostgresPool`` beside the same statement on
/// a connection its thread owns: the libpq calls and the server's work are the same, so the
/// difference is the pool's hand-offs (the calling task to a pool thread and back). The figure
/// a change of `AuthPostgres`'s execution model (libpq driven without blocking, on the event
/// loops) would be measured against.
enum StatementCost {
    static let statement = "SELECT 1"

    /// `threads` threads, each with a connection of its own (`applicationName`), run
    /// ``statement`` for `duration`; CPU counted for this process and those connections'
    /// backends, from when every thread is connected.
    static func direct(
        threads: Int,
        duration: Duration,
        configuration: PostgresConfiguration,
        applicationName: String,
        pool: PostgresPool,
        logger: Logger
    ) async throws -> LoadResult {
        var configuration = configuration
        configuration.applicationName = applicationName
        let connected = DispatchGroup()
        let finished = DispatchGroup()
        let start = DispatchSemaphore(value: 0)
        let close = DispatchSemaphore(value: 0)
        let calls = Atomic<Int>(0)
        let failure = Mutex<(any Error)?>(nil)
        let deadline = Mutex<ContinuousClock.Instant>(.now)
        for _ in 0..<threads {
            connected.enter()
            finished.enter()
            // A connection is used by one thread only: each is made on the thread that uses it.
            Thread { [configuration] in
                var connection: PostgresConnection?
                do {
                    connection = try PostgresConnection.connect(configuration: configuration, logger: logger)
                } catch {
                    failure.withLock { $0 = $0 ?? error }
                }
                connected.leave()
                start.wait()
                if let connection {
                    let end = deadline.withLock { $0 }
                    var count = 0
                    do {
                        repeat {
                            _ = try connection.execute(statement, [])
                            count += 1
                        } while ContinuousClock.now < end
                    } catch {
                        failure.withLock { $0 = $0 ?? error }
                    }
                    calls.add(count, ordering: .relaxed)
                }
                finished.leave()
                // Open until the backends' CPU time is read.
                close.wait()
                withExtendedLifetime(connection) {}
            }.start()
        }
        defer { for _ in 0..<threads { close.signal() } }
        await withCheckedContinuation { continuation in connected.notify(queue: .global()) { continuation.resume() } }
        if let error = failure.withLock({ $0 }) {
            for _ in 0..<threads { start.signal() }
            throw error
        }
        let cpu = CPUAccounting { try await pool.backendPIDs(applicationName: applicationName) }
        let mark = try await cpu.start()
        let started = ContinuousClock.now
        deadline.withLock { $0 = started + duration }
        for _ in 0..<threads { start.signal() }
        await withCheckedContinuation { continuation in finished.notify(queue: .global()) { continuation.resume() } }
        let elapsed = ContinuousClock.now - started
        let cpuSeconds = try await mark.secondsSince()
        if let error = failure.withLock({ $0 }) { throw error }
        return LoadResult(
            calls: calls.load(ordering: .relaxed),
            elapsed: elapsed,
            histogram: LoadResult.emptyHistogram(),
            cpuSeconds: cpuSeconds
        )
    }
}
