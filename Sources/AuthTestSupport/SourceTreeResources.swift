import AuthPostgres
import Foundation

/// The resources the services embed in their executables, read back from the source tree, so a
/// test can check that what a service embeds is what the repository holds.
public enum SourceTreeResources {
    /// `Sources/<target>/<path>` in this checkout.
    public static func url(target: String, path: String) -> URL {
        PostgresScript.projectRoot.appendingPathComponent("Sources/\(target)/\(path)")
    }

    /// Every file of `Sources/<target>/Migrations`, as migrations.
    public static func migrations(target: String) throws -> [PostgresMigration] {
        let folder = url(target: target, path: "Migrations")
        var files: [String: [UInt8]] = [:]
        for name in try FileManager.default.contentsOfDirectory(atPath: folder.path) {
            files[name] = Array(try Data(contentsOf: folder.appendingPathComponent(name)))
        }
        return try PostgresMigration.load(files: files)
    }
}
