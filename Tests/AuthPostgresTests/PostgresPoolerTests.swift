import AuthPostgres
import AuthTestSupport
import Foundation
import Testing

/// `PostgresPooler.transaction`: what the pool does differently when a transaction pooler
/// (PgBouncer `pool_mode = transaction`) is between it and PostgreSQL. These tests talk to the
/// test cluster directly and check the pool's side; the end-to-end test `ReplicasBehindPgBouncerTests`
/// runs the services through a real PgBouncer.
@Suite("Transaction pooler mode")
struct PostgresPoolerTests {
    /// A connection string nothing listens on: the pool's own connections fail, so whatever
    /// succeeds went over the direct connection string.
    static let unreachable = "host=127.0.0.1 port=1 dbname=auth"

    @Test func statementsRunUnnamedWithBoundParameters() async throws {
        try await PostgresTestDatabase.withTestSchema(maxConnections: 1, configure: { $0.pooler = .transaction }) {
            pool,
            schema in
            let table = "\(schema).t"
            let (rows, cached, serverSide) = try await pool.withConnection { connection in
                try connection.execute(
                    "CREATE TABLE \(table) (id int8, name text, at timestamptz, raw bytea, u uuid)",
                    []
                )
                let id = UUID()
                for value in 0..<3 {
                    try connection.execute(
                        "INSERT INTO \(table) VALUES ($1, $2, $3, $4, $5)",
                        [
                            .int64(Int64(value)), .text("n'\(value)"), .timestamptz(Date(timeIntervalSince1970: 1000)),
                            .bytea([0, 1, UInt8(value)]), .uuid(id),
                        ]
                    )
                }
                let rows = try connection.execute(
                    "SELECT id, name, raw FROM \(table) WHERE id >= $1 ORDER BY id",
                    [.int64(1)]
                )
                let serverSide = try connection.execute("SELECT count(*) FROM pg_prepared_statements")[0][0].int
                return (
                    rows.map { (try! $0[0].int64, try! $0[1].string, try! $0[2].bytes) },
                    connection.preparedStatementCount, serverSide
                )
            }
            #expect(rows.map { $0.0 } == [1, 2])
            #expect(rows.map { $0.1 } == ["n'1", "n'2"])
            #expect(rows.map { $0.2 } == [[0, 1, 1], [0, 1, 2]])
            // Nothing prepared, on either side: nothing a pooler could hand to another session.
            #expect(cached == 0)
            #expect(serverSide == 0)
        }
    }

    @Test func transactionsStillRetryAndCommit() async throws {
        try await PostgresTestDatabase.withTestSchema(maxConnections: 2, configure: { $0.pooler = .transaction }) {
            pool,
            schema in
            try await pool.query("CREATE TABLE \(schema).c (n int8)", [])
            try await pool.transaction { connection in
                try connection.execute("INSERT INTO \(schema).c VALUES ($1)", [.int64(41)])
                try connection.execute("UPDATE \(schema).c SET n = n + $1", [.int64(1)])
            }
            #expect(try await pool.query("SELECT n FROM \(schema).c", [])[0][0].int64 == 42)
        }
    }

    @Test func noSessionSettingIsSent() async throws {
        try await PostgresTestDatabase.withTestSchema(
            maxConnections: 1,
            configure: {
                $0.pooler = .transaction
                $0.statementTimeout = .milliseconds(1234)
            }
        ) { pool, schema in
            let (timeout, path) = try await pool.withConnection { connection in
                (
                    try connection.execute("SELECT current_setting('statement_timeout')")[0][0].string,
                    try connection.execute("SELECT current_setting('search_path')")[0][0].string
                )
            }
            // A SET would stay on whichever server session ran it: the role or database carries
            // these settings instead (docs/database.md).
            #expect(timeout != "1234ms")
            #expect(!path.contains(schema))
        }
    }

    @Test func listenNeedsTheDirectConnection() async throws {
        let url = try await PostgresTestDatabase.connectionString()
        _ = try await PostgresTestDatabase.withTestSchema(configure: {
            $0.pooler = .transaction
            $0.directConnectionString = nil
        }) { pool, _ in
            await #expect(throws: PostgresError.self) { _ = try await pool.listen(channel: "pooled_\(uniqueSuffix())") }
        }
        try await PostgresTestDatabase.withTestSchema(configure: {
            $0.pooler = .transaction
            $0.directConnectionString = url
        }) { pool, _ in
            let channel = "direct_\(uniqueSuffix())"
            let (received, task) = collect(try await pool.listen(channel: channel))
            defer { task.cancel() }
            try await pool.notify(channel: channel, payload: "through the pool")
            let arrived = await received.wait { $0.count == 1 }
            #expect(arrived)
            #expect(received.elements.first?.payload == "through the pool")
        }
    }

    @Test func migrationsRunOverTheDirectConnection() async throws {
        let url = try await PostgresTestDatabase.connectionString()
        let migrations = [
            PostgresMigration(version: 1, name: "create_items", sql: "CREATE TABLE items (id bigint PRIMARY KEY);"),
            PostgresMigration(version: 2, name: "add_name", sql: "ALTER TABLE items ADD COLUMN name text;"),
        ]
        try await PostgresTestDatabase.withTestSchema(configure: {
            $0.pooler = .transaction
            $0.connectionString = Self.unreachable
            $0.directConnectionString = url
        }) { pool, schema in
            let migrator = PostgresMigrator(pool: pool, logger: PostgresTestDatabase.makeLogger())
            #expect(try await migrator.migrate(schema: schema, migrations: migrations) == [1, 2])
            #expect(try await migrator.migrate(schema: schema, migrations: migrations) == [])
            // The pool's own connection string leads nowhere: the migrations went direct.
            await #expect(throws: PostgresError.self) { try await pool.query("SELECT 1") }
            // The lock went with the direct session: another session can take it now.
            let free = try await pool.withSessionConnection { connection in
                let key = PostgresValue.text("auth.schema_migrations." + schema)
                let taken = try connection.execute("SELECT pg_try_advisory_lock(hashtextextended($1, 0))", [key])[0][0]
                    .bool
                if taken { try connection.execute("SELECT pg_advisory_unlock(hashtextextended($1, 0))", [key]) }
                return taken
            }
            #expect(free)
        }
        _ = try await PostgresTestDatabase.withTestSchema(configure: {
            $0.pooler = .transaction
            $0.directConnectionString = nil
        }) { pool, schema in
            let migrator = PostgresMigrator(pool: pool, logger: PostgresTestDatabase.makeLogger())
            await #expect(throws: PostgresError.self) {
                try await migrator.migrate(schema: schema, migrations: migrations)
            }
        }
    }
}
