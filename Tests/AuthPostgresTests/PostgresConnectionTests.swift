import AuthPostgres
import AuthTestSupport
import Foundation
import Testing

@Suite("PostgresConnection")
struct PostgresConnectionTests {
    @Test func preparedStatementIsReused() async throws {
        try await PostgresTestDatabase.withTestSchema(maxConnections: 1) { pool, _ in
            let sql = "SELECT $1::int8 + 1 AS next"
            let (count, serverSide, results) = try await pool.withConnection { connection in
                var results: [Int64] = []
                for value in 0..<5 {
                    results.append(try connection.execute(sql, [.int64(Int64(value))])[0][0].int64)
                }
                let serverSide = try connection.execute(
                    "SELECT count(*) FROM pg_prepared_statements WHERE statement = $1",
                    [.text(sql)]
                )[0][0].int
                return (connection.preparedStatementCount, serverSide, results)
            }
            #expect(results == [1, 2, 3, 4, 5])
            // The count query itself is the second cached statement.
            #expect(count == 2)
            #expect(serverSide == 1)

            // Another parameter type is another statement.
            let types = try await pool.withConnection { connection in
                try connection.execute(sql, [.int32(1)])
                return connection.preparedStatementCount
            }
            #expect(types == 3)
        }
    }

    @Test func statementIsPreparedAgainWhenTheTableChanges() async throws {
        try await PostgresTestDatabase.withTestSchema(maxConnections: 1) { pool, _ in
            let columns = try await pool.withConnection { connection in
                try connection.execute("CREATE TABLE t (a int)")
                try connection.execute("INSERT INTO t VALUES (1)")
                let before = try connection.execute("SELECT * FROM t").columns.count
                try connection.execute("ALTER TABLE t ADD COLUMN b int")
                let after = try connection.execute("SELECT * FROM t").columns.count
                return [before, after]
            }
            #expect(columns == [1, 2])
        }
    }

    @Test func cacheIsBounded() async throws {
        try await PostgresTestDatabase.withTestSchema(maxConnections: 1, configure: { $0.maxPreparedStatements = 3 }) {
            pool,
            _ in
            let (values, count) = try await pool.withConnection { connection in
                let values = try (0..<10).map { try connection.execute("SELECT \($0)", [])[0][0].int }
                return (values, connection.preparedStatementCount)
            }
            #expect(values == Array(0..<10))
            #expect(count <= 3)
        }
    }

    @Test func sessionSettingsApply() async throws {
        try await PostgresTestDatabase.withTestSchema(configure: { $0.statementTimeout = .milliseconds(1500) }) {
            pool,
            schema in
            let row = try await pool.query(
                "SELECT current_setting('statement_timeout'), current_schema(), current_setting('application_name')"
            )[0]
            #expect(try row[0].string == "1500ms")
            #expect(try row[1].string == schema)
            #expect(try row[2].string == "auth-tests")
        }
    }

    @Test func connectionLevelTransaction() async throws {
        try await PostgresTestDatabase.withTestSchema(maxConnections: 1) { pool, _ in
            try await pool.query("CREATE TABLE t (x int)")
            struct Abort: Error {}
            let statuses = try await pool.withConnection { connection in
                var statuses: [PostgresTransactionStatus] = []
                try connection.transaction {
                    try connection.execute("INSERT INTO t VALUES (1)")
                    statuses.append(connection.transactionStatus)
                }
                do {
                    try connection.transaction(isolation: .repeatableRead) {
                        try connection.execute("INSERT INTO t VALUES (2)")
                        throw Abort()
                    }
                } catch is Abort {}
                statuses.append(connection.transactionStatus)
                return statuses
            }
            #expect(statuses == [.inTransaction, .idle])
            #expect(try await pool.query("SELECT array_agg(x)::text FROM t")[0][0].string == "{1}")
        }
    }

    @Test func swallowedErrorInsideTransactionFailsTheCommit() async throws {
        try await PostgresTestDatabase.withTestSchema(maxConnections: 1) { pool, _ in
            try await pool.query("CREATE TABLE t (x int PRIMARY KEY)")
            let error = await #expect(throws: PostgresError.self) {
                try await pool.withConnection { connection in
                    try connection.transaction {
                        try connection.execute("INSERT INTO t VALUES (1)")
                        _ = try? connection.execute("INSERT INTO t VALUES (1)")
                    }
                }
            }
            #expect(error?.code == .queryFailed)
            #expect(try await pool.query("SELECT count(*) FROM t")[0][0].int == 0)
        }
    }

    @Test func directConnectionOutsideThePool() async throws {
        let url = try await PostgresTestDatabase.connectionString()
        let logger = PostgresTestDatabase.makeLogger()
        // Blocking calls: run them on a thread of their own, off the cooperative pool.
        let (broken, status, samePID) = try await offCooperativePool {
            let connection = try PostgresConnection.connect(
                configuration: PostgresConfiguration(connectionString: url),
                logger: logger
            )
            defer { connection.close() }
            let samePID = try connection.execute("SELECT pg_backend_pid()")[0][0].int32 == connection.backendPID
            return (connection.isBroken, connection.transactionStatus, samePID)
        }
        #expect(!broken)
        #expect(status == .idle)
        #expect(samePID)
    }
}
