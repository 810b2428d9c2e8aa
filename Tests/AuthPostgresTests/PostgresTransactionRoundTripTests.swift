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
}
