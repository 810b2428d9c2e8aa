import AuthRPC
import AuthRPCNIO
import AuthTestSupport
import Foundation
import Logging

/// What the end-to-end tests start the executables with.
enum ProcessEnvironment {
    /// The fixed master key of the end-to-end tests, not a random one: session keeps its
    /// signing keys in the shared test database across runs, wrapped with it (a different key
    /// refuses to start).
    static let masterKey = "ZTJlLXRlc3QtbWFzdGVyLWtleS0zMi1ieXRlcy0hISE="

    /// A database nothing listens on (port 1 on loopback).
    static let unreachableDatabase = "host=127.0.0.1 port=1 dbname=auth connect_timeout=2"

    /// The shared secret (base64), the shared test database and the master key, then `extra`.
    static func services(secret: String, _ extra: [String: String] = [:]) async throws -> [String: String] {
        var environment = [
            "AUTH_RPC_SECRET": secret,
            "AUTH_DATABASE_URL": try await PostgresTestDatabase.connectionString(),
            "AUTH_MASTER_KEY": masterKey,
        ]
        environment.merge(extra) { $1 }
        return environment
    }
}

/// An RPC client on a service process listening on loopback `port`, calling as `caller` under
/// the shared `secret`; quiet (critical log level) and quick to reconnect.
func loopbackClient(
    port: Int,
    caller: String,
    secret: [UInt8],
    connections: Int = 1,
    defaultTimeout: Duration = .seconds(10)
) -> (RPCClient, TCPClientTransport) {
    var logger = Logger(label: "e2e")
    logger.logLevel = .critical
    let transport = TCPClientTransport(
        configuration: RPCClientConfiguration(
            addresses: [RPCAddress(host: "127.0.0.1", port: port)],
            connectionsPerAddress: connections,
            serviceName: caller,
            secret: secret,
            initialBackoff: .milliseconds(20),
            maxBackoff: .milliseconds(200)
        ),
        logger: logger
    )
    return (RPCClient(transport: transport, callerService: caller, defaultTimeout: defaultTimeout), transport)
}
