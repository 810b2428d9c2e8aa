import AuthRPC
import AuthRPCNIO
import Logging

/// An ``RPCServer`` serving `router` on a free loopback port and an ``RPCClient`` calling it,
/// in this process: what a benchmark of one service through the RPC layer needs.
public struct LoopbackRPC: Sendable {
    public let client: RPCClient
    public let port: Int
    private let server: RPCServer
    private let serverTask: Task<Void, any Error>
    private let transport: TCPClientTransport

    /// Starts the server as `serviceName` and connects `connections` client connections as
    /// `callerName`, in plaintext with a fixed secret, or with `tls` (server, client) when given.
    public static func start(
        router: RPCRouter,
        serviceName: String,
        callerName: String,
        connections: Int = 1,
        tls: (server: RPCTLSConfiguration, client: RPCTLSConfiguration)? = nil,
        logger: Logger
    ) async throws -> LoopbackRPC {
        let secret = Array(repeating: UInt8(7), count: 32)
        let server = try RPCServer(
            configuration: RPCServerConfiguration(serviceName: serviceName, secret: secret, tls: tls?.server),
            router: router,
            logger: logger
        )
        let port = try await server.bind()
        let serverTask = Task { try await server.run() }
        let transport = TCPClientTransport(
            configuration: RPCClientConfiguration(
                addresses: [RPCAddress(host: "127.0.0.1", port: port)],
                connectionsPerAddress: connections,
                serviceName: callerName,
                secret: secret,
                tls: tls?.client,
                serverName: serviceName
            ),
            logger: logger
        )
        return LoopbackRPC(
            client: RPCClient(transport: transport, callerService: callerName),
            port: port,
            server: server,
            serverTask: serverTask,
            transport: transport
        )
    }

    /// ``start(router:serviceName:callerName:connections:tls:logger:)`` with a router serving
    /// `service` alone.
    public static func start(
        serving service: some RegistrableRPCService,
        serviceName: String,
        callerName: String,
        connections: Int = 1,
        logger: Logger
    ) async throws -> LoopbackRPC {
        var router = RPCRouter()
        router.register(service)
        return try await start(
            router: router,
            serviceName: serviceName,
            callerName: callerName,
            connections: connections,
            logger: logger
        )
    }

    /// Closes the client, then shuts the server down gracefully.
    public func shutdown() async throws {
        await transport.shutdown()
        server.beginShutdown()
        try await serverTask.value
    }
}
