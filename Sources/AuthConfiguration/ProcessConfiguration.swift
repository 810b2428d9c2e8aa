import AuthCrypto
import AuthRPC
import AuthRPCNIO
import AuthText
import Logging

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// What every process of the system reads from `AUTH_*` environment variables (README has the
/// table): where it runs, where it listens, its log level, how it speaks RPC (mutual TLS or
/// development's shared secret, the connection limits) and where the other services are. The
/// gateway and authctl need no more; a backend service adds its database
/// (AuthServiceRuntime's `ServiceConfiguration`).
public struct ProcessConfiguration: Sendable {
    public var environment: DeploymentEnvironment
    public var service: AuthServiceName
    public var bindHost: String
    public var port: Int
    /// Plaintext mode's shared secret (`AUTH_RPC_SECRET`); empty with TLS.
    public var rpcSecret: [UInt8]
    /// Mutual TLS material (`AUTH_RPC_TLS_CERT`, `_KEY`, `_CA`); nil in plaintext mode.
    public var rpcTLS: RPCTLSConfiguration?
    /// The files of `AUTH_RPC_TLS_*` when all three name files (not PEM text): watched every
    /// ``rpcTLSReloadInterval`` for a renewed certificate (``RPCTLSFileWatcher``).
    public var rpcTLSFiles: RPCTLSFileWatcher.Files?
    /// `AUTH_RPC_TLS_RELOAD_SECONDS` (60; 1–3600): how often the TLS files are looked at.
    public var rpcTLSReloadInterval: Duration = .seconds(60)
    public var rpcLimits: ConnectionLimits
    public var logLevel: Logger.Level
    private var addresses: [AuthServiceName: [RPCAddress]]

    /// The service that reloads renewed TLS files, when the material comes from files.
    public func rpcTLSWatcher(logger: Logger) -> RPCTLSFileWatcher? {
        guard let rpcTLS, let rpcTLSFiles else { return nil }
        return RPCTLSFileWatcher(
            configuration: rpcTLS,
            files: rpcTLSFiles,
            interval: rpcTLSReloadInterval,
            expectedName: service.rawValue,
            logger: logger
        )
    }

    /// Where clients find `service`.
    public func addresses(of service: AuthServiceName) -> [RPCAddress] {
        addresses[service] ?? [RPCAddress(host: "127.0.0.1", port: service.defaultPort)]
    }

    /// Reads the configuration of `service` from `environment` (by default the process's).
    public init(
        service: AuthServiceName,
        environment variables: [String: String] = ProcessInfo.processInfo.environment
    ) throws {
        let reader = EnvironmentReader(variables: variables)
        self.service = service
        self.environment = try reader.environment()
        self.bindHost = reader.string("AUTH_BIND_HOST") ?? "127.0.0.1"
        self.port = try reader.integer(
            service.portVariable,
            default: service.defaultPort,
            in: 0...65535,
            note: " (0: any free port, logged at start)"
        )
        self.logLevel = try reader.value(
            "AUTH_LOG_LEVEL",
            default: .info,
            expected: "one of trace, debug, info, notice, warning, error, critical"
        ) { Logger.Level(rawValue: $0) }

        if reader.string("AUTH_RPC_MESH_MTLS") != nil {
            // Issue 19, item 10: plaintext RPC names its caller by a secret every service holds,
            // so any one of them could claim to be another, and per-method authorization meant
            // nothing. Production RPC is mutual TLS, behind a mesh too (docs/deployment.md).
            throw ConfigurationError(
                variable: "AUTH_RPC_MESH_MTLS",
                problem:
                    "is no longer accepted: plaintext RPC lets any holder of the shared secret claim to be any service; set AUTH_RPC_TLS_CERT, AUTH_RPC_TLS_KEY and AUTH_RPC_TLS_CA (behind a service mesh too; docs/deployment.md says how)"
            )
        }
        self.rpcTLS = try RPCTLSConfiguration(environment: variables, expectedName: service.rawValue)
        let paths = [
            RPCTLSConfiguration.certificateVariable, RPCTLSConfiguration.keyVariable, RPCTLSConfiguration.caVariable,
        ].compactMap { reader.string($0) }.filter { !$0.contains("-----BEGIN") }
        self.rpcTLSFiles =
            rpcTLS != nil && paths.count == 3
            ? RPCTLSFileWatcher.Files(certificate: paths[0], privateKey: paths[1], trustRoots: paths[2]) : nil
        self.rpcTLSReloadInterval = try reader.seconds(
            "AUTH_RPC_TLS_RELOAD_SECONDS",
            default: rpcTLSReloadInterval,
            in: 1...3_600
        )
        if rpcTLS != nil {
            self.rpcSecret = []
        } else {
            if environment == .production {
                throw ConfigurationError(
                    variable: "AUTH_RPC_TLS_CERT",
                    problem:
                        "is required in production (with AUTH_RPC_TLS_KEY and AUTH_RPC_TLS_CA): production RPC is mutual TLS, never plaintext"
                )
            }
            self.rpcSecret = try readRPCSecret(variables)
        }

        var limits = ConnectionLimits()
        limits.maxFrameSize = try reader.integer(
            "AUTH_RPC_MAX_FRAME_BYTES",
            default: limits.maxFrameSize,
            in: 1024...(64 << 20),
            unit: " of bytes"
        )
        limits.maxConcurrentCalls = try reader.integer(
            "AUTH_RPC_MAX_CONCURRENT_CALLS",
            default: limits.maxConcurrentCalls,
            in: 1...100_000
        )
        limits.idleTimeout = .seconds(
            try reader.integer("AUTH_RPC_IDLE_TIMEOUT_SECONDS", default: 300, in: 1...86_400, unit: " of seconds")
        )
        limits.readTimeout = .seconds(
            try reader.integer("AUTH_RPC_READ_TIMEOUT_SECONDS", default: 10, in: 1...3_600, unit: " of seconds")
        )
        limits.maxConnections = try reader.integer(
            "AUTH_RPC_MAX_CONNECTIONS",
            default: limits.maxConnections,
            in: 1...65_536
        )
        limits.maxUnauthenticatedConnectionsPerPeer = try reader.integer(
            "AUTH_RPC_MAX_UNAUTHENTICATED_PER_PEER",
            default: limits.maxUnauthenticatedConnectionsPerPeer,
            in: 1...65_536
        )
        self.rpcLimits = limits

        var addresses: [AuthServiceName: [RPCAddress]] = [:]
        for other in AuthServiceName.allCases {
            if let variable = other.addressesVariable, let text = reader.string(variable) {
                guard let list = RPCAddress.list(text) else {
                    throw ConfigurationError(variable: variable, problem: "must be a comma-separated list of host:port")
                }
                addresses[other] = list
            }
        }
        self.addresses = addresses
    }
}

extension ProcessConfiguration {
    /// A client for `service` at its configured addresses, calling as this service: two
    /// connections per address, the shared secret, this configuration's frame limit.
    public func rpcClient(
        for service: AuthServiceName,
        logger: Logger,
        defaultTimeout: Duration = .seconds(10)
    ) -> RPCClient {
        RPCClient(
            transport: TCPClientTransport(
                configuration: RPCClientConfiguration(
                    addresses: addresses(of: service),
                    connectionsPerAddress: 2,
                    serviceName: self.service.rawValue,
                    secret: rpcSecret,
                    tls: rpcTLS,
                    serverName: service.rawValue,
                    maxFrameSize: rpcLimits.maxFrameSize
                ),
                logger: logger
            ),
            callerService: self.service.rawValue,
            defaultTimeout: defaultTimeout
        )
    }
}
