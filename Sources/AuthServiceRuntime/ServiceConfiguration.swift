import AuthText
import AuthCrypto
import AuthPostgres
import AuthRPC
import AuthRPCNIO
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Logging

/// A configuration value that is missing or malformed. Start-up stops with this message.
public struct ConfigurationError: Error, CustomStringConvertible {
    public let variable: String
    public let problem: String

    public init(variable: String, problem: String) {
        self.variable = variable
        self.problem = problem
    }

    public var description: String { "\(variable): \(problem)" }
}

/// The services of the system, with their default ports.
public enum AuthServiceName: String, Sendable, CaseIterable {
    case identity
    case otpDispatch = "otp-dispatch"
    case session
    case gateway

    /// The `AUTH_<NAME>_PORT` variable.
    public var portVariable: String {
        switch self {
        case .identity: "AUTH_IDENTITY_PORT"
        case .otpDispatch: "AUTH_OTP_PORT"
        case .session: "AUTH_SESSION_PORT"
        case .gateway: "AUTH_GATEWAY_PORT"
        }
    }

    /// The `AUTH_<NAME>_ADDRESSES` variable clients read to find this service (none for the
    /// gateway, which only serves HTTP).
    public var addressesVariable: String? {
        switch self {
        case .identity: "AUTH_IDENTITY_ADDRESSES"
        case .otpDispatch: "AUTH_OTP_ADDRESSES"
        case .session: "AUTH_SESSION_ADDRESSES"
        // Nothing calls the gateway over RPC: it serves HTTP only.
        case .gateway: nil
        }
    }

    public var defaultPort: Int {
        switch self {
        case .identity: 7101
        case .otpDispatch: 7102
        case .session: 7103
        case .gateway: 8080
        }
    }
}

/// Everything a service reads from `AUTH_*` environment variables (README has the table).
public struct ServiceConfiguration: Sendable {
    public enum Environment: String, Sendable {
        case development
        case production
    }

    public var environment: Environment
    public var service: AuthServiceName
    public var bindHost: String
    public var port: Int
    public var databaseURL: String?
    /// What `AUTH_DATABASE_URL` reaches (`AUTH_DB_POOLER`): PostgreSQL itself, or a pooler in
    /// transaction mode (PgBouncer `pool_mode = transaction`).
    public var databasePooler: PostgresPooler
    /// `AUTH_DATABASE_DIRECT_URL`: PostgreSQL itself, for migrations and LISTEN; required with
    /// `AUTH_DB_POOLER=transaction`.
    public var databaseDirectURL: String?
    public var databasePoolSize: Int
    public var databaseStatementTimeout: Duration
    /// How long start-up keeps trying to reach the database before it gives up
    /// (`AUTH_DB_START_TIMEOUT_SECONDS`, 0 = one attempt).
    public var databaseStartTimeout: Duration
    /// Plaintext mode's shared secret (`AUTH_RPC_SECRET`); empty with TLS.
    public var rpcSecret: [UInt8]
    /// Mutual TLS material (`AUTH_RPC_TLS_CERT`, `_KEY`, `_CA`); nil in plaintext mode.
    public var rpcTLS: RPCTLSConfiguration?
    public var rpcLimits: ConnectionLimits
    public var logLevel: Logger.Level
    private var addresses: [AuthServiceName: [RPCAddress]]

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
        self.environment = try reader.value("AUTH_ENVIRONMENT", default: .development, expected: "`development` or `production`") { Environment(rawValue: $0) }
        self.bindHost = reader.string("AUTH_BIND_HOST") ?? "127.0.0.1"
        self.port = try reader.integer(service.portVariable, default: service.defaultPort, in: 0...65535, note: " (0: any free port, logged at start)")
        self.databaseURL = reader.string("AUTH_DATABASE_URL")
        self.databasePooler = try reader.value("AUTH_DB_POOLER", default: PostgresPooler.none, expected: "`none` or `transaction`") { PostgresPooler(rawValue: $0) }
        self.databaseDirectURL = reader.string("AUTH_DATABASE_DIRECT_URL")
        if databasePooler == .transaction, databaseDirectURL == nil {
            throw ConfigurationError(
                variable: "AUTH_DATABASE_DIRECT_URL",
                problem: "is required with AUTH_DB_POOLER=transaction: a libpq connection string that reaches PostgreSQL itself, not the pooler (for migrations' advisory lock and LISTEN)"
            )
        }
        self.databasePoolSize = try reader.integer("AUTH_DB_POOL_SIZE", default: 10, in: 1...200)
        self.databaseStatementTimeout = .milliseconds(try reader.integer("AUTH_DB_STATEMENT_TIMEOUT_MS", default: 5000, in: 1...3_600_000, unit: " of milliseconds"))
        self.databaseStartTimeout = .seconds(try reader.integer("AUTH_DB_START_TIMEOUT_SECONDS", default: 60, in: 0...3_600, unit: " of seconds"))
        self.logLevel = try reader.value("AUTH_LOG_LEVEL", default: .info, expected: "one of trace, debug, info, notice, warning, error, critical") { Logger.Level(rawValue: $0) }

