import AuthPostgres
import AuthTestSupport
import Foundation
import Testing

@Suite("PostgresPool.transaction")
struct PostgresPoolTransactionTests {
    struct Abort: Error {}

    @Test func commits() async throws {
        try await PostgresTestDatabase.withTestSchema { pool, _ in
            try await pool.query("CREATE TABLE t (x int)")
            let inserted = try await pool.transaction { connection in
                try connection.execute("INSERT INTO t VALUES (1), (2)").affectedRows
            }
            #expect(inserted == 2)
            #expect(try await pool.query("SELECT count(*) FROM t")[0][0].int == 2)
        }
    }

    @Test func rollsBackOnError() async throws {
        try await PostgresTestDatabase.withTestSchema { pool, _ in
            try await pool.query("CREATE TABLE t (x int)")
            let attempts = Counter()
            await #expect(throws: Abort.self) {
                try await pool.transaction(isolation: .serializable) { connection in
                    attempts.increment()
                    try connection.execute("INSERT INTO t VALUES (1)")
                    throw Abort()
                }
            }
            #expect(attempts.total == 1)
            #expect(try await pool.query("SELECT count(*) FROM t")[0][0].int == 0)
        }
    }

    @Test func nonRetryableDatabaseErrorIsNotRetried() async throws {
        try await PostgresTestDatabase.withTestSchema { pool, _ in
            try await pool.query("CREATE TABLE t (x int PRIMARY KEY)")
            try await pool.query("INSERT INTO t VALUES (1)")
            let attempts = Counter()
            let error = await #expect(throws: PostgresError.self) {
                try await pool.transaction { connection in
                    attempts.increment()
                    try connection.execute("INSERT INTO t VALUES (1)")
                }
            }
            #expect(error?.code == .uniqueViolation)
            #expect(attempts.total == 1)
        }
    }

    /// The last UPDATE with its own COMMIT (`executeAndCommit`) or before `transaction`'s.
    @Test(arguments: [false, true])
    func conflictingSerializableTransactionsBothCommitWithRetries(committingWithTheUpdate: Bool) async throws {
        try await PostgresTestDatabase.withTestSchema(maxConnections: 2) { pool, _ in
            try await pool.query("CREATE TABLE counter (id int PRIMARY KEY, n int NOT NULL)")
            try await pool.query("INSERT INTO counter VALUES (1, 0)")
            let barrier = ThreadBarrier(count: 2)
            let attempts = Counter()

            @Sendable func increment() async throws {
                let mine = Counter()
                try await pool.transaction(isolation: .serializable) { connection in
                    attempts.increment()
                    let attempt = mine.increment()
                    let n = try connection.execute("SELECT n FROM counter WHERE id = 1")[0][0].int64
                    // Both first attempts read the same snapshot before either writes.
                    if attempt == 1 { barrier.arriveAndWait() }
                    let update = "UPDATE counter SET n = $1 WHERE id = 1"
                    if committingWithTheUpdate {
                        try connection.executeAndCommit(update, [.int64(n + 1)])
                    } else {
                        try connection.execute(update, [.int64(n + 1)])
                    }
                }
            }
            async let first: Void = increment()
            async let second: Void = increment()
            _ = try await (first, second)

            #expect(try await pool.query("SELECT n FROM counter")[0][0].int == 2)
            #expect(attempts.total == 3, "one of the two must have been retried once")
        }
    }

    /// Two transactions lock two rows in opposite orders; PostgreSQL aborts one (the victim)
    /// with 40P01 and the pool retries it. The retry must not race the survivor for the rows
    /// again: if it took the first row before the survivor's second UPDATE got it, the two
    /// would deadlock a second time and the count would be 4 (seen once in ten runs). So the
    /// retry waits until the survivor holds both rows; then it can only queue behind it.
    @Test func deadlockIsRetried() async throws {
        try await PostgresTestDatabase.withTestSchema(maxConnections: 2) { pool, _ in
            try await pool.query("CREATE TABLE locks (id int PRIMARY KEY, n int NOT NULL)")
            try await pool.query("INSERT INTO locks VALUES (1, 0), (2, 0)")
            let barrier = ThreadBarrier(count: 2)
            let survivorHoldsBoth = DispatchSemaphore(value: 0)
            let attempts = Counter()

            @Sendable func update(first: Int32, then second: Int32) async throws -> Int {
                let mine = Counter()
                try await pool.transaction { connection in
                    attempts.increment()
                    let attempt = mine.increment()
                    if attempt > 1 {
                        #expect(survivorHoldsBoth.wait(timeout: .now() + 30) == .success)
                    }
                    try connection.execute("SET LOCAL deadlock_timeout = '50ms'")
                    try connection.execute("UPDATE locks SET n = n + 1 WHERE id = $1", [.int32(first)])
                    if attempt == 1 { barrier.arriveAndWait() }
                    try connection.execute("UPDATE locks SET n = n + 1 WHERE id = $1", [.int32(second)])
                    if attempt == 1 { survivorHoldsBoth.signal() }
                }
                return mine.total
            }
            async let a = update(first: 1, then: 2)
            async let b = update(first: 2, then: 1)
            let countA = try await a
            let countB = try await b
            let perTransaction = [countA, countB].sorted()

            let totals = try await pool.query("SELECT n FROM locks ORDER BY id").map { try $0[0].int }
            #expect(totals == [2, 2])
            #expect(perTransaction == [1, 2], "one survivor ran once, the deadlock victim was retried once")
            #expect(attempts.total == 3)
        }
    }

    @Test func givesUpAfterMaxAttempts() async throws {
        try await PostgresTestDatabase.withTestSchema(configure: { $0.transactionRetryBackoff = .milliseconds(1) }) {
            pool,
            _ in
            let attempts = Counter()
            let error = await #expect(throws: PostgresError.self) {
                try await pool.transaction(isolation: .repeatableRead, maxAttempts: 3) { connection in
                    attempts.increment()
                    try connection.executeScript(
                        "DO $$ BEGIN RAISE EXCEPTION 'conflict' USING ERRCODE = 'serialization_failure'; END $$"
                    )
                }
            }
            #expect(error?.code == .serializationFailure)
            #expect(error?.isRetryable == true)
            #expect(attempts.total == 3)
        }
    }

    @Test func retriesUntilTheConflictGoesAway() async throws {
        try await PostgresTestDatabase.withTestSchema { pool, _ in
            let attempts = Counter()
            let result = try await pool.transaction(maxAttempts: 5) { connection in
                let attempt = attempts.increment()
                if attempt < 3 {
                    try connection.executeScript(
                        "DO $$ BEGIN RAISE EXCEPTION 'deadlock' USING ERRCODE = 'deadlock_detected'; END $$"
                    )
                }
                return attempt
            }
            #expect(result == 3)
        }
    }
}

