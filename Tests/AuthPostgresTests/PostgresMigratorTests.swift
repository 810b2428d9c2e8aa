import AuthPostgres
import AuthTestSupport
import Foundation
import Testing

@Suite("PostgresMigrator")
struct PostgresMigratorTests {
    /// Deliberately not idempotent: applying one twice would fail or duplicate rows.
    static let migrations = [
        PostgresMigration(
            version: 2,
            name: "add_expiry",
            sql: "ALTER TABLE sessions ADD COLUMN expires_at timestamptz;\nINSERT INTO sessions (id) VALUES (1);"
        ),
        PostgresMigration(version: 1, name: "create_sessions", sql: "CREATE TABLE sessions (id bigint PRIMARY KEY);"),
        PostgresMigration(
            version: 10,
            name: "create_tokens",
            sql: "CREATE TABLE tokens (session_id bigint REFERENCES sessions);"
        ),
    ]

    @Test func appliesInOrderOnceAndRecordsChecksums() async throws {
        try await PostgresTestDatabase.withTestSchema { pool, schema in
            let migrator = PostgresMigrator(pool: pool, logger: PostgresTestDatabase.makeLogger())
            #expect(try await migrator.migrate(schema: schema, migrations: Self.migrations) == [1, 2, 10])
            #expect(try await migrator.migrate(schema: schema, migrations: Self.migrations) == [])

            let records = try await pool.query(
                "SELECT version, name, checksum, applied_at FROM \(identifier: schema).schema_migrations ORDER BY version"
            )
            #expect(try records.map { try $0["version"].int } == [1, 2, 10])
            #expect(try records.map { try $0["name"].string } == ["create_sessions", "add_expiry", "create_tokens"])
            let checksum = try records[0]["checksum"].string
            #expect(checksum.count == 64)
            let isHex = checksum.allSatisfy(\.isHexDigit)
            #expect(isHex)
            let expected = try await pool.query(
                "SELECT encode(sha256(convert_to($1, 'UTF8')), 'hex')",
                [.text(Self.migrations[1].sql)]
            )[0][0].string
            #expect(checksum == expected)
            #expect(try await pool.query("SELECT count(*) FROM sessions")[0][0].int == 1)
            // The tables went into the service's schema.
            let tables = try await pool.query(
                "SELECT count(*) FROM information_schema.tables WHERE table_schema = $1",
                [.text(schema)]
            )
            #expect(try tables[0][0].int == 3)

            // A later build adds a migration: only it runs.
            let more =
                Self.migrations + [
                    PostgresMigration(version: 11, name: "index", sql: "CREATE INDEX ON tokens (session_id);")
                ]
            #expect(try await migrator.migrate(schema: schema, migrations: more) == [11])
            // An older build (without 11) still starts.
            #expect(try await migrator.migrate(schema: schema, migrations: Self.migrations) == [])
        }
    }