        if reader.string("AUTH_RPC_MESH_MTLS") != nil {
            // Issue 19, item 10: plaintext RPC names its caller by a secret every service holds,
            // so any one of them could claim to be another, and per-method authorization meant
            // nothing. Production RPC is mutual TLS, behind a mesh too (docs/deployment.md).
            throw ConfigurationError(
                variable: "AUTH_RPC_MESH_MTLS",
                problem: "is no longer accepted: plaintext RPC lets any holder of the shared secret claim to be any service; set AUTH_RPC_TLS_CERT, AUTH_RPC_TLS_KEY and AUTH_RPC_TLS_CA (behind a service mesh too; docs/deployment.md says how)"
            )
        }
        self.rpcTLS = try RPCTLSConfiguration(environment: variables, expectedName: service.rawValue)
        if rpcTLS != nil {
            self.rpcSecret = []
        } else {
            if environment == .production {
                throw ConfigurationError(
                    variable: "AUTH_RPC_TLS_CERT",
                    problem: "is required in production (with AUTH_RPC_TLS_KEY and AUTH_RPC_TLS_CA): production RPC is mutual TLS, never plaintext"
                )
            }
            self.rpcSecret = try readRPCSecret(variables)
        }

        var limits = ConnectionLimits()
        limits.maxFrameSize = try reader.integer("AUTH_RPC_MAX_FRAME_BYTES", default: limits.maxFrameSize, in: 1024...(64 << 20), unit: " of bytes")
        limits.maxConcurrentCalls = try reader.integer("AUTH_RPC_MAX_CONCURRENT_CALLS", default: limits.maxConcurrentCalls, in: 1...100_000)
        limits.idleTimeout = .seconds(try reader.integer("AUTH_RPC_IDLE_TIMEOUT_SECONDS", default: 300, in: 1...86_400, unit: " of seconds"))
        limits.readTimeout = .seconds(try reader.integer("AUTH_RPC_READ_TIMEOUT_SECONDS", default: 10, in: 1...3_600, unit: " of seconds"))
        limits.maxConnections = try reader.integer("AUTH_RPC_MAX_CONNECTIONS", default: limits.maxConnections, in: 1...65_536)
        limits.maxUnauthenticatedConnectionsPerPeer = try reader.integer(
            "AUTH_RPC_MAX_UNAUTHENTICATED_PER_PEER", default: limits.maxUnauthenticatedConnectionsPerPeer, in: 1...65_536)
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

/// `AUTH_RPC_SECRET`: base64 of at least 32 bytes (plaintext mode).
public func readRPCSecret(_ variables: [String: String]) throws -> [UInt8] {
    let reader = EnvironmentReader(variables: variables)
    guard let secretText = reader.string("AUTH_RPC_SECRET") else {
        throw ConfigurationError(variable: "AUTH_RPC_SECRET", problem: "is required without TLS (AUTH_RPC_TLS_*): base64 of at least 32 random bytes, the same for every service (e.g. `openssl rand -base64 32`)")
    }
    // AuthCrypto's strict decoder: padded standard base64, nothing else (Foundation's accepts
    // non-zero unused bits). Surrounding whitespace (a mounted file's newline) is ignored.
    guard let secret = Base64.decode(secretText.trimmingWhitespace()), secret.count >= 32
    else {
        throw ConfigurationError(variable: "AUTH_RPC_SECRET", problem: "must be standard base64 (with = padding) of at least 32 bytes")
    }
    return secret
}

extension RPCTLSConfiguration {
    /// The variables of mutual TLS. Each holds PEM text (it contains `-----BEGIN`) or the path
    /// of a file holding it, as a Kubernetes Secret mounts it.
    public static let certificateVariable = "AUTH_RPC_TLS_CERT"
    public static let keyVariable = "AUTH_RPC_TLS_KEY"
    public static let caVariable = "AUTH_RPC_TLS_CA"

