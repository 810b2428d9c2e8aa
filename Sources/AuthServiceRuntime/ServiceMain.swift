import AuthAPI
import AuthAdminHTTP
import AuthConfiguration
import AuthPostgres
import AuthRPC
import AuthRPCNIO
import AuthTracing
import Logging
import Metrics
import NIOPosix
import Prometheus
import ServiceLifecycle
import Synchronization

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// What a backend service's start-up gives its domain code to register its methods with.
public struct ServiceDependencies: Sendable {
    public let configuration: ServiceConfiguration
    public let database: PostgresPool
    public let logger: Logger
    let backgroundServices: BackgroundServices

    /// Runs `service` beside the RPC server in the process's `ServiceGroup` (e.g. a scheduled
    /// clean-up): started after the database pool, stopped at graceful shutdown before the pool
    /// closes.
    public func addService(_ service: some Service) {
        backgroundServices.add(service)
    }
}

/// The whole life of a backend service process: read `AUTH_*` configuration, open the
/// database pool, register Health and the service's methods, serve RPC until SIGTERM/SIGINT,
/// then shut down gracefully. Each executable's `main` is one call to ``run(_:serviceNames:register:)``.
///
/// `register` may be `async`: it runs before the server listens, so a service can apply its
/// migrations or load state from the database there; if it throws, the process exits unserved.
public enum ServiceMain {
    public static func run(
        _ service: AuthServiceName,
        serviceNames: Set<String> = [],
        register: @Sendable (inout RPCRouter, ServiceDependencies) async throws -> Void = { _, _ in }
    ) async {
        let configuration: ServiceConfiguration
        do {
            configuration = try ServiceConfiguration(service: service)
            // Checked with the other settings, so that its absence is a configuration error
            // (status 2) like theirs, not a failed start (status 1).
            guard configuration.databaseURL != nil else { throw Self.missingDatabaseURL }
        } catch {
            StandardStreams.exitWithConfigurationError(service.rawValue, error)
        }
        let logger = ProcessLogging.bootstrap(service: service.rawValue, level: configuration.logLevel)
        let tracing: (any Service)?
        do {
            // Before anything makes an HTTP client: async-http-client reads the tracer then.
            tracing = try ProcessTracing.bootstrap(
                serviceName: service.rawValue,
                environment: ProcessInfo.processInfo.environment,
                logger: logger
            )
        } catch {
            StandardStreams.exitWithConfigurationError(service.rawValue, error)
        }
        let registry = PrometheusCollectorRegistry()
        MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: registry))
        do {
            try await run(
                configuration: configuration,
                serviceNames: serviceNames,
                logger: logger,
                metrics: registry,
                tracing: tracing,
                register: register
            )
        } catch {
            logger.critical("Service stopped with an error", metadata: ["error": "\(error)"])
            exit(1)
        }
    }

    static let missingDatabaseURL = ConfigurationError(
        variable: "AUTH_DATABASE_URL",
        problem: "is required (a libpq connection string)"
    )

    static func run(
        configuration: ServiceConfiguration,
        serviceNames: Set<String>,
        logger: Logger,
        metrics registry: PrometheusCollectorRegistry,
        tracing: (any Service)?,
        register: (inout RPCRouter, ServiceDependencies) async throws -> Void
    ) async throws {
        guard let databaseURL = configuration.databaseURL else { throw Self.missingDatabaseURL }
        var databaseConfiguration = PostgresConfiguration(
            connectionString: databaseURL,
            maxConnections: configuration.databasePoolSize,
            statementTimeout: configuration.databaseStatementTimeout,
            applicationName: configuration.service.rawValue
        )
        databaseConfiguration.minConnections = configuration.databasePoolMinOpen
        databaseConfiguration.pooler = configuration.databasePooler
        databaseConfiguration.directConnectionString = configuration.databaseDirectURL
        let database = PostgresPool(configuration: databaseConfiguration, logger: logger)
        // Wait for the database (bounded by AUTH_DB_START_TIMEOUT_SECONDS) rather than exit
        // because it is not up yet.
        try await DatabaseStartup(limit: configuration.databaseStartTimeout).wait(logger: logger) {
            try await database.query("SELECT 1", [])
        }
        let health = HealthService(serviceNames: serviceNames) {
            (try? await database.query("SELECT 1", [])) != nil
        }
        var router = RPCRouter()
        router.register(health)
        // Check does a comparison and an atomic load before it awaits the database: too
        // little to be worth a thread hop. Every other method starts off the event loop.
        router.setExecution(.onEventLoopUntilFirstSuspension, for: Auth_Health_V1_Health.Method.check)
        let backgroundServices = BackgroundServices()
        try await register(
            &router,
            ServiceDependencies(
                configuration: configuration,
                database: database,
                logger: logger,
                backgroundServices: backgroundServices
            )
        )

        if configuration.rpcTLS == nil {
            logger.warning(
                "RPC without TLS (development): callers prove the shared secret in their Hello; set AUTH_RPC_TLS_* for mutual TLS"
            )
        }
        let server = try RPCServer(
            configuration: RPCServerConfiguration(
                host: configuration.bindHost,
                port: configuration.port,
                serviceName: configuration.service.rawValue,
                secret: configuration.rpcSecret,
                tls: configuration.rpcTLS,
                limits: configuration.rpcLimits
            ),
            router: router,
            logger: logger
        )
        let poolMetrics = DatabasePoolMetrics(pool: database, factory: PrometheusMetricsFactory(registry: registry))
        var observability: [any Service] = [
            PeriodicTask(name: "Database pool metrics", every: .seconds(5), logger: logger) { poolMetrics.record() }
        ]
        if let port = configuration.metricsPort {
            observability.append(
                MetricsServer(
                    registry: registry,
                    host: configuration.bindHost,
                    port: port,
                    serverName: "\(configuration.service.rawValue)-admin",
                    logger: logger
                )
            )
        }
        // Shut down in reverse order: health turns NOT_SERVING, the server drains, the pool
        // closes, the last spans are exported.
        var services: [any Service] = []
        if let tracing { services.append(tracing) }
        services.append(database)
        services += observability
        services += backgroundServices.all
        if let watcher = configuration.process.rpcTLSWatcher(logger: logger) { services.append(watcher) }
        services.append(server)
        services.append(ShutdownAnnouncer { health.markShuttingDown() })
        let group = ServiceGroup(
            configuration: ServiceGroupConfiguration(
                services: services.map { ServiceGroupConfiguration.ServiceConfiguration(service: $0) },
                gracefulShutdownSignals: [.sigterm, .sigint],
                logger: logger
            )
        )
        try await group.run()
    }
}

/// The services `register` added with ``ServiceDependencies/addService(_:)``.
final class BackgroundServices: Sendable {
    private let services = Mutex<[any Service]>([])

    func add(_ service: some Service) {
        services.withLock { $0.append(service) }
    }

    var all: [any Service] { services.withLock { $0 } }
}

/// Runs until graceful shutdown starts, then calls `announce` (e.g. health turns NOT_SERVING
/// while the server drains).
struct ShutdownAnnouncer: Service {
    let announce: @Sendable () -> Void

    func run() async throws {
        try? await gracefulShutdown()
        announce()
    }
}
