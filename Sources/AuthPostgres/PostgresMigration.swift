/// One schema migration: a plain SQL file such as `0001_create_sessions.sql`.
///
/// The SQL runs inside a transaction that the migrator opens, with `search_path` set to the
/// service's schema, so it must not contain `BEGIN`/`COMMIT` nor statements that cannot run in a
/// transaction (`CREATE INDEX CONCURRENTLY`, `VACUUM`). Once applied, a migration must never
/// change: its SHA-256 is recorded and checked at every start.
public struct PostgresMigration: Sendable, Hashable {
    /// The version: the number the file name starts with. Migrations apply in ascending order.
    public var version: Int
    /// The descriptive part of the file name (`create_sessions`).
    public var name: String
    /// The SQL text (its UTF-8 bytes are checksummed).
    public var sql: String

    /// Creates a migration.
    public init(version: Int, name: String, sql: String) {
        self.version = version
        self.name = name
        self.sql = sql
    }

    /// The migrations in `files`, keyed by file name `<version>_<name>.sql` (e.g.
    /// `0001_create_sessions.sql`) with the file's bytes, sorted by version.
    ///
    /// Services embed their migrations in the executable (`resources: [.embedInCode("Migrations")]`
    /// in Package.swift, read back as `PackageResources.<file name>`), so a service needs no file
    /// beside its executable; each service lists its files by name, and its tests check that the
    /// list matches its `Migrations` folder.
    ///
    /// - Throws: ``PostgresError/Code/invalidArgument`` for a file name that is not
    ///   `<version>_<name>.sql`, two files with the same version, or a file that is not UTF-8.
    public static func load(files: [String: [UInt8]]) throws(PostgresError) -> [PostgresMigration] {
        var migrations: [PostgresMigration] = []
        for (fileName, bytes) in files {
            migrations.append(try PostgresMigration(fileName: fileName, contents: bytes))
        }
        migrations.sort { $0.version < $1.version }
        try checkUniqueVersions(migrations)
        return migrations
    }

    /// The migration in the file `fileName` (`<version>_<name>.sql`) holding `contents`.
    public init(fileName: String, contents: [UInt8]) throws(PostgresError) {
        guard fileName.hasSuffix(".sql") else {
            throw PostgresError.invalidArgument("migration file \(fileName) does not end in .sql")
        }
        let stem = fileName.dropLast(4)
        guard let separator = stem.firstIndex(of: "_"),
            let version = Int(stem[..<separator]), version >= 0,
            stem[..<separator].allSatisfy(\.isASCII),
            !stem[stem.index(after: separator)...].isEmpty
        else {
            throw PostgresError.invalidArgument(
                "migration file \(fileName) is not named <version>_<name>.sql (e.g. 0001_create_sessions.sql)"
            )
        }
        guard let sql = String(validating: contents, as: UTF8.self) else {
            throw PostgresError.invalidArgument("migration file \(fileName) is not UTF-8")
        }
        self.init(version: version, name: String(stem[stem.index(after: separator)...]), sql: sql)
    }

    static func checkUniqueVersions(_ migrations: [PostgresMigration]) throws(PostgresError) {
        var seen = Set<Int>()
        for migration in migrations where !seen.insert(migration.version).inserted {
            throw PostgresError.invalidArgument("two migrations have version \(migration.version)")
        }
    }
}