    /// Reads `AUTH_RPC_TLS_CERT`, `AUTH_RPC_TLS_KEY` and `AUTH_RPC_TLS_CA`: nil when none is
    /// set; all three, parsed and checked, when any is. With `expectedName`, the certificate must
    /// name it (a DNS name in its subjectAltName). Errors name the variable.
    public init?(environment variables: [String: String], expectedName: String?) throws {
        let reader = EnvironmentReader(variables: variables)
        let names = [Self.certificateVariable, Self.keyVariable, Self.caVariable]
        let values = names.map { reader.string($0) }
        guard values.contains(where: { $0 != nil }) else { return nil }
        var pem: [[UInt8]] = []
        for (name, value) in zip(names, values) {
            guard let value else {
                throw ConfigurationError(variable: name, problem: "is required when any AUTH_RPC_TLS_* variable is set (PEM text or a file path)")
            }
            pem.append(try Self.pemOrFile(value, variable: name))
        }
        do {
            try self.init(certificatePEM: pem[0], privateKeyPEM: pem[1], trustRootsPEM: pem[2])
        } catch let error as RPCTLSConfigurationError {
            let variable = switch error.part {
            case .certificate: Self.certificateVariable
            case .privateKey: Self.keyVariable
            case .trustRoots: Self.caVariable
            }
            throw ConfigurationError(variable: variable, problem: error.problem)
        }
        if let expectedName, !dnsNames.contains(expectedName) {
            throw ConfigurationError(
                variable: Self.certificateVariable,
                problem: "the certificate must name this service: subjectAltName DNS \(expectedName) (it names \(dnsNames.isEmpty ? "none" : dnsNames.joined(separator: ", ")))"
            )
        }
    }

    static func pemOrFile(_ value: String, variable: String) throws -> [UInt8] {
        if value.contains("-----BEGIN") { return Array(value.utf8) }
        guard let data = FileManager.default.contents(atPath: value) else {
            throw ConfigurationError(variable: variable, problem: "is neither PEM text nor a readable file: \(value)")
        }
        return Array(data)
    }
}

/// Reads and validates environment variables; unknown values name the variable in the error.
public struct EnvironmentReader: Sendable {
    public let variables: [String: String]

    public init(variables: [String: String]) {
        self.variables = variables
    }

    public func string(_ name: String) -> String? {
        guard let value = variables[name]?.trimmingWhitespace(), !value.isEmpty else { return nil }
        return value
    }

    /// The parsed value of `name`, `fallback` when unset; a value `parse` refuses stops start-up
    /// with "must be \(expected)".
    public func value<T>(_ name: String, default fallback: T, expected: String, parse: (String) -> T?) throws -> T {
        guard let text = string(name) else { return fallback }
        guard let value = parse(text) else {
            throw ConfigurationError(variable: name, problem: "must be \(expected)")
        }
        return value
    }

    /// A whole number in `range`; the refusal names the range.
    public func integer(_ name: String, default fallback: Int, in range: ClosedRange<Int>, unit: String = "", note: String = "") throws -> Int {
        try value(name, default: fallback, expected: "a whole number\(unit) in \(range.lowerBound)...\(range.upperBound)\(note)") {
            Int($0).flatMap { range.contains($0) ? $0 : nil }
        }
    }
}