/// A statement prepared before its table changed (a newer replica's migration changed a column's
/// type) fails inside a transaction with "cached plan must not change result type"; the
/// connection forgets it and the pool runs the transaction again, which prepares it afresh.
@Suite("PostgresPool.transaction after a table changed")
struct PostgresPoolStaleStatementTests {
    enum Position: String, CaseIterable, CustomTestStringConvertible {
        /// The transaction's first statement, sent with its `BEGIN`.
        case first
        /// A later statement.
        case later
        /// The last statement, sent with its `COMMIT` (`executeAndCommit`).
        case withCommit

        var testDescription: String { rawValue }
    }

    @Test(arguments: Position.allCases)
    func theTransactionRunsAgain(position: Position) async throws {
        try await PostgresTestDatabase.withTestSchema(maxConnections: 1) { pool, _ in
            try await pool.query("CREATE TABLE t (a int)")
            try await pool.query("INSERT INTO t VALUES (7)")
            let attempts = Counter()
            @Sendable func read(_ connection: PostgresConnection) throws -> Int {
                attempts.increment()
                switch position {
                case .first:
                    let value = try connection.execute("SELECT a FROM t")[0][0].int
                    try connection.execute("SELECT 1")
                    return value
                case .later:
                    try connection.execute("SELECT 1")
                    return try connection.execute("SELECT a FROM t")[0][0].int
                case .withCommit:
                    try connection.execute("SELECT 1")
                    return try connection.executeAndCommit("SELECT a FROM t", [])[0][0].int
                }
            }
            #expect(try await pool.transaction(read) == 7)
            #expect(attempts.total == 1)
            // The pool's one connection has the statement prepared; the column's type changes.
            try await pool.query("ALTER TABLE t ALTER COLUMN a TYPE bigint")
            #expect(try await pool.transaction(read) == 7)
            #expect(attempts.total == 3)
            // Prepared afresh: the next transaction runs once.
            #expect(try await pool.transaction(read) == 7)
            #expect(attempts.total == 4)
        }
    }

    @Test func withoutTheTransactionsRetriesTheErrorSaysWhatHappened() async throws {
        try await PostgresTestDatabase.withTestSchema(maxConnections: 1) { pool, _ in
            try await pool.query("CREATE TABLE t (a int)")
            try await pool.query("INSERT INTO t VALUES (7)")
            let read: @Sendable (PostgresConnection) throws -> Int = { connection in
                try connection.transaction { try connection.execute("SELECT a FROM t")[0][0].int }
            }
            #expect(try await pool.withConnection(read) == 7)
            try await pool.query("ALTER TABLE t ALTER COLUMN a TYPE bigint")
            let error = await #expect(throws: PostgresError.self) { try await pool.withConnection(read) }
            #expect(error?.code == .staleStatement)
            #expect(error?.sqlState == "0A000")
            #expect(error?.isRetryable == true)
            #expect(try await pool.withConnection(read) == 7)
        }
    }
}
