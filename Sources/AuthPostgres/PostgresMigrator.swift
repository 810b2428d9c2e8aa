import Logging

/// Applies a service's ``PostgresMigration``s to its schema.
///
/// - The schema and its `<schema>.schema_migrations(version, name, checksum, applied_at)` table
///   are created when missing.
/// - Everything runs under a session advisory lock derived from the schema name, so replicas
///   starting at the same time apply each migration exactly once: the others wait, then find it
///   applied. The lock needs one server session throughout: behind a transaction pooler the
///   migrator uses ``PostgresPool/withSessionConnection(_:)``'s direct connection.
/// - Each pending migration runs in its own transaction together with the insert of its record,
///   in ascending version order, with `search_path` set to the schema.
/// - An applied migration whose SHA-256 (computed by PostgreSQL over the file's UTF-8 bytes)
///   differs from the recorded one is an error: the service must refuse to start. Applied
///   versions unknown to this build (a newer replica ran them) are tolerated.
public struct PostgresMigrator: Sendable {
    /// The pool whose connection runs the migrations.
    public var pool: PostgresPool
    /// Where progress is logged.
    public var logger: Logger
    /// How long to wait for another replica's migration run (the advisory lock). Default 2 min.
    public var lockTimeout: Duration
    /// The statement timeout of each migration, replacing the pool's (migrations may build
    /// indexes). Default 10 min.
    public var migrationTimeout: Duration

    /// Creates a migrator.
    public init(
        pool: PostgresPool,
        logger: Logger,
        lockTimeout: Duration = .seconds(120),
        migrationTimeout: Duration = .seconds(600)
    ) {
        self.pool = pool
        self.logger = logger
        self.lockTimeout = lockTimeout
        self.migrationTimeout = migrationTimeout
    }

