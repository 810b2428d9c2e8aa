import AuthConfiguration
import AuthPostgres
import AuthRPC
import Logging

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// What a backend service (identity, otp-dispatch, session) reads from `AUTH_*` environment
/// variables: what every process reads (``ProcessConfiguration``, whose properties it shows as
/// its own) and its database.
@dynamicMemberLookup
public struct ServiceConfiguration: Sendable {
    public var process: ProcessConfiguration
    public var databaseURL: String?
    /// What `AUTH_DATABASE_URL` reaches (`AUTH_DB_POOLER`): PostgreSQL itself, or a pooler in
    /// transaction mode (PgBouncer `pool_mode = transaction`).
    public var databasePooler: PostgresPooler
    /// `AUTH_DATABASE_DIRECT_URL`: PostgreSQL itself, for migrations and LISTEN; required with
    /// `AUTH_DB_POOLER=transaction`.
    public var databaseDirectURL: String?
    public var databasePoolSize: Int
    /// `AUTH_DB_POOL_MIN_OPEN`: the connections the pool opens at start and keeps open
    /// (0…`AUTH_DB_POOL_SIZE`, default `AUTH_DB_POOL_SIZE`).
    public var databasePoolMinOpen: Int
    public var databaseStatementTimeout: Duration
    /// How long start-up keeps trying to reach the database before it gives up
    /// (`AUTH_DB_START_TIMEOUT_SECONDS`, 0 = one attempt).
    public var databaseStartTimeout: Duration
    /// `AUTH_<NAME>_METRICS_PORT` (``AuthServiceName/metricsPortVariable``): the port that
    /// serves `GET /metrics` in the Prometheus text format; nil (unset): not served; 0: any
    /// free port, logged at start.
    public var metricsPort: Int?

    public subscript<Value>(dynamicMember keyPath: WritableKeyPath<ProcessConfiguration, Value>) -> Value {
        get { process[keyPath: keyPath] }
        set { process[keyPath: keyPath] = newValue }
    }

    /// Reads the configuration of `service` from `environment` (by default the process's).
    public init(
        service: AuthServiceName,
        environment variables: [String: String] = ProcessInfo.processInfo.environment
    ) throws {
        self.process = try ProcessConfiguration(service: service, environment: variables)
        let reader = EnvironmentReader(variables: variables)
        self.databaseURL = reader.string("AUTH_DATABASE_URL")
        self.databasePooler = try reader.value(
            "AUTH_DB_POOLER",
            default: PostgresPooler.none,
            expected: "`none` or `transaction`"
        ) { PostgresPooler(rawValue: $0) }
        self.databaseDirectURL = reader.string("AUTH_DATABASE_DIRECT_URL")
        if databasePooler == .transaction, databaseDirectURL == nil {
            throw ConfigurationError(
                variable: "AUTH_DATABASE_DIRECT_URL",
                problem:
                    "is required with AUTH_DB_POOLER=transaction: a libpq connection string that reaches PostgreSQL itself, not the pooler (for migrations' advisory lock and LISTEN)"
            )
        }
        self.databasePoolSize = try reader.integer("AUTH_DB_POOL_SIZE", default: 10, in: 1...200)
        self.databasePoolMinOpen = try reader.integer(
            "AUTH_DB_POOL_MIN_OPEN",
            default: databasePoolSize,
            in: 0...databasePoolSize,
            note: " (at most AUTH_DB_POOL_SIZE)"
        )
        self.databaseStatementTimeout = try reader.milliseconds(
            "AUTH_DB_STATEMENT_TIMEOUT_MS",
            default: .seconds(5),
            in: 1...3_600_000
        )
        self.databaseStartTimeout = try reader.seconds(
            "AUTH_DB_START_TIMEOUT_SECONDS",
            default: .seconds(60),
            in: 0...3_600
        )
        if let variable = service.metricsPortVariable, reader.string(variable) != nil {
            self.metricsPort = try reader.integer(
                variable,
                default: 0,
                in: 0...65_535,
                note: " (0: any free port, logged at start), or unset for none"
            )
        }
    }

    /// A client for `service` (``ProcessConfiguration/rpcClient(for:logger:defaultTimeout:)``).
    public func rpcClient(
        for service: AuthServiceName,
        logger: Logger,
        defaultTimeout: Duration = .seconds(10)
    ) -> RPCClient {
        process.rpcClient(for: service, logger: logger, defaultTimeout: defaultTimeout)
    }
}
