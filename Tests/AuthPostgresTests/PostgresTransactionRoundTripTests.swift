import AuthTestSupport
import Foundation
import Testing

@testable import AuthPostgres

/// `connection.transaction` sends its `BEGIN` with the body's first statement (libpq pipeline
/// mode), with prepared statements and unnamed ones (behind a transaction pooler) alike.
@Suite("PostgresConnection.transaction round trips")
struct PostgresTransactionRoundTripTests {
    static let modes: [PostgresPooler] = [.none, .transaction]

    private func withConnection(
        _ pooler: PostgresPooler,
        _ body: @escaping @Sendable (PostgresConnection, String) throws -> Void
    ) async throws {
        try await PostgresTestDatabase.withTestSchema(maxConnections: 1, configure: { $0.pooler = pooler }) {
            pool,
            schema in
            try await pool.query("CREATE TABLE \(schema).t (x int PRIMARY KEY)", [])
            try await pool.withConnection { try body($0, schema) }
        }
    }

    @Test(arguments: modes)
    func theBeginTravelsWithTheFirstStatement(_ pooler: PostgresPooler) async throws {
        try await withConnection(pooler) { connection, schema in
            let insert = "INSERT INTO \(schema).t VALUES ($1)"
            let read = "SELECT current_setting('transaction_isolation'), txid_current(), count(*) FROM \(schema).t"
            // Prepared once, outside the counted transaction.
            try connection.execute(read, [])
            try connection.execute(insert, [.int32(0)])
            let before = connection.roundTrips
            let (first, second) = try connection.transaction(isolation: .serializable) {
                try connection.execute(insert, [.int32(1)])
                let first = try connection.execute(read, [])
                try connection.execute(insert, [.int32(2)])
                return (first, try connection.execute(read, []))
            }
            // BEGIN + 1st, 2nd, 3rd, 4th, COMMIT: five round trips for four statements.
            #expect(connection.roundTrips - before == 5)
            let isolation = try first[0][0].string
            let (firstTransaction, secondTransaction) = (try first[0][1].int64, try second[0][1].int64)
            let rows = try second[0][2].int
            #expect(isolation == "serializable")
            #expect(firstTransaction == secondTransaction)  // one transaction
            #expect(rows == 3)
            #expect(connection.transactionStatus == .idle)
        }
    }

