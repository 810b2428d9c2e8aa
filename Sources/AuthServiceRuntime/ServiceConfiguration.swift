import AuthRPC
import AuthRPCNIO
import Foundation
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

    /// The `AUTH_<NAME>_ADDRESSES` variable clients read to find this service.
    public var addressesVariable: String {
        switch self {
        case .identity: "AUTH_IDENTITY_ADDRESSES"
        case .otpDispatch: "AUTH_OTP_ADDRESSES"
        case .session: "AUTH_SESSION_ADDRESSES"
        case .gateway: "AUTH_GATEWAY_ADDRESSES"
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
    public var databasePoolSize: Int
    public var databaseStatementTimeout: Duration
    /// How long start-up keeps trying to reach the database before it gives up
    /// (`AUTH_DB_START_TIMEOUT_SECONDS`, 0 = one attempt).
    public var databaseStartTimeout: Duration
    public var rpcSecret: [UInt8]
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
        self.databasePoolSize = try reader.integer("AUTH_DB_POOL_SIZE", default: 10, in: 1...200)
        self.databaseStatementTimeout = .milliseconds(try reader.integer("AUTH_DB_STATEMENT_TIMEOUT_MS", default: 5000, in: 1...3_600_000, unit: " of milliseconds"))
        self.databaseStartTimeout = .seconds(try reader.integer("AUTH_DB_START_TIMEOUT_SECONDS", default: 60, in: 0...3_600, unit: " of seconds"))
        self.logLevel = try reader.value("AUTH_LOG_LEVEL", default: .info, expected: "one of trace, debug, info, notice, warning, error, critical") { Logger.Level(rawValue: $0) }

        guard let secretText = reader.string("AUTH_RPC_SECRET") else {
            throw ConfigurationError(variable: "AUTH_RPC_SECRET", problem: "is required: base64 of at least 32 random bytes, the same for every service (e.g. `openssl rand -base64 32`)")
        }
        guard let secret = Data(base64Encoded: secretText), secret.count >= 32 else {
            throw ConfigurationError(variable: "AUTH_RPC_SECRET", problem: "must be base64 of at least 32 bytes")
        }
        self.rpcSecret = Array(secret)

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
            if let text = reader.string(other.addressesVariable) {
                guard let list = RPCAddress.list(text) else {
                    throw ConfigurationError(variable: other.addressesVariable, problem: "must be a comma-separated list of host:port")
                }
                addresses[other] = list
            }
        }
        self.addresses = addresses
    }
}

/// Reads and validates environment variables; unknown values name the variable in the error.
struct EnvironmentReader {
    let variables: [String: String]

    func string(_ name: String) -> String? {
        guard let value = variables[name]?.trimmingCharacters(in: .whitespaces), !value.isEmpty else { return nil }
        return value
    }

    /// The parsed value of `name`, `fallback` when unset; a value `parse` refuses stops start-up
    /// with "must be \(expected)".
    func value<T>(_ name: String, default fallback: T, expected: String, parse: (String) -> T?) throws -> T {
        guard let text = string(name) else { return fallback }
        guard let value = parse(text) else {
            throw ConfigurationError(variable: name, problem: "must be \(expected)")
        }
        return value
    }

    /// A whole number in `range`; the refusal names the range.
    func integer(_ name: String, default fallback: Int, in range: ClosedRange<Int>, unit: String = "", note: String = "") throws -> Int {
        try value(name, default: fallback, expected: "a whole number\(unit) in \(range.lowerBound)...\(range.upperBound)\(note)") {
            Int($0).flatMap { range.contains($0) ? $0 : nil }
        }
    }
}
