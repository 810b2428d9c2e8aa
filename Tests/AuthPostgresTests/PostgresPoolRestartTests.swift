import AuthPostgres
import AuthTestSupport
import Foundation
import Testing

/// The database restarts under a live pool (a private cluster, so the shared one stays up).
@Suite("PostgresPool across a database restart")
struct PostgresPoolRestartTests {
    /// The in-flight statement sleeps for an hour and the connect timeout is a minute: only
    /// the restart can cut the one, and only a refused connection can end the other early. So
    /// the outcomes show "promptly" without a stopwatch; a hang fails the time limit.
    ///
    /// The pool's statement timeout is off: at its default (5 s) the timeout, not the restart,
    /// ended the sleep whenever the test took longer than that to see it running (it did once
    /// under load, and the in-flight call failed with `timeout` instead of `connectionLost`).
    @Test(.timeLimit(.minutes(5))) func poolRecoversAfterRestart() async throws {
        try await PostgresTestCluster.withCluster { cluster in
            var configuration = PostgresConfiguration(
                connectionString: cluster.connectionString,
                maxConnections: 3,
                connectTimeout: .seconds(60),
                acquireTimeout: .seconds(60),
                applicationName: "restart-test"
            )
            configuration.statementTimeout = nil
            configuration.reconnectBackoff = .milliseconds(50)
            configuration.reconnectBackoffLimit = .milliseconds(200)
            let pool = PostgresPool(configuration: configuration, logger: PostgresTestDatabase.makeLogger())
            do {
                // Open all three connections.
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for _ in 0..<3 { group.addTask { try await pool.query("SELECT pg_sleep(0.05)") } }
                    try await group.waitForAll()
                }
                #expect(pool.statistics.idleConnections == 3)

                // `immediate` kills the server (like a crash); `fast` sends admin_shutdown (57P01).
                for immediate in [true, false] {
                    try await self.restart(cluster: cluster, pool: pool, immediate: immediate)
                }
            } catch {
                await pool.close()
                throw error
            }
            await pool.close()
        }
    }

    /// The server restarts while the pool only has idle connections. Each of them is stale
    /// (a shutdown notice or end of stream is waiting on its socket); none may be handed out, so
    /// the first call on each slot after the restart succeeds, with no retry.
    @Test func firstCallsAfterARestartDoNotMeetStaleConnections() async throws {
        try await PostgresTestCluster.withCluster { cluster in
            var configuration = PostgresConfiguration(
                connectionString: cluster.connectionString,
                maxConnections: 3,
                connectTimeout: .seconds(60),
                acquireTimeout: .seconds(60),
                applicationName: "idle-restart-test"
            )
            configuration.reconnectBackoff = .milliseconds(50)
            let pool = PostgresPool(configuration: configuration, logger: PostgresTestDatabase.makeLogger())
            do {
                for immediate in [false, true] {
                    // Three connections, then all idle.
                    try await withThrowingTaskGroup(of: Void.self) { group in
                        for _ in 0..<3 { group.addTask { try await pool.query("SELECT pg_sleep(0.05)") } }
                        try await group.waitForAll()
                    }
                    #expect(pool.statistics.idleConnections == 3)
                    let before = try await pool.query(
                        "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'idle-restart-test'"
                    )[0][0].int
                    #expect(before == 3)

                    try await cluster.stop(immediate: immediate)
                    try await cluster.start()

                    // Three calls at once, each on one of the three stale slots: all succeed.
                    let results = await withTaskGroup(of: Result<Int, any Error>.self) { group in
                        for value in 0..<3 {
                            group.addTask {
                                do {
                                    return .success(
                                        try await pool.withConnection { connection in
                                            try connection.execute("SELECT pg_sleep(0.05)")
                                            return try connection.execute("SELECT $1::int4", [.int32(Int32(value))])[0][
                                                0
                                            ].int
                                        }
                                    )
                                } catch {
                                    return .failure(error)
                                }
                            }
                        }
                        var results: [Result<Int, any Error>] = []
                        for await result in group { results.append(result) }
                        return results
                    }
                    let values = results.compactMap { try? $0.get() }.sorted()
                    #expect(values == [0, 1, 2], "immediate: \(immediate), results: \(results)")
                }
            } catch {
                await pool.close()
                throw error
            }
            await pool.close()
        }
    }

    private func restart(cluster: PostgresTestCluster, pool: PostgresPool, immediate: Bool) async throws {
        let inFlight = Task { try await pool.query("SELECT pg_sleep(3600)") }
        // Wait until the sleep really runs on the server.
        let running = try await eventually {
            try await pool.query(
                """
                SELECT count(*) FROM pg_stat_activity
                WHERE application_name = 'restart-test' AND state = 'active' AND query LIKE 'SELECT pg_sleep(3600)%'
                """
            )[0][0].int == 1
        }
        #expect(running, "the sleep never showed in pg_stat_activity")

        try await cluster.stop(immediate: immediate)
        // An hour-long sleep that returns at all was cut by the restart.
        let result = await inFlight.result
        switch result {
        case .success:
            Issue.record("the in-flight query succeeded although the server went down")
        case .failure(let error as PostgresError):
            #expect(error.isUnavailable, "got \(error)")
            #expect(error.code == .connectionLost, "got \(error)")
        case .failure(let error):
            Issue.record("unexpected error \(error)")
        }

        // While the server is down, calls fail with an unavailability error: the refused new
        // connection (libpq's "Connection refused") or, right after one, the pool's backoff
        // before the next attempt; never the minute-long connect timeout.
        for _ in 0..<3 {
            let error = await #expect(throws: PostgresError.self) { try await pool.query("SELECT 1") }
            // `.unavailable`, not `.connectionLost`: stale idle connections are noticed and
            // dropped before use, so the failure is the refused new connection.
            #expect(error?.code == .unavailable, "got \(String(describing: error))")
            let text = String(describing: error)
            #expect(text.contains("Connection refused") || text.contains("next connection attempt in"), "got \(text)")
        }

        try await cluster.start()

        // Later calls succeed on the same pool (after at most one backoff period).
        let recovered = try await eventually(interval: .milliseconds(50)) {
            guard let rows = try? await pool.query("SELECT 42") else { return false }
            return try rows[0][0].int == 42
        }
        #expect(recovered)
        // Every pooled connection works again: stale ones were dropped, not handed out.
        try await withThrowingTaskGroup(of: Int.self) { group in
            for value in 0..<3 {
                group.addTask {
                    try await pool.withConnection { connection in
                        try connection.execute("SELECT pg_sleep(0.05)")
                        return try connection.execute("SELECT $1::int4", [.int32(Int32(value))])[0][0].int
                    }
                }
            }
            var values: [Int] = []
            for try await value in group { values.append(value) }
            #expect(values.sorted() == [0, 1, 2])
        }
    }
}
