import AuthPostgres
import BenchmarkHarness
import Logging

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
        let cpu = CPUAccounting { try await pool.backendPIDs(applicationName: applicationName) }
        return try await ThreadedThroughput.measure(
            threads: threads,
            duration: duration,
            // A connection is used by one thread only: each is made on the thread that uses it.
            setUp: { [configuration] in try PostgresConnection.connect(configuration: configuration, logger: logger) },
            operation: { connection in _ = try connection.execute(statement, []) }
        ) { run in
            let mark = try await cpu.start()
            let count = try await run()
            // The connections are still open: their backends' CPU can be read.
            let cpuSeconds = try await mark.secondsSince()
            return LoadResult(
                calls: count.operations,
                elapsed: count.elapsed,
                histogram: LoadResult.emptyHistogram(),
                cpuSeconds: cpuSeconds
            )
        }
    }
}
