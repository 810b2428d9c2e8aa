import AuthPostgres
import AuthServiceRuntime
import AuthTestSupport
import Foundation
import Logging
import Testing

/// Start-up waits for an unreachable database with backoff, bounded by a total time, instead of
/// exiting at once. The waits run on a test clock: nothing sleeps.
@Suite struct DatabaseStartupTests {
    let logger = PostgresTestDatabase.makeLogger(label: "auth.tests.startup")

    /// A port on 127.0.0.1 where nothing listens (bound, then released).
    func closedPort() throws -> Int {
        let fd = closeOnExecTCPSocket()
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                bind(fd, pointer, length) == 0 && getsockname(fd, pointer, &length) == 0
            }
        }
        try #require(bound)
        return Int(UInt16(bigEndian: address.sin_port))
    }

    @Test func givesUpAfterTheLimitWithBackoffBetweenAttempts() async throws {
        let pool = PostgresPool(
            configuration: PostgresConfiguration(
                connectionString: "host=127.0.0.1 port=\(try closedPort()) dbname=auth"
            ),
            logger: logger
        )
        let clock = TestSleepClock(advancesOnSleep: true)
        let error = await #expect(throws: DatabaseStartup.Unreachable.self) {
            try await DatabaseStartup(limit: .seconds(10)).wait(clock: clock, logger: logger) {
                try await pool.query("SELECT 1", [])
            }
        }
        await pool.close()
        // Waits of 0.5, 1, 2, 4 s, then the 2.5 s left: six attempts in 10 s.
        #expect(error?.attempts == 6)
        #expect(clock.now.offset == .seconds(10))
        #expect(clock.sleepsStarted == 5)
        #expect("\(error.map { "\($0)" } ?? "")".contains("AUTH_DB_START_TIMEOUT_SECONDS"))
    }

    @Test func aZeroLimitMeansOneAttempt() async throws {
        let pool = PostgresPool(
            configuration: PostgresConfiguration(
                connectionString: "host=127.0.0.1 port=\(try closedPort()) dbname=auth"
            ),
            logger: logger
        )
        let clock = TestSleepClock(advancesOnSleep: true)
        let error = await #expect(throws: DatabaseStartup.Unreachable.self) {
            try await DatabaseStartup(limit: .zero).wait(clock: clock, logger: logger) {
                try await pool.query("SELECT 1", [])
            }
        }
        await pool.close()
        #expect(error?.attempts == 1)
        #expect(clock.sleepsStarted == 0)
    }

    /// The database comes up while start-up waits: the next attempt succeeds.
    @Test func succeedsOnceTheDatabaseIsUp() async throws {
        try await PostgresTestCluster.withCluster { cluster in
            let pool = PostgresPool(
                configuration: PostgresConfiguration(connectionString: cluster.connectionString),
                logger: logger
            )
            try await cluster.stop(immediate: true)
            let clock = TestSleepClock()
            let logger = self.logger
            let waiting = Task {
                try await DatabaseStartup(limit: .seconds(60)).wait(clock: clock, logger: logger) {
                    try await pool.query("SELECT 1", [])
                }
            }
            await clock.waitForSleeps(1)  // the first attempt failed
            try await cluster.start()
            clock.advance(by: .milliseconds(500))
            #expect(try await waiting.value == 2)
            await pool.close()
        }
    }

    /// An error that is not "unreachable" (here a failing statement) is not retried.
    @Test func otherErrorsAreNotRetried() async throws {
        try await PostgresTestDatabase.withTestSchema(maxConnections: 1, logger: logger) { pool, _ in
            let clock = TestSleepClock(advancesOnSleep: true)
            let error = await #expect(throws: PostgresError.self) {
                try await DatabaseStartup(limit: .seconds(60)).wait(clock: clock, logger: logger) {
                    try await pool.query("SELECT 1 / 0", [])
                }
            }
            #expect(error?.isUnavailable == false)
            #expect(clock.sleepsStarted == 0)
        }
    }
}
