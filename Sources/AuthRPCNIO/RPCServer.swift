import AuthRPC
import Logging
import NIOCore
import NIOPosix
import NIOSSL
import ServiceLifecycle
import Synchronization

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// How an ``RPCServer`` listens and whom it serves.
public struct RPCServerConfiguration: Sendable {
    /// The address to bind: `127.0.0.1` locally, `0.0.0.0` in a container.
    public var host: String
    /// The port to bind; 0 picks a free one (read it back from ``RPCServer/localPort``).
    public var port: Int
    /// This server's service name, sent in HelloAck and used in logs.
    public var serviceName: String
    /// Plaintext mode: the secret shared between services; callers prove they hold it in their
    /// Hello, and the server proves it in HelloAck. Not used with ``tls``.
    public var secret: [UInt8]
    /// Mutual TLS (TLS 1.3): callers are named by their certificates. `nil` serves plaintext TCP.
    public var tls: RPCTLSConfiguration?
    public var limits: ConnectionLimits
    /// How long graceful shutdown waits for open calls before closing connections anyway.
    public var shutdownGracePeriod: Duration

    public init(
        host: String = "127.0.0.1",
        port: Int = 0,
        serviceName: String,
        secret: [UInt8],
        tls: RPCTLSConfiguration? = nil,
        limits: ConnectionLimits = ConnectionLimits(),
        shutdownGracePeriod: Duration = .seconds(10)
    ) {
        self.host = host
        self.port = port
        self.serviceName = serviceName
        self.secret = secret
        self.tls = tls
        self.limits = limits
        self.shutdownGracePeriod = shutdownGracePeriod
    }
}

/// Serves an ``RPCRouter`` over TCP. A `Service`: `run()` serves until graceful shutdown, then
/// sends GOAWAY on every connection, lets open calls finish (up to the grace period) and
/// returns.
public final class RPCServer: Service, Sendable {
    public let configuration: RPCServerConfiguration
    private let router: RPCRouter
    private let group: any EventLoopGroup
    private let logger: Logger
    private let verifier: ServiceCredentialVerifier
    /// Mutual TLS: each connection takes the current material's context (certificates renewed
    /// in place reach new connections, ``RPCTLSConfiguration/replace(with:)``).
    private let tls: RPCTLSConfiguration?
    private let state: Mutex<State>
    private let stopPromise: EventLoopPromise<Void>

    private struct State {
        var serverChannel: (any Channel)?
        var connections: [ObjectIdentifier: any Channel] = [:]
        var admission: ConnectionAdmission<ObjectIdentifier>
        var stopping = false
        /// The drain, waiting for the last connection to close.
        var drained: CheckedContinuation<Void, Never>?
    }

    /// Throws when the TLS configuration cannot make a TLS context.
    public init(
        configuration: RPCServerConfiguration,
        router: RPCRouter,
        eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        logger: Logger
    ) throws {
        self.configuration = configuration
        self.router = router
        self.group = eventLoopGroup
        self.logger = logger
        self.verifier = ServiceCredentialVerifier(
            serverName: configuration.serviceName,
            secret: configuration.tls == nil ? configuration.secret : nil
        )
        self.tls = configuration.tls
        // A material that cannot make a context fails here, not at the first connection.
        _ = try configuration.tls?.serverContext()
        self.stopPromise = eventLoopGroup.any().makePromise(of: Void.self)
        self.state = Mutex(
            State(
                admission: ConnectionAdmission(
                    maxConnections: configuration.limits.maxConnections,
                    maxUnauthenticatedPerPeer: configuration.limits.maxUnauthenticatedConnectionsPerPeer
                )
            )
        )
    }

    /// The bound port, once listening.
    public var localPort: Int? {
        state.withLock { $0.serverChannel?.localAddress?.port }
    }

