import Foundation
import Synchronization

/// A private PostgreSQL cluster for one test, in its own temporary folder on its own free port,
/// for tests that stop and restart the server (the shared test database must stay up).
///
/// It is run by `scripts/postgres.sh` (initdb as the `postgres` user when running as root).
/// The port is kept across ``stop(immediate:)`` and ``start()``, so a pool keeps working with
/// the same connection string after a restart.
public final class PostgresTestCluster: Sendable {
    /// The cluster's folder (data, socket, log).
    public let directory: URL
    private let url = Mutex<String?>(nil)

    private init(directory: URL) {
        self.directory = directory
    }

    /// Creates and starts a new cluster in a new temporary folder.
    public static func start() async throws -> PostgresTestCluster {
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("auth-pg-\(UUID().uuidString.prefix(8).lowercased())")
        let cluster = PostgresTestCluster(directory: directory)
        do {
            try await cluster.start()
        } catch {
            try? await cluster.destroy()
            throw error
        }
        return cluster
    }

    /// Runs `body` with a new cluster and destroys the cluster afterwards.
    public static func withCluster<R>(_ body: (PostgresTestCluster) async throws -> R) async throws -> R {
        let cluster = try await PostgresTestCluster.start()
        do {
            let result = try await body(cluster)
            try await cluster.destroy()
            return result
        } catch {
            try? await cluster.destroy()
            throw error
        }
    }

    /// The libpq connection string of the cluster's `auth` database (known once started).
    public var connectionString: String {
        guard let url = self.url.withLock({ $0 }) else { preconditionFailure("the cluster was never started") }
        return url
    }

    /// Starts the cluster (again).
    public func start() async throws {
        let url = try await PostgresScript.run(["start", self.directory.path])
        self.url.withLock { $0 = url }
    }

    /// Stops the cluster: `immediate` kills the server processes at once (as a crash would),
    /// otherwise a fast shutdown disconnects clients with an admin-shutdown error.
    public func stop(immediate: Bool = true) async throws {
        _ = try await PostgresScript.run(["stop", self.directory.path, immediate ? "immediate" : "fast"])
    }

    /// Stops the cluster and deletes its folder.
    public func destroy() async throws {
        _ = try await PostgresScript.run(["destroy", self.directory.path])
    }
}