    /// Applies the pending `migrations` to `schema`.
    ///
    /// - Parameters:
    ///   - schema: The service's schema (an identifier; lower case recommended). Created if missing.
    ///   - migrations: The service's migrations, in any order.
    /// - Returns: The versions applied by this call, ascending (empty when all were applied).
    /// - Throws: ``PostgresError/Code/migrationFailed`` when a migration fails (it is rolled back,
    ///   later ones are not tried) or when an applied migration was edited;
    ///   ``PostgresError/Code/invalidArgument`` for a bad schema name or duplicate versions;
    ///   unavailability errors as they come.
    @discardableResult
    public func migrate(schema: String, migrations: [PostgresMigration]) async throws -> [Int] {
        guard isPlainIdentifier(schema) else {
            throw PostgresError.invalidArgument("a schema name must be an identifier (letters, digits, _)")
        }
        let migrations = migrations.sorted { $0.version < $1.version }
        try PostgresMigration.checkUniqueVersions(migrations)
        let logger = self.logger
        let lockTimeout = self.lockTimeout.wholeMillisecondsRoundedUp
        let migrationTimeout = self.migrationTimeout.wholeMillisecondsRoundedUp
        let restoreTimeout =
            self.pool.configuration.statementTimeout.map { "SET statement_timeout = \($0.wholeMillisecondsRoundedUp)" }
            ?? "RESET statement_timeout"

        // A session lock: behind a transaction pooler this runs over the direct connection.
        return try await self.pool.withSessionConnection { connection in
            let quoted = PostgresStatement.quotedIdentifier(schema)
            let lockKey = PostgresValue.text("auth.schema_migrations." + schema)
            // The lock is a session lock on a pooled connection: it must not go back to the pool
            // still held. On any failure while it may be held (including a cancelled statement,
            // or an unlock that did not run), and when the session still holds any advisory lock
            // after the unlock (a migration took one of its own), the connection is discarded:
            // closing it makes the server release every lock it held.
            var releasedCleanly = false
            defer {
                if !releasedCleanly {
                    logger.warning(
                        "discarding the migration connection so that the server releases its advisory locks",
                        metadata: ["postgres.schema": "\(schema)"]
                    )
                    connection.discard()
                }
            }
            try connection.executeScript("SET statement_timeout = \(lockTimeout)")
            try connection.execute("SELECT pg_advisory_lock(hashtextextended($1, 0))", [lockKey])

            try connection.executeScript(
                """
                CREATE SCHEMA IF NOT EXISTS \(quoted);
                CREATE TABLE IF NOT EXISTS \(quoted).schema_migrations (
                    version bigint PRIMARY KEY,
                    name text NOT NULL,
                    checksum text NOT NULL,
                    applied_at timestamptz NOT NULL DEFAULT now()
                )
                """
            )
            var recorded: [Int: (name: String, checksum: String)] = [:]
            for row in try connection.execute(
                "SELECT version, name, checksum FROM \(PostgresSchema(schema)).schema_migrations"
            ) {
                recorded[try row[0].int] = (try row[1].string, try row[2].string)
            }

            var pending: [(migration: PostgresMigration, checksum: String)] = []
            for migration in migrations {
                let checksum = try connection.execute(
                    "SELECT encode(sha256($1), 'hex')",
                    [.bytea(Array(migration.sql.utf8))]
                )[0][0].string
                if let applied = recorded[migration.version] {
                    guard applied.checksum == checksum else {
                        throw PostgresError(
                            code: .migrationFailed,
                            message: """
                                migration \(migration.version) (\(migration.name)) of schema \(schema) was applied \
                                with checksum \(applied.checksum) but now has \(checksum); an applied migration \
                                must not change: add a new migration instead
                                """
                        )
                    }
                } else {
                    pending.append((migration, checksum))
                }
            }
            let newestApplied = recorded.keys.max() ?? Int.min
            let known = Set(migrations.map(\.version))
            if recorded.keys.contains(where: { !known.contains($0) }) {
                logger.warning(
                    "schema has migrations this build does not know (applied by a newer version?)",
                    metadata: ["postgres.schema": "\(schema)"]
                )
            }

            var applied: [Int] = []
            for (migration, checksum) in pending {
                if migration.version < newestApplied {
                    logger.warning(
                        "applying a migration older than the newest applied one",
                        metadata: ["postgres.schema": "\(schema)", "postgres.migration": "\(migration.version)"]
                    )
                }
                do {
                    try connection.transaction {
                        try connection.executeScript(
                            "SET LOCAL statement_timeout = \(migrationTimeout); SET LOCAL search_path TO \(quoted)"
                        )
                        try connection.executeScript(migration.sql)
                        try connection.execute(
                            "INSERT INTO \(quoted).schema_migrations (version, name, checksum) VALUES ($1, $2, $3)",
                            [.int64(Int64(migration.version)), .text(migration.name), .text(checksum)]
                        )
                    }
                } catch let error as PostgresError where !error.isUnavailable {
                    throw PostgresError(
                        code: .migrationFailed,
                        message: "migration \(migration.version) (\(migration.name)) of schema \(schema) failed: "
                            + error.description,
                        sqlState: error.sqlState,
                        serverMessage: error.serverMessage,
                        constraint: error.constraint,
                        schema: error.schema,
                        table: error.table,
                        column: error.column
                    )
                }
                logger.info(
                    "applied migration",
                    metadata: [
                        "postgres.schema": "\(schema)", "postgres.migration": "\(migration.version)",
                        "postgres.migration_name": "\(migration.name)",
                    ]
                )
                applied.append(migration.version)
            }
            let unlocked = try connection.execute(
                "SELECT pg_advisory_unlock(hashtextextended($1, 0))",
                [lockKey]
            )[0][0].bool
            let stillHeld = try connection.execute(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()"
            )[0][0].int
            try connection.executeScript(restoreTimeout)
            releasedCleanly = unlocked && stillHeld == 0
            return applied
        }
    }
}