    @Test(arguments: modes)
    func aFailingFirstStatementRollsBackAndTheConnectionGoesOn(_ pooler: PostgresPooler) async throws {
        try await withConnection(pooler) { connection, schema in
            #expect(throws: PostgresError.self) {
                try connection.transaction {
                    try connection.execute("INSERT INTO \(schema).t VALUES ($1), ($1)", [.int32(7)])
                }
            }
            #expect(connection.transactionStatus == .idle)
            let afterFirst = try connection.execute("SELECT count(*) FROM \(schema).t", [])[0][0].int
            #expect(afterFirst == 0)
            // A failure after the first statement rolls the first one back too.
            let error = #expect(throws: PostgresError.self) {
                try connection.transaction {
                    try connection.execute("INSERT INTO \(schema).t VALUES ($1)", [.int32(8)])
                    try connection.execute("INSERT INTO \(schema).t VALUES ($1)", [.int32(8)])
                }
            }
            #expect(error?.code == .uniqueViolation)
            let afterSecond = try connection.execute("SELECT count(*) FROM \(schema).t", [])[0][0].int
            #expect(afterSecond == 0)
        }
    }

    @Test(arguments: modes)
    func aBodyWithoutStatementsSendsNothing(_ pooler: PostgresPooler) async throws {
        try await withConnection(pooler) { connection, _ in
            let before = connection.roundTrips
            let value = try connection.transaction { 42 }
            #expect(value == 42)
            #expect(connection.roundTrips == before)
            #expect(connection.transactionStatus == .idle)
        }
    }

    /// A script (simple query protocol) cannot share the round trip: the BEGIN goes first, so
    /// `SET LOCAL` takes effect in the transaction.
    @Test(arguments: modes)
    func aScriptFirstRunsInsideTheTransaction(_ pooler: PostgresPooler) async throws {
        try await withConnection(pooler) { connection, _ in
            let timeout = try connection.transaction {
                try connection.executeScript("SET LOCAL statement_timeout = 1234")
                return try connection.execute("SELECT current_setting('statement_timeout')")[0][0].string
            }
            #expect(timeout == "1234ms")
        }
    }

    @Test(arguments: modes)
    func theLastStatementCarriesTheCommit(_ pooler: PostgresPooler) async throws {
        try await withConnection(pooler) { connection, schema in
            let insert = "INSERT INTO \(schema).t VALUES ($1)"
            try connection.execute(insert, [.int32(0)])  // prepared outside the count
            var before = connection.roundTrips
            _ = try connection.transaction { try connection.executeAndCommit(insert, [.int32(1)]) }
            // BEGIN, the INSERT and COMMIT: the whole transaction in one round trip.
            #expect(connection.roundTrips - before == 1)
            #expect(connection.transactionStatus == .idle)
            before = connection.roundTrips
            try connection.transaction {
                try connection.execute(insert, [.int32(2)])
                try connection.executeAndCommit(insert, [.int32(3)])
            }
            #expect(connection.roundTrips - before == 2)
            let count = try connection.execute("SELECT count(*) FROM \(schema).t", [])[0][0].int
            #expect(count == 4)
        }
    }

    @Test(arguments: modes)
    func aFailingLastStatementRollsEverythingBack(_ pooler: PostgresPooler) async throws {
        try await withConnection(pooler) { connection, schema in
            let error = #expect(throws: PostgresError.self) {
                try connection.transaction {
                    try connection.execute("INSERT INTO \(schema).t VALUES ($1)", [.int32(1)])
                    try connection.executeAndCommit("INSERT INTO \(schema).t VALUES ($1)", [.int32(1)])
                }
            }
            #expect(error?.code == .uniqueViolation)
            #expect(connection.transactionStatus == .idle)
            let count = try connection.execute("SELECT count(*) FROM \(schema).t", [])[0][0].int
            #expect(count == 0)
        }
    }

    @Test func executeAndCommitIsTheLastStatementOfATransactionOnly() async throws {
        try await withConnection(.none) { connection, schema in
            let outside = #expect(throws: PostgresError.self) {
                try connection.executeAndCommit("SELECT 1")
            }
            #expect(outside?.code == .invalidArgument)
            let after = #expect(throws: PostgresError.self) {
                try connection.transaction {
                    try connection.executeAndCommit("INSERT INTO \(schema).t VALUES (1)", [])
                    try connection.execute("INSERT INTO \(schema).t VALUES (2)", [])
                }
            }
            #expect(after?.code == .invalidArgument)
            // What was committed stays; nothing ran after it.
            let rows = try connection.execute("SELECT x FROM \(schema).t", [])
            #expect(rows.count == 1)
            #expect(connection.transactionStatus == .idle)
        }
    }

    // MARK: executeWithNext

    @Test(arguments: modes)
    func aStatementWaitsForTheNextOneAndSharesItsRoundTrip(_ pooler: PostgresPooler) async throws {
        try await withConnection(pooler) { connection, schema in
            let lock = "SELECT pg_advisory_xact_lock($1)"
            let count = "SELECT count(*) FROM \(schema).t"
            let insert = "INSERT INTO \(schema).t VALUES ($1)"
            // Prepared once, outside the counted transaction.
            try connection.transaction {
                try connection.executeWithNext(lock, [.int64(11)])
                try connection.execute(count, [])
                try connection.executeAndCommit(insert, [.int32(0)])
            }
            let before = connection.roundTrips
            let seen = try connection.transaction {
                try connection.executeWithNext(lock, [.int64(11)])
                try connection.executeWithNext(insert, [.int32(1)])
                let seen = try connection.execute(count, [])[0][0].int
                try connection.executeAndCommit(insert, [.int32(2)])
                return seen
            }
            // BEGIN, the lock, the first insert and the count in one round trip; the second
            // insert and COMMIT in the other.
            #expect(connection.roundTrips - before == 2)
            #expect(seen == 2)  // the waiting insert ran before the count
            let total = try connection.execute(count, [])[0][0].int
            #expect(total == 3)
            #expect(connection.transactionStatus == .idle)
        }
    }

    /// The guarantee the limits rest on: the statement after the lock takes its snapshot after
    /// the lock is held, so it sees what the previous holder committed (one statement taking the
    /// lock and reading would not: its snapshot predates the wait).
    @Test(arguments: modes)
    func theNextStatementSeesWhatThePreviousHolderCommitted(_ pooler: PostgresPooler) async throws {
        let applicationName = "with_next_\(UUID().uuidString.prefix(8).lowercased())"
        try await PostgresTestDatabase.withTestSchema(
            maxConnections: 3,
            configure: {
                $0.pooler = pooler
                $0.applicationName = applicationName
            }
        ) { pool, schema in
            try await pool.query("CREATE TABLE \(schema).t (x int PRIMARY KEY)", [])
            let holderLocked = AsyncStream.makeStream(of: Void.self)
            let commit = DispatchSemaphore(value: 0)
            async let holder: Void = pool.withConnection { connection in
                try connection.transaction {
                    try connection.execute("SELECT pg_advisory_xact_lock($1)", [.int64(12)])
                    try connection.execute("INSERT INTO \(schema).t VALUES (1)", [])
                    holderLocked.continuation.yield()
                    // Commits once the other transaction waits for the lock (below); the
                    // pool's thread may block.
                    commit.wait()
                }
            }
            for await _ in holderLocked.stream { break }
            async let waiter: Int = pool.withConnection { connection in
                try connection.transaction {
                    try connection.executeWithNext("SELECT pg_advisory_xact_lock($1)", [.int64(12)])
                    return try connection.execute("SELECT count(*) FROM \(schema).t", [])[0][0].int
                }
            }
            let waiting = try await eventually {
                try await pool.query(
                    """
                    SELECT count(*) FROM pg_stat_activity
                    WHERE application_name = $1 AND wait_event_type = 'Lock' AND wait_event = 'advisory'
                    """,
                    [.text(applicationName)]
                )[0][0].int == 1
            }
            commit.signal()
            try await holder
            #expect(waiting, "the second transaction never waited for the lock")
            let seenAfterWaiting = try await waiter
            #expect(seenAfterWaiting == 1)
        }
    }

    @Test(arguments: modes)
    func aWaitingStatementsErrorComesFromTheCallThatSendsIt(_ pooler: PostgresPooler) async throws {
        try await withConnection(pooler) { connection, schema in
            let error = #expect(throws: PostgresError.self) {
                try connection.transaction {
                    try connection.executeWithNext("INSERT INTO \(schema).t VALUES ($1), ($1)", [.int32(1)])
                    try connection.execute("INSERT INTO \(schema).t VALUES ($1)", [.int32(2)])
                }
            }
            #expect(error?.code == .uniqueViolation)
            #expect(connection.transactionStatus == .idle)
            let rowsAfterFailure = try connection.execute("SELECT count(*) FROM \(schema).t", [])[0][0].int
            #expect(rowsAfterFailure == 0)
        }
    }

    @Test(arguments: modes)
    func aWaitingStatementWithNothingAfterItGoesWithTheCommit(_ pooler: PostgresPooler) async throws {
        try await withConnection(pooler) { connection, schema in
            try connection.transaction {
                try connection.executeWithNext("INSERT INTO \(schema).t VALUES ($1)", [.int32(1)])
            }
            try connection.transaction {
                try connection.execute("INSERT INTO \(schema).t VALUES ($1)", [.int32(2)])
                try connection.executeWithNext("INSERT INTO \(schema).t VALUES ($1)", [.int32(3)])
            }
            let rows = try connection.execute("SELECT x FROM \(schema).t ORDER BY x", [])
            let values = try rows.map { try $0[0].int }
            #expect(values == [1, 2, 3])
            // Its failure there fails the transaction.
            let error = #expect(throws: PostgresError.self) {
                try connection.transaction {
                    try connection.executeWithNext("INSERT INTO \(schema).t VALUES ($1)", [.int32(3)])
                }
            }
            #expect(error?.code == .uniqueViolation)
            #expect(connection.transactionStatus == .idle)
        }
    }

    @Test(arguments: modes)
    func aBodyThatThrowsDropsItsWaitingStatements(_ pooler: PostgresPooler) async throws {
        struct Refused: Error {}
        try await withConnection(pooler) { connection, schema in
            // A sequence is not rolled back: it shows whether a statement ran at all.
            try connection.execute("CREATE SEQUENCE \(schema).s", [])
            #expect(throws: Refused.self) {
                try connection.transaction {
                    try connection.execute("INSERT INTO \(schema).t VALUES ($1)", [.int32(1)])
                    try connection.executeWithNext("SELECT nextval('\(schema).s')", [])
                    throw Refused()
                }
            }
            #expect(connection.transactionStatus == .idle)
            let sequenceUsed = try connection.execute("SELECT is_called FROM \(schema).s", [])[0][0].bool
            #expect(sequenceUsed == false)
            let rowsAfterRefusal = try connection.execute("SELECT count(*) FROM \(schema).t", [])[0][0].int
            #expect(rowsAfterRefusal == 0)
            // The next transaction sends only its own statements.
            _ = try connection.transaction {
                try connection.executeAndCommit("INSERT INTO \(schema).t VALUES ($1)", [.int32(2)])
            }
            let sequenceUsedLater = try connection.execute("SELECT is_called FROM \(schema).s", [])[0][0].bool
            #expect(sequenceUsedLater == false)
            let rowsLater = try connection.execute("SELECT count(*) FROM \(schema).t", [])[0][0].int
            #expect(rowsLater == 1)
        }
    }

    @Test func executeWithNextRunsInsideATransactionOnly() async throws {
        try await withConnection(.none) { connection, schema in
            let outside = #expect(throws: PostgresError.self) {
                try connection.executeWithNext("INSERT INTO \(schema).t VALUES (1)", [])
            }
            #expect(outside?.code == .invalidArgument)
            let afterCommit = #expect(throws: PostgresError.self) {
                try connection.transaction {
                    try connection.executeAndCommit("INSERT INTO \(schema).t VALUES (1)", [])
                    try connection.executeWithNext("INSERT INTO \(schema).t VALUES (2)", [])
                }
            }
            #expect(afterCommit?.code == .invalidArgument)
            let committed = try connection.execute("SELECT x FROM \(schema).t", [])
            #expect(committed.count == 1)
            #expect(connection.transactionStatus == .idle)
        }
    }
}