    /// Starts listening (if not yet) and returns the bound port.
    @discardableResult
    public func bind() async throws -> Int {
        if let port = localPort { return port }
        let router = self.router
        let verifier = self.verifier
        let configuration = self.configuration
        let logger = self.logger
        let tls = self.tls
        let peerCertificateNames: PeerCertificateNames? =
            if tls != nil { { @Sendable context in verifiedPeerCertificateNames(context) } } else { nil }
        let channel = try await ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 256)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.tcpOption(.tcp_nodelay), value: 1)
            .childChannelOption(.writeBufferWaterMark, value: .init(low: 256 * 1024, high: 1024 * 1024))
            .childChannelInitializer { [weak self] channel in
                guard let self else { return channel.close() }
                let id = ObjectIdentifier(channel)
                let peer = channel.remoteAddress?.ipAddress ?? "unknown"
                let decision = self.state.withLock { state -> ConnectionAdmission<ObjectIdentifier>.Decision? in
                    guard !state.stopping else { return nil }
                    let decision = state.admission.opened(id, peer: peer)
                    if decision == .accept { state.connections[id] = channel }
                    return decision
                }
                switch decision {
                case nil:
                    return channel.close()
                case .refuseServerFull?, .refusePeerUnauthenticated?:
                    let error =
                        decision == .refuseServerFull
                        ? RPCError.tooManyConnections : RPCError.tooManyUnauthenticatedConnections
                    // Debug, not warning: a flood of refused connections must not flood the log too.
                    logger.debug("Refused a connection", metadata: ["peer": "\(peer)", "reason": "\(error.reason)"])
                    return channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandler(ConnectionRefusalHandler(error))
                    }
                case .accept?:
                    break
                }
                channel.closeFuture.whenComplete { [weak self] _ in
                    let drained = self?.state.withLock { state -> CheckedContinuation<Void, Never>? in
                        state.connections.removeValue(forKey: id)
                        state.admission.closed(id)
                        guard state.connections.isEmpty else { return nil }
                        defer { state.drained = nil }
                        return state.drained
                    }
                    drained?.resume()
                }
                return channel.eventLoop.makeCompletedFuture {
                    if let tls {
                        try channel.pipeline.syncOperations.addHandler(
                            NIOSSLServerHandler(context: try tls.serverContext())
                        )
                    }
                    try channel.pipeline.syncOperations.addServerConnectionHandlers(
                        ServerConnectionHandler(
                            router: router,
                            verifier: verifier,
                            peerCertificateNames: peerCertificateNames,
                            limits: configuration.limits,
                            serviceName: configuration.serviceName,
                            logger: logger,
                            onAuthenticated: { [weak self] in
                                self?.state.withLock { $0.admission.authenticated(id) }
                            }
                        )
                    )
                }
            }
            .bind(host: configuration.host, port: configuration.port)
            .get()
        state.withLock { $0.serverChannel = channel }
        let port = channel.localAddress?.port ?? configuration.port
        logger.info(
            "RPC server listening",
            metadata: [
                "host": "\(configuration.host)", "port": "\(port)", "service": "\(configuration.serviceName)",
                "transport": "\(tls == nil ? "plaintext" : "mutual TLS 1.3")",
            ]
        )
        return port
    }

    public func run() async throws {
        try await bind()
        try? await withGracefulShutdownHandler {
            try await withTaskCancellationHandler {
                try await stopPromise.futureResult.get()
            } onCancel: {
                self.stopPromise.succeed()
            }
        } onGracefulShutdown: {
            self.stopPromise.succeed()
        }
        await drain()
    }

    /// Asks a running server to shut down gracefully; `run()` returns when it has.
    public func beginShutdown() {
        stopPromise.succeed()
    }

    private func drain() async {
        let (serverChannel, connections) = state.withLock { state in
            state.stopping = true
            return (state.serverChannel, Array(state.connections.values))
        }
        try? await serverChannel?.close()
        logger.info("RPC server draining", metadata: ["connections": "\(connections.count)"])
        for connection in connections {
            connection.pipeline.fireUserInboundEventTriggered(GracefulShutdownRequest())
        }
        // Until the last connection closes (woken by its close) or the grace period ends.
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.connectionsClosed() }
            group.addTask { [grace = configuration.shutdownGracePeriod] in try? await Task.sleep(for: grace) }
            await group.next()
            group.cancelAll()
        }
        let remaining = state.withLock { Array($0.connections.values) }
        for connection in remaining { try? await connection.close() }
        logger.info("RPC server stopped")
    }
}

extension RPCServer {
    /// Returns once no connection is open (at once when none is), or when cancelled.
    private func connectionsClosed() async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let now = state.withLock { state -> Bool in
                    if state.connections.isEmpty || Task.isCancelled { return true }
                    state.drained = continuation
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
                defer { state.drained = nil }
                return state.drained
            }
            waiter?.resume()
        }
    }
}

extension RPCError {
    static let tooManyConnections = RPCError(
        code: .resourceExhausted,
        message: "The server holds its maximum number of connections; retry later or elsewhere.",
        reason: RPCError.Reason.tooManyConnections
    )
    static let tooManyUnauthenticatedConnections = RPCError(
        code: .resourceExhausted,
        message: "Too many connections from this address have not completed Hello.",
        reason: RPCError.Reason.tooManyUnauthenticatedConnections
    )
}

extension ChannelPipeline.SynchronousOperations {
    /// The handlers of a served connection. `BackPressureHandler` holds back reads while the
    /// channel is not writable (more than the high water mark of our writes waits), so a peer
    /// that sends requests without reading the responses stops being read instead of making
    /// the server queue unbounded work and output; the watchdog closes it if it stays so.
    func addServerConnectionHandlers(_ handler: ServerConnectionHandler) throws {
        try addHandler(BackPressureHandler())
        try addHandler(handler)
    }
}
