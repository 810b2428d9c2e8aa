import ArgumentParser
import AuthPostgres
import Logging

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The PostgreSQL a service benchmark runs against (`identity-benchmark`, `otp-benchmark`,
/// `session-benchmark`): `--database-url` (else `AUTH_DATABASE_URL`) and `--pool-size`, and a
/// schema of the benchmark's own, dropped at the end however the run ends.
public struct DatabaseOptions: ParsableArguments, Sendable {
    @Option(help: "libpq connection string of the PostgreSQL to use (default: AUTH_DATABASE_URL).")
    public var databaseURL: String?

    @Option(help: "PostgreSQL connections of the service's pool (the services' default is 10).")
    public var poolSize = 10

    public init() {}

    /// `--database-url`, else `AUTH_DATABASE_URL`.
    public func url() throws -> String {
        guard let url = databaseURL ?? ProcessInfo.processInfo.environment["AUTH_DATABASE_URL"], !url.isEmpty else {
            throw ValidationError(
                "give --database-url or AUTH_DATABASE_URL (e.g. `scripts/postgres.sh start .data/pg-bench | tail -1`)"
            )
        }
        return url
    }

    public func validate() throws {
        guard (1...200).contains(poolSize) else { throw ValidationError("--pool-size in 1...200") }
    }

    /// Runs `body` with a pool of `--pool-size` connections named `applicationName` (so
    /// `CPUAccounting` finds its backends) and a fresh schema `<prefix>_<12 hex digits>`, which
    /// is dropped afterwards, and the pool closed, whether `body` returns or throws.
    public func withSchema<R>(
        prefix: String,
        applicationName: String,
        acquireTimeout: Duration? = nil,
        logger: Logger,
        _ body: (PostgresPool, String) async throws -> R
    ) async throws -> R {
        var configuration = PostgresConfiguration(
            connectionString: try url(),
            maxConnections: poolSize,
            applicationName: applicationName
        )
        if let acquireTimeout { configuration.acquireTimeout = acquireTimeout }
        let pool = PostgresPool(configuration: configuration, logger: logger)
        let schema = prefix + "_" + UUID().uuidString.replacing("-", with: "").prefix(12).lowercased()
        let outcome: Result<R, any Error>
        do {
            outcome = .success(try await body(pool, schema))
        } catch {
            outcome = .failure(error)
        }
        _ = try? await pool.query("DROP SCHEMA IF EXISTS \(identifier: schema) CASCADE")
        await pool.close()
        return try outcome.get()
    }
}
