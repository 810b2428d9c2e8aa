import Foundation

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

    /// Reads every `*.sql` file of `directory` (not recursive), named `<version>_<name>.sql`
    /// (e.g. `0001_create_sessions.sql`), sorted by version. Other files are ignored.
    ///
    /// Services ship their migrations as SwiftPM resources, e.g. `resources: [.copy("Migrations")]`
    /// and `ModuleResources(target: "…").url(forResource: "Migrations")` (AuthResources).
    ///
    /// - Throws: ``PostgresError/Code/invalidArgument`` for a `.sql` file with a malformed name,
    ///   two files with the same version, or a file that is not UTF-8; file system errors as is.
    public static func load(directory: URL) throws -> [PostgresMigration] {
        let files = try FileManager.default.contentsOfDirectory(at: directory, includingPropertiesForKeys: nil)
        var migrations: [PostgresMigration] = []
        for file in files where file.pathExtension == "sql" {
            let fileName = file.lastPathComponent
            let stem = file.deletingPathExtension().lastPathComponent
            guard let separator = stem.firstIndex(of: "_"),
                let version = Int(stem[..<separator]), version >= 0,
                stem[..<separator].allSatisfy(\.isASCII),
                !stem[stem.index(after: separator)...].isEmpty
            else {
                throw PostgresError.invalidArgument(
                    "migration file \(fileName) is not named <version>_<name>.sql (e.g. 0001_create_sessions.sql)")
            }
            let data = try Data(contentsOf: file)
            guard let sql = String(data: data, encoding: .utf8) else {
                throw PostgresError.invalidArgument("migration file \(fileName) is not UTF-8")
            }
            migrations.append(
                PostgresMigration(version: version, name: String(stem[stem.index(after: separator)...]), sql: sql))
        }
        migrations.sort { $0.version < $1.version }
        try checkUniqueVersions(migrations)
        return migrations
    }

    static func checkUniqueVersions(_ migrations: [PostgresMigration]) throws(PostgresError) {
        var seen = Set<Int>()
        for migration in migrations where !seen.insert(migration.version).inserted {
            throw PostgresError.invalidArgument("two migrations have version \(migration.version)")
        }
    }
}