    @Test func editedAppliedMigrationIsRefused() async throws {
        try await PostgresTestDatabase.withTestSchema { pool, schema in
            let migrator = PostgresMigrator(pool: pool, logger: PostgresTestDatabase.makeLogger())
            try await migrator.migrate(schema: schema, migrations: Self.migrations)
            var edited = Self.migrations
            edited[1].sql += "\n-- a harmless-looking comment"
            let error = await #expect(throws: PostgresError.self) {
                try await migrator.migrate(
                    schema: schema,
                    migrations: edited + [
                        PostgresMigration(version: 20, name: "never", sql: "CREATE TABLE never (x int);")
                    ]
                )
            }
            #expect(error?.code == .migrationFailed)
            #expect(error?.message.contains("create_sessions") == true)
            // Nothing after the check ran.
            let never = try await pool.query("SELECT to_regclass($1) IS NULL", [.text("\(schema).never")])
            #expect(try never[0][0].bool)
        }
    }

    @Test func failingMigrationIsRolledBack() async throws {
        try await PostgresTestDatabase.withTestSchema { pool, schema in
            let migrator = PostgresMigrator(pool: pool, logger: PostgresTestDatabase.makeLogger())
            let broken = [
                PostgresMigration(version: 1, name: "ok", sql: "CREATE TABLE ok (x int);"),
                PostgresMigration(
                    version: 2,
                    name: "broken",
                    sql: "CREATE TABLE half (x int);\nSELECT * FROM missing;"
                ),
                PostgresMigration(version: 3, name: "after", sql: "CREATE TABLE after (x int);"),
            ]
            let error = await #expect(throws: PostgresError.self) {
                try await migrator.migrate(schema: schema, migrations: broken)
            }
            #expect(error?.code == .migrationFailed)
            #expect(error?.sqlState == "42P01")
            let missing = try await pool.query(
                "SELECT to_regclass($1) IS NOT NULL, to_regclass($2) IS NULL, to_regclass($3) IS NULL",
                [.text("\(schema).ok"), .text("\(schema).half"), .text("\(schema).after")]
            )[0]
            #expect(try missing[0].bool)
            #expect(try missing[1].bool)
            #expect(try missing[2].bool)
            let versions = try await pool.query(
                "SELECT array_agg(version ORDER BY version)::text FROM \(identifier: schema).schema_migrations"
            )
            #expect(try versions[0][0].string == "{1}")
            // The connection's settings are back to the pool's.
            #expect(try await pool.query("SHOW statement_timeout")[0][0].string == "5s")
        }
    }

    /// The migration lock is a session lock on a pooled connection. A migration that takes a
    /// session advisory lock of its own (or an unlock that fails) must not hand a connection
    /// holding locks back to the pool, where it would block every later migrator forever.
    @Test func noAdvisoryLockGoesBackToThePool() async throws {
        let applicationName = "migrator_locks_\(uniqueSuffix())"
        try await PostgresTestDatabase.withTestSchema(
            maxConnections: 1,
            configure: {
                $0.applicationName = applicationName
            }
        ) { pool, schema in
            let migrator = PostgresMigrator(pool: pool, logger: PostgresTestDatabase.makeLogger())
            let leaky = [PostgresMigration(version: 1, name: "leaky", sql: "SELECT pg_advisory_lock(4242);")]
            #expect(try await migrator.migrate(schema: schema, migrations: leaky) == [1])

            // The server releases a closed session's locks as its backend exits: wait for that
            // (milliseconds), bounded to tell slow from never.
            let admin = PostgresPool(
                configuration: PostgresConfiguration(
                    connectionString: try await PostgresTestDatabase.connectionString(),
                    maxConnections: 1
                ),
                logger: PostgresTestDatabase.makeLogger()
            )
            let released = try await eventually {
                try await admin.query(
                    """
                    SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
                    WHERE l.locktype = 'advisory' AND a.application_name = $1
                    """,
                    [.text(applicationName)]
                )[0][0].int == 0
            }
            await admin.close()
            #expect(released, "the pool's connections still hold advisory locks")

            // And the pool still works, on a fresh connection.
            #expect(try await pool.query("SELECT 1")[0][0].int == 1)
        }
    }

    @Test func concurrentMigratorsApplyEachMigrationOnce() async throws {
        try await PostgresTestDatabase.withTestSchema { pool, schema in
            let url = try await PostgresTestDatabase.connectionString()
            let logger = PostgresTestDatabase.makeLogger()
            let applied = try await withThrowingTaskGroup(of: [Int].self) { group in
                for _ in 0..<4 {
                    group.addTask {
                        // A replica: its own pool.
                        let replica = PostgresPool(
                            configuration: PostgresConfiguration(connectionString: url, maxConnections: 1),
                            logger: logger
                        )
                        do {
                            let applied = try await PostgresMigrator(pool: replica, logger: logger)
                                .migrate(schema: schema, migrations: Self.migrations)
                            await replica.close()
                            return applied
                        } catch {
                            await replica.close()
                            throw error
                        }
                    }
                }
                var all: [[Int]] = []
                for try await applied in group { all.append(applied) }
                return all
            }
            #expect(applied.flatMap { $0 }.sorted() == [1, 2, 10])
            #expect(applied.filter { !$0.isEmpty }.count == 1, "one replica applies all, the others find them applied")
            #expect(try await pool.query("SELECT count(*) FROM sessions")[0][0].int == 1)
            #expect(
                try await pool.query("SELECT count(*) FROM \(identifier: schema).schema_migrations")[0][0].int == 3
            )
        }
    }

    @Test func invalidInput() async throws {
        try await PostgresTestDatabase.withTestSchema { pool, _ in
            let migrator = PostgresMigrator(pool: pool, logger: PostgresTestDatabase.makeLogger())
            let badSchema = await #expect(throws: PostgresError.self) {
                try await migrator.migrate(schema: "bad-schema", migrations: [])
            }
            #expect(badSchema?.code == .invalidArgument)
            let duplicate = await #expect(throws: PostgresError.self) {
                try await migrator.migrate(
                    schema: "whatever",
                    migrations: [
                        PostgresMigration(version: 1, name: "a", sql: ""),
                        PostgresMigration(version: 1, name: "b", sql: ""),
                    ]
                )
            }
            #expect(duplicate?.code == .invalidArgument)
        }
    }
}

@Suite("PostgresMigration.load")
struct PostgresMigrationLoadTests {
    private func files(_ files: [String: String]) -> [String: [UInt8]] {
        files.mapValues { Array($0.utf8) }
    }

    @Test func loadsSqlFilesInVersionOrder() throws {
        let migrations = try PostgresMigration.load(
            files: self.files([
                "0010_create_tokens.sql": "CREATE TABLE tokens ();",
                "0002_add_expiry.sql": "ALTER TABLE sessions ADD COLUMN e int;",
                "0001_create_sessions.sql": "CREATE TABLE sessions ();",
            ])
        )
        #expect(migrations.map(\.version) == [1, 2, 10])
        #expect(migrations.map(\.name) == ["create_sessions", "add_expiry", "create_tokens"])
        #expect(migrations[0].sql == "CREATE TABLE sessions ();")
    }

    @Test func rejectsBadNamesDuplicatesAndNonUTF8() throws {
        let cases: [[String: [UInt8]]] = [
            self.files(["create.sql": ""]), self.files(["0001_.sql": ""]),
            self.files(["0001_a.sql": "", "1_b.sql": ""]),
            self.files(["x1_a.sql": ""]), self.files(["0001_a.txt": ""]), ["0001_a.sql": [0xFF, 0xFE]],
        ]
        for files in cases {
            let error = #expect(throws: PostgresError.self) { try PostgresMigration.load(files: files) }
            #expect(error?.code == .invalidArgument, "\(files.keys.sorted())")
        }
    }
}
