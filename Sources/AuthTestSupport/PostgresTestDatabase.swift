import AuthPostgres
import Foundation
import Logging
import Synchronization

/// The shared PostgreSQL of the test run, and a fixture giving each test its own schema.
///
/// The database comes from `AUTH_TEST_DATABASE_URL` (a libpq connection string, set by the test
/// command after `scripts/postgres.sh start .data/pg-test`). When that is not set, the first use
/// starts (or reuses) the throwaway cluster in `<project>/.data/pg-test` with that script, so a
/// plain `swift test` works too; the cluster keeps running afterwards for the next run.
public enum PostgresTestDatabase {
    /// The environment variable holding the test database's connection string.
    public static let environmentVariable = "AUTH_TEST_DATABASE_URL"

    /// The connection string of the shared test database, starting the local cluster if needed.
    public static func connectionString() async throws -> String {
        if let url = ProcessInfo.processInfo.environment[environmentVariable], !url.isEmpty {
            return url
        }
        let task = startTask.withLock { task in
            if let task { return task }
            let started = Task {
                let directory = PostgresScript.projectRoot.appendingPathComponent(".data/pg-test").path
                return try await PostgresScript.run(["start", directory])
            }
            task = started
            return started
        }
        return try await task.value
    }

    private static let startTask = Mutex<Task<String, any Error>?>(nil)

    /// A logger for database tests: warnings and above, unless `AUTH_TEST_LOG_LEVEL` says otherwise.
    public static func makeLogger(label: String = "auth.tests.postgres") -> Logger {
        var logger = Logger(label: label)
        let level = ProcessInfo.processInfo.environment["AUTH_TEST_LOG_LEVEL"].flatMap(Logger.Level.init(rawValue:))
        logger.logLevel = level ?? .warning
        return logger
    }

    /// Runs `body` with a pool whose `search_path` is a new, uniquely named schema, and drops
    /// the schema (and closes the pool) afterwards, whether `body` succeeds or throws.
    ///
    /// - Parameters:
    ///   - maxConnections: The pool size.
    ///   - configure: Adjusts the pool's configuration (timeouts, …) before the pool is created.
    ///   - body: Gets the pool and the schema name.
    public static func withTestSchema<R>(
        maxConnections: Int = 4,
        configure: (inout PostgresConfiguration) -> Void = { _ in },
        logger: Logger = PostgresTestDatabase.makeLogger(),
        _ body: (PostgresPool, String) async throws -> R
    ) async throws -> R {
        let url = try await connectionString()
        let schema = "test_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").prefix(16).lowercased()
        let admin = PostgresPool(
            configuration: PostgresConfiguration(
                connectionString: url,
                maxConnections: 1,
                applicationName: "auth-tests-admin"
            ),
            logger: logger
        )
        var configuration = PostgresConfiguration(
            connectionString: url,
            maxConnections: maxConnections,
            applicationName: "auth-tests",
            searchPath: [schema]
        )
        configure(&configuration)
        let pool = PostgresPool(configuration: configuration, logger: logger)
        do {
            try await admin.query("CREATE SCHEMA \(identifier: schema)")
            let result = try await body(pool, schema)
            await pool.close()
            try await admin.query("DROP SCHEMA \(identifier: schema) CASCADE")
            await admin.close()
            return result
        } catch {
            await pool.close()
            _ = try? await admin.query("DROP SCHEMA IF EXISTS \(identifier: schema) CASCADE")
            await admin.close()
            throw error
        }
    }

    /// Runs `body` with the connection string of a new database of its own in the test cluster
    /// (named `<prefix>_<random>`, so a service's schemas hold nothing of earlier runs) and its
    /// name, and drops it afterwards (`WITH (FORCE)`: processes still connected are cut off).
    public static func withFreshDatabase<R>(
        prefix: String,
        _ body: (_ connectionString: String, _ name: String) async throws -> R
    ) async throws -> R {
        let url = try await connectionString()
        let name = prefix + "_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").prefix(12).lowercased()
        let admin = PostgresPool(
            configuration: PostgresConfiguration(
                connectionString: url,
                maxConnections: 1,
                applicationName: "\(prefix)-admin"
            ),
            logger: makeLogger()
        )
        try await admin.query("CREATE DATABASE \(identifier: name)")
        let fresh = url.replacingOccurrences(of: "dbname=auth", with: "dbname=\(name)")
        do {
            let result = try await body(fresh, name)
            _ = try? await admin.query("DROP DATABASE IF EXISTS \(identifier: name) WITH (FORCE)")
            await admin.close()
            return result
        } catch {
            _ = try? await admin.query("DROP DATABASE IF EXISTS \(identifier: name) WITH (FORCE)")
            await admin.close()
            throw error
        }
    }
}

/// Runs `scripts/postgres.sh`.
enum PostgresScript {
    /// The package root, found from this file's location (Sources/AuthTestSupport/…).
    static let projectRoot = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    struct Failure: Error, CustomStringConvertible {
        var arguments: [String]
        var status: Int32
        var output: String
        var description: String {
            "scripts/postgres.sh \(self.arguments.joined(separator: " ")) exited with \(self.status):\n\(self.output)"
        }
    }

    /// Runs the script with `arguments` and returns the last line of its standard output.
    /// Its standard error goes to a temporary file, shown only when the script fails.
    static func run(_ arguments: [String]) async throws -> String {
        let script = projectRoot.appendingPathComponent("scripts/postgres.sh").path
        let result = try await ChildProcess.run(
            URL(fileURLWithPath: "/bin/bash"),
            [script] + arguments,
            currentDirectory: projectRoot
        )
        let stdout = result.standardOutput
        guard result.status == 0 else {
            throw Failure(arguments: arguments, status: result.status, output: stdout + result.standardError)
        }
        return stdout.split(separator: "\n").last.map(String.init) ?? ""
    }
}
