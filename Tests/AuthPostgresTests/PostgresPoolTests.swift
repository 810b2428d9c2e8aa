import AuthPostgres
import AuthTestSupport
import Foundation
import Testing

@Suite("PostgresPool")
struct PostgresPoolTests {
    @Test func boundIsRespected() async throws {
        try await PostgresTestDatabase.withTestSchema(maxConnections: 3) { pool, _ in
            let concurrent = Counter()
            let pids = Locked(Set<Int32>())
            // Each body holds its connection (blocking its pool thread, as libpq's calls do) until
            // the test has seen three bodies running and the fourth caller waiting: no timing to
            // miss on a loaded machine (with a 0.2 s sleep, a late start saw 2 at once; and a
            // caller counts as leased before its body runs, while its connection opens).
            let gate = DispatchSemaphore(value: 0)
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<4 {
                    group.addTask {
                        try await pool.withConnection { connection in
                            concurrent.increment()
                            defer { concurrent.decrement() }
                            pids.withLock { _ = $0.insert(connection.backendPID) }
                            try connection.execute("SELECT 1")
                            gate.wait()
                        }
                    }
                }
                await self.waitUntil { concurrent.current == 3 && pool.statistics.waitingCallers == 1 }
                for _ in 0..<4 { gate.signal() }
                try await group.waitForAll()
            }
            #expect(concurrent.total == 4)
            #expect(concurrent.maximum == 3)
            #expect(pids.withLock { $0.count } == 3)
            let statistics = pool.statistics
            #expect(statistics.idleConnections == 3)
            #expect(statistics.leasedConnections == 0)
            #expect(statistics.waitingCallers == 0)
        }
    }

    @Test(.timeLimit(.minutes(2))) func waitingCallerTimesOut() async throws {
        try await PostgresTestDatabase.withTestSchema(
            maxConnections: 1,
            configure: {
                $0.acquireTimeout = .milliseconds(150)
                $0.statementTimeout = nil
            }
        ) { pool, _ async throws in
            let holder = Task { try await pool.query("SELECT pg_sleep(3600)") }
            await self.waitUntil { pool.statistics.leasedConnections == 1 }
            let error = await #expect(throws: PostgresError.self) { try await pool.query("SELECT 1") }
            #expect(error?.code == .poolTimeout)
            // The holder keeps the only connection for an hour (no statement timeout): a pool
            // timeout is its own (150 ms).
            holder.cancel()
            _ = await holder.result
            // The pool works again once the connection is back.
            #expect(try await pool.query("SELECT 2")[0][0].int == 2)
        }
    }

    /// The pool has one timer for all waiters: after the first waiter's deadline it is armed
    /// again for the next one's, which times out on its own deadline too. (The two usually queue
    /// together, the second a little later; the state machine's tests pin the re-arming down.)
    @Test(.timeLimit(.minutes(2))) func waitersQueuedOneAfterAnotherEachTimeOut() async throws {
        try await PostgresTestDatabase.withTestSchema(
            maxConnections: 1,
            configure: {
                $0.acquireTimeout = .milliseconds(300)
                $0.statementTimeout = nil
            }
        ) { pool, _ async throws in
            let holder = Task { try await pool.query("SELECT pg_sleep(3600)") }
            await self.waitUntil { pool.statistics.leasedConnections == 1 }
            let first = Task { try await pool.query("SELECT 1") }
            let second = Task { try await pool.query("SELECT 2") }
            for waiter in [first, second] {
                let result = await waiter.result
                #expect(throws: PostgresError.self) { try result.get() }
                if case .failure(let error as PostgresError) = result { #expect(error.code == .poolTimeout) }
            }
            #expect(pool.statistics.acquireTimeouts == 2)
            #expect(pool.statistics.waitingCallers == 0)
            holder.cancel()
            _ = await holder.result
            #expect(try await pool.query("SELECT 3")[0][0].int == 3)
        }
    }

    @Test(.timeLimit(.minutes(2))) func waitingCallerRespectsCancellation() async throws {
        try await PostgresTestDatabase.withTestSchema(
            maxConnections: 1,
            configure: {
                $0.acquireTimeout = .seconds(3600)
                $0.statementTimeout = nil
            }
        ) { pool, _ in
            let holder = Task { try await pool.query("SELECT pg_sleep(3600)") }
            await self.waitUntil { pool.statistics.leasedConnections == 1 }
            let waiter = Task { try await pool.query("SELECT 1") }
            await self.waitUntil { pool.statistics.waitingCallers == 1 }
            waiter.cancel()
            let result = await waiter.result
            #expect(throws: CancellationError.self) { try result.get() }
            // A CancellationError: it left on the cancel, not with the connection the holder
            // would give back after an hour, nor with an acquire timeout.
            #expect(pool.statistics.waitingCallers == 0)
            holder.cancel()
            _ = await holder.result
        }
    }

    /// The statement sleeps for an hour: only the cancel can end it (a broken cancel fails the
    /// time limit instead of passing late).
    @Test(.timeLimit(.minutes(2))) func runningStatementIsCancelledWithItsTask() async throws {
        let applicationName = "cancel_test_\(uniqueSuffix())"
        try await PostgresTestDatabase.withTestSchema(
            maxConnections: 2,
            configure: {
                $0.applicationName = applicationName
                $0.statementTimeout = nil
            }
        ) { pool, _ in
            let sleeper = Task { try await pool.query("SELECT pg_sleep(3600)") }
            // Cancel only once the statement really runs on the server. (It once waited 5 s at
            // most, which a loaded machine overran: the sleeper had not been scheduled yet.) The
            // statement timeout is off: at the pool's default, 5 s, it would end the "hour" first
            // whenever seeing the sleep took that long (as in PostgresPoolRestartTests once).
            let running = try await eventually {
                let rows = try await pool.query(
                    """
                    SELECT count(*) FROM pg_stat_activity
                    WHERE application_name = $1 AND state = 'active' AND query = 'SELECT pg_sleep(3600)'
                    """,
                    [.text(applicationName)]
                )
                return try rows[0][0].int == 1
            }
            #expect(running, "the sleep never showed in pg_stat_activity")
            sleeper.cancel()
            let result = await sleeper.result
            #expect(throws: PostgresError.self) { try result.get() }
            if case .failure(let error as PostgresError) = result {
                #expect(error.code == .cancelled)
            }
            // `.cancelled`: it was cut, not run for its hour.
            // The connection is kept and serves the next callers, in a clean state.
            #expect(try await pool.query("SELECT 3")[0][0].int == 3)
            #expect(pool.statistics.idleConnections == 2)
        }
    }

    /// Waits for a pool statistic nothing notifies; records an issue if it never holds.
    private func waitUntil(
        sourceLocation: SourceLocation = #_sourceLocation,
        _ condition: @escaping () -> Bool
    ) async {
        let held = await eventually { condition() }
        #expect(held, "the pool never reached the state the test waits for", sourceLocation: sourceLocation)
    }

    @Test func statementTimeout() async throws {
        try await PostgresTestDatabase.withTestSchema(
            maxConnections: 1,
            configure: { $0.statementTimeout = .milliseconds(200) }
        ) { pool, _ in
            let error = await #expect(throws: PostgresError.self) { try await pool.query("SELECT pg_sleep(30)") }
            #expect(error?.code == .timeout)
            #expect(error?.sqlState == "57014")
            #expect(error?.isUnavailable == false)
            // SQLSTATE 57014: cut by the 200 ms statement timeout, not run for its 30 s.
            let next = try await pool.query("SELECT 4")[0][0].int
            #expect(next == 4)
        }
    }

    @Test func transactionLeftOpenIsRolledBack() async throws {
        try await PostgresTestDatabase.withTestSchema(maxConnections: 1) { pool, _ in
            try await pool.query("CREATE TABLE t (x int)")
            try await pool.withConnection { connection in
                try connection.executeScript("BEGIN; INSERT INTO t VALUES (1)")
            }
            let (status, count) = try await pool.withConnection { connection in
                (connection.transactionStatus, try connection.execute("SELECT count(*) FROM t")[0][0].int)
            }
            #expect(status == .idle)
            #expect(count == 0)
        }
    }

    @Test func errorsCarryCodesButNoValues() async throws {
        try await PostgresTestDatabase.withTestSchema { pool, schema in
            try await pool.query("CREATE TABLE users (email text CONSTRAINT users_email_key UNIQUE)")
            try await pool.query("INSERT INTO users VALUES ($1)", [.text("alice@example.com")])
            let duplicate = await #expect(throws: PostgresError.self) {
                try await pool.query("INSERT INTO users VALUES ($1)", [.text("alice@example.com")])
            }
            #expect(duplicate?.code == .uniqueViolation)
            #expect(duplicate?.sqlState == "23505")
            #expect(duplicate?.constraint == "users_email_key")
            #expect(duplicate?.table == "users")
            #expect(duplicate?.schema == schema)
            #expect(duplicate?.description.contains("alice") == false)

            let badInput = await #expect(throws: PostgresError.self) {
                try await pool.query("SELECT $1::int4", [.text("secret-token-123")])
            }
            #expect(badInput?.code == .invalidData)
            #expect(badInput?.sqlState == "22P02")
            #expect(badInput?.description.contains("secret-token-123") == false)
            #expect(badInput?.message.contains("secret-token-123") == false)

            let syntax = await #expect(throws: PostgresError.self) { try await pool.query("SELEC 1") }
            #expect(syntax?.code == .queryFailed)
            #expect(syntax?.sqlState == "42601")

            let notNull = await #expect(throws: PostgresError.self) {
                try await pool.query("CREATE TABLE n (x int NOT NULL); INSERT INTO n VALUES (NULL)")
            }
            // Two statements cannot be prepared together.
            #expect(notNull?.code == .queryFailed)
        }
    }

    /// `openMinimumConnections` opens the missing connections at once and counts those in use;
    /// the server sees exactly that many sessions of the pool.
    @Test func minimumConnectionsAreOpenedAtOnce() async throws {
        let name = "auth-tests-min-" + UUID().uuidString.prefix(8).lowercased()
        try await PostgresTestDatabase.withTestSchema(
            maxConnections: 4,
            configure: {
                $0.minConnections = 3
                $0.applicationName = name
            }
        ) { pool, _ in
            #expect(pool.statistics.idleConnections == 0)
            #expect(await pool.openMinimumConnections() == 3)
            #expect(pool.statistics.idleConnections == 3)
            #expect(await pool.openMinimumConnections() == 0)
            let sessions = try await pool.backendPIDs(applicationName: name)
            #expect(sessions.count == 3)
            // One in use still counts: nothing new is opened beside it.
            try await pool.withConnection { _ in }
            #expect(try await pool.backendPIDs(applicationName: name).count == 3)
        }
    }

    /// Against an unreachable database a pass makes one attempt and gives every slot back.
    @Test(.timeLimit(.minutes(1))) func minimumAgainstAnUnreachableDatabaseGivesTheSlotsBack() async throws {
        var configuration = PostgresConfiguration(
            connectionString: "host=127.0.0.1 port=1 dbname=auth user=postgres",
            maxConnections: 4
        )
        configuration.minConnections = 3
        let pool = PostgresPool(configuration: configuration, logger: PostgresTestDatabase.makeLogger())
        #expect(await pool.openMinimumConnections() == 0)
        #expect(pool.statistics.leasedConnections == 0)
        #expect(pool.statistics.idleConnections == 0)
        await pool.close()
    }

    /// Run as a `Service`, the pool opens its minimum before any call needs a connection and
    /// closes when its task ends.
    @Test(.timeLimit(.minutes(1))) func runningPoolOpensItsMinimum() async throws {
        let url = try await PostgresTestDatabase.connectionString()
        var configuration = PostgresConfiguration(connectionString: url, maxConnections: 3)
        configuration.minConnections = 2
        let pool = PostgresPool(configuration: configuration, logger: PostgresTestDatabase.makeLogger())
        let running = Task { try await pool.run() }
        await self.waitUntil { pool.statistics.idleConnections == 2 }
        running.cancel()
        try await running.value
        let error = await #expect(throws: PostgresError.self) { try await pool.query("SELECT 1") }
        #expect(error?.code == .closed)
    }

    /// Idle connections whose server sessions ended (here `pg_terminate_backend`, as after a
    /// restart) are found by the running pool's check and replaced, instead of counting toward
    /// the minimum until a call finds them.
    @Test(.timeLimit(.minutes(1))) func idleConnectionsTheServerEndedAreReplaced() async throws {
        let url = try await PostgresTestDatabase.connectionString()
        let applicationName = "idle-check-\(UInt32.random(in: 0...UInt32.max))"
        var configuration = PostgresConfiguration(connectionString: url, maxConnections: 3)
        configuration.applicationName = applicationName
        configuration.minConnections = 2
        let pool = PostgresPool(configuration: configuration, logger: PostgresTestDatabase.makeLogger())
        #expect(await pool.openMinimumConnections() == 2)
        #expect(await pool.discardBrokenIdleConnections() == 0)
        #expect(pool.statistics.idleConnections == 2)

        let admin = PostgresPool(
            configuration: PostgresConfiguration(connectionString: url, maxConnections: 1),
            logger: PostgresTestDatabase.makeLogger()
        )
        let terminated = try await admin.query(
            """
            SELECT count(*) FILTER (WHERE pg_terminate_backend(pid, 10000))
            FROM pg_stat_activity WHERE application_name = $1
            """,
            [.text(applicationName)]
        )[0][0].int
        await admin.close()
        #expect(terminated == 2)

        #expect(await pool.discardBrokenIdleConnections() == 2)
        #expect(pool.statistics.idleConnections == 0)
        #expect(await pool.openMinimumConnections() == 2)
        #expect(pool.statistics.idleConnections == 2)
        #expect(try await pool.query("SELECT 1")[0][0].int == 1)
        await pool.close()
    }

    @Test func closedPoolRefusesWork() async throws {
        let url = try await PostgresTestDatabase.connectionString()
        let pool = PostgresPool(
            configuration: PostgresConfiguration(connectionString: url, maxConnections: 2),
            logger: PostgresTestDatabase.makeLogger()
        )
        #expect(try await pool.query("SELECT 1")[0][0].int == 1)
        await pool.close()
        let error = await #expect(throws: PostgresError.self) { try await pool.query("SELECT 1") }
        #expect(error?.code == .closed)
        await pool.close()
    }

    /// The second query fails at once, during the backoff, saying when the next attempt is: it
    /// does not wait for the hour-long backoff (no wall-clock bound, which the whole suite on two
    /// cores can exceed; the time limit only stops a broken pool from hanging the run).
    @Test(.timeLimit(.minutes(1))) func unreachableDatabaseFailsFastWithBackoff() async throws {
        // A port where nothing listens: take a free one from a cluster-less address.
        var configuration = PostgresConfiguration(
            connectionString: "host=127.0.0.1 port=1 dbname=auth user=postgres",
            maxConnections: 2
        )
        configuration.reconnectBackoff = .seconds(3_600)
        configuration.reconnectBackoffLimit = .seconds(7_200)  // else the 2 s default caps it
        let pool = PostgresPool(configuration: configuration, logger: PostgresTestDatabase.makeLogger())
        let first = await #expect(throws: PostgresError.self) { try await pool.query("SELECT 1") }
        #expect(first?.code == .unavailable)
        #expect(first?.isUnavailable == true)
        let second = await #expect(throws: PostgresError.self) { try await pool.query("SELECT 1") }
        #expect(second?.code == .unavailable)
        #expect(second?.message.contains("next connection attempt") == true)
        await pool.close()
    }
}
