import AuthBackoff
import AuthConcurrency
import AuthRPC
import AuthText
import Logging
import NIOCore
import NIOPosix
import NIOSSL
import Synchronization

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Where a server listens.
public struct RPCAddress: Sendable, Hashable, CustomStringConvertible {
    public var host: String
    public var port: Int

    public init(host: String, port: Int) {
        self.host = host
        self.port = port
    }

    /// Parses `host:port`; `nil` for anything else.
    public init?(_ text: String) {
        guard let colon = text.lastIndex(of: ":"), let port = Int(text[text.index(after: colon)...]),
            (1...65535).contains(port)
        else { return nil }
        var host = String(text[..<colon])
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        guard !host.isEmpty else { return nil }
        self.init(host: host, port: port)
    }

    /// Parses a comma-separated list of `host:port`.
    public static func list(_ text: String) -> [RPCAddress]? {
        let parts = text.split(separator: ",").map { $0.trimmingWhitespace() }.filter { !$0.isEmpty }
        let addresses = parts.compactMap(RPCAddress.init)
        return addresses.count == parts.count && !addresses.isEmpty ? addresses : nil
    }

    public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
}

/// How a ``TCPClientTransport`` connects.
public struct RPCClientConfiguration: Sendable {
    /// The servers; calls are spread over them round-robin.
    public var addresses: [RPCAddress]
    /// Connections kept to each address.
    public var connectionsPerAddress: Int
    /// The calling service's name: proven by the certificate with ``tls``, or with `secret` in
    /// each connection's Hello in plaintext mode.
    public var serviceName: String
    /// Plaintext mode: the shared secret. Not used with ``tls``.
    public var secret: [UInt8]
    /// Mutual TLS (TLS 1.3) with this end's certificate; `nil` connects in plaintext.
    public var tls: RPCTLSConfiguration?
    /// The service the client means to reach (e.g. "session"): the Hello is bound to it, and with
    /// TLS the server's certificate must name it. `nil` accepts whichever service answers (its
    /// certificate still has to come from the CA, or its HelloAck prove the secret).
    public var serverName: String?
    public var connectTimeout: Duration
    /// First reconnect delay after a failed connect; doubles per failure up to `maxBackoff`.
    public var initialBackoff: Duration
    public var maxBackoff: Duration
    /// Ping after this long without hearing from the server; close after twice as long.
    public var keepaliveInterval: Duration
    public var maxFrameSize: Int

    public init(
        addresses: [RPCAddress],
        connectionsPerAddress: Int = 1,
        serviceName: String,
        secret: [UInt8],
        tls: RPCTLSConfiguration? = nil,
        serverName: String? = nil,
        connectTimeout: Duration = .seconds(2),
        initialBackoff: Duration = .milliseconds(50),
        maxBackoff: Duration = .seconds(5),
        keepaliveInterval: Duration = .seconds(30),
        maxFrameSize: Int = 1 << 20
    ) {
        self.addresses = addresses
        self.connectionsPerAddress = max(1, connectionsPerAddress)
        self.serviceName = serviceName
        self.secret = secret
        self.tls = tls
        self.serverName = serverName
        self.connectTimeout = connectTimeout
        self.initialBackoff = initialBackoff
        self.maxBackoff = maxBackoff
        self.keepaliveInterval = keepaliveInterval
        self.maxFrameSize = maxFrameSize
    }
}

/// Calls servers over TCP: a few connections per address, round-robin across them,
/// reconnecting with exponential backoff, moving calls off connections that send GOAWAY.
public final class TCPClientTransport: ClientTransport, Sendable {
    public let configuration: RPCClientConfiguration
    private let subchannels: [Subchannel]
    private let nextIndex = Atomic<Int>(0)
    /// Woken whenever a subchannel's connection attempt ends: calls waiting for a connection
    /// look again.
    private let changed = WakeSignal()

    public init(
        configuration: RPCClientConfiguration,
        eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        logger: Logger,
        wallClock: @escaping @Sendable () -> Int64 = { Int64(Date().timeIntervalSince1970 * 1000) }
    ) {
        self.configuration = configuration
        let signer = ServiceCredentialSigner(
            service: configuration.serviceName,
            secret: configuration.tls == nil ? configuration.secret : nil
        )
        // Each connection takes the current material's context (certificates renewed in place
        // reach new connections); one that cannot be made fails the connect with its error.
        let verifyServerName = configuration.serverName != nil
        var sslContext: (@Sendable () throws -> NIOSSLContext)?
        if let tls = configuration.tls {
            sslContext = { try tls.clientContext(verifyServerName: verifyServerName) }
        }
        var subchannels: [Subchannel] = []
        for address in configuration.addresses {
            for _ in 0..<configuration.connectionsPerAddress {
                subchannels.append(
                    Subchannel(
                        address: address,
                        configuration: configuration,
                        signer: signer,
                        sslContext: sslContext,
                        group: eventLoopGroup,
                        logger: logger,
                        wallClock: wallClock,
                        changed: changed
                    )
                )
            }
        }
        self.subchannels = subchannels
    }

    public func unary(_ call: ClientCall) async throws -> [UInt8] {
        let deadline = call.timeout.map { ContinuousClock.now + $0 }
        var retries = 0
        while true {
            if Task.isCancelled {
                throw RPCError(
                    code: .cancelled,
                    message: "The caller cancelled the call.",
                    reason: RPCError.Reason.cancelled
                )
            }
            if let deadline, ContinuousClock.now >= deadline {
                throw RPCError(
                    code: .deadlineExceeded,
                    message: "No connection to \(addressesText) became ready before the deadline.",
                    reason: RPCError.Reason.deadlineExceeded
                )
            }
            let seen = changed.generation
            switch pick() {
            case .ready(let connection):
                do {
                    return try await connection.perform(call)
                } catch is RetryOnAnotherConnection {
                    retries += 1
                    if retries > subchannels.count * 4 {
                        throw RPCError(
                            code: .unavailable,
                            message: "Every connection to \(addressesText) refused the call.",
                            reason: RPCError.Reason.noConnection
                        )
                    }
                }
            case .connecting:
                // Until a connection attempt ends (ready or failed), or the deadline.
                await connectionChanged(past: seen, deadline: deadline)
            case .allFailing(let lastError):
                // A server that refused our credential (or that we refused) says why; say it to the caller too.
                if let refusal = lastError as? RPCError,
                    [.unauthenticated, .permissionDenied, .failedPrecondition].contains(refusal.code)
                        || refusal.reason == "tls_handshake_failed"
                {
                    throw refusal
                }
                throw RPCError(
                    code: .unavailable,
                    message: "Cannot reach \(addressesText): \(lastError.map { "\($0)" } ?? "connection failed").",
                    reason: RPCError.Reason.noConnection
                )
            }
        }
    }

    /// Returns when a subchannel's connection attempt ended after `seen`, at `deadline`, or
    /// when the caller is cancelled.
    private func connectionChanged(past seen: UInt64, deadline: ContinuousClock.Instant?) async {
        guard let deadline else {
            await changed.wait(past: seen)
            return
        }
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.changed.wait(past: seen) }
            group.addTask { try? await Task.sleep(until: deadline) }
            await group.next()
            group.cancelAll()
        }
    }

    private var addressesText: String { configuration.addresses.map(\.description).joined(separator: ",") }

    private enum Pick {
        case ready(Subchannel.Connection)
        case connecting
        case allFailing((any Error)?)
    }

    /// The next ready connection after the last one used; starts connects where needed.
    private func pick() -> Pick {
        let count = subchannels.count
        let start = nextIndex.wrappingAdd(1, ordering: .relaxed).oldValue
        var anyConnecting = false
        var lastError: (any Error)?
        for offset in 0..<count {
            let subchannel = subchannels[(start &+ offset) % count]
            switch subchannel.readyConnectionOrConnect() {
            case .ready(let connection): return .ready(connection)
            case .connecting: anyConnecting = true
            case .backingOff(let error): lastError = error
            }
        }
        return anyConnecting ? .connecting : .allFailing(lastError)
    }

    /// Closes every connection; calls in flight fail with UNAVAILABLE.
    public func shutdown() async {
        for subchannel in subchannels { await subchannel.shutdown() }
    }
}

/// One connection slot to one address: connects on demand, reconnects with backoff.
final class Subchannel: Sendable {
    struct Connection: Sendable {
        let channel: any Channel
        let handler: NIOLoopBound<ClientConnectionHandler>
        let submissions: CallSubmissionQueue

        func perform(_ call: ClientCall) async throws -> [UInt8] {
            let eventLoop = channel.eventLoop
            let handler = self.handler
            let queue = self.submissions
            let pending = PendingClientCall(call: call)
            return try await withTaskCancellationHandler {
                try await withUnsafeThrowingContinuation { continuation in
                    pending.continuation = continuation
                    if queue.enqueue(pending) {
                        eventLoop.execute { handler.value.drainSubmissions() }
                    }
                }
            } onCancel: {
                eventLoop.execute { handler.value.cancel(pending) }
            }
        }
    }

    enum Availability {
        case ready(Connection)
        case connecting
        case backingOff((any Error)?)
    }

    private enum State {
        case idle
        case connecting
        case ready(Connection)
        case backingOff(until: ContinuousClock.Instant)
        case shutdown
    }

    private struct Guarded {
        var state: State = .idle
        var failures = 0
        var lastError: (any Error)?
    }

    let address: RPCAddress
    private let configuration: RPCClientConfiguration
    private let signer: ServiceCredentialSigner
    private let sslContext: (@Sendable () throws -> NIOSSLContext)?
    private let group: any EventLoopGroup
    private let logger: Logger
    private let wallClock: @Sendable () -> Int64
    private let guarded = Mutex(Guarded())
    /// Woken when a connection attempt ends or the subchannel shuts down.
    private let changed: WakeSignal

    init(
        address: RPCAddress,
        configuration: RPCClientConfiguration,
        signer: ServiceCredentialSigner,
        sslContext: (@Sendable () throws -> NIOSSLContext)?,
        group: any EventLoopGroup,
        logger: Logger,
        wallClock: @escaping @Sendable () -> Int64,
        changed: WakeSignal
    ) {
        self.changed = changed
        self.address = address
        self.configuration = configuration
        self.signer = signer
        self.sslContext = sslContext
        self.group = group
        var logger = logger
        logger[metadataKey: "server"] = "\(address)"
        self.logger = logger
        self.wallClock = wallClock
    }

    func readyConnectionOrConnect() -> Availability {
        let (availability, mustConnect) = guarded.withLock { guarded -> (Availability, Bool) in
            switch guarded.state {
            case .ready(let connection):
                return (.ready(connection), false)
            case .connecting:
                return (.connecting, false)
            case .idle:
                guarded.state = .connecting
                return (.connecting, true)
            case .backingOff(let until):
                if ContinuousClock.now >= until {
                    guarded.state = .connecting
                    return (.connecting, true)
                }
                return (.backingOff(guarded.lastError), false)
            case .shutdown:
                return (
                    .backingOff(
                        RPCError(
                            code: .unavailable,
                            message: "The client is shut down.",
                            reason: RPCError.Reason.clientShutDown
                        )
                    ), false
                )
            }
        }
        if mustConnect { connect() }
        return availability
    }

    private func connect() {
        // One event loop for the connection and for everything that waits on it. The HelloAck
        // then makes the connection the slot's ready one at once, inside the read that carried
        // it, so a GoAway or a close in the same read finds it ready and takes it back
        // (`connectionEvent`). With the promises on other loops, the ready callback could run
        // after those events and keep a closed connection as ready for good: every call then
        // failed with `no_connection`, and the slot never connected again.
        let eventLoop = group.any()
        let readyPromise = eventLoop.makePromise(of: Void.self)
        let signer = self.signer
        let configuration = self.configuration
        let logger = self.logger
        let wallClock = self.wallClock
        let sslContext = self.sslContext
        let handlerPromise = eventLoop.makePromise(
            of: (NIOLoopBound<ClientConnectionHandler>, CallSubmissionQueue).self
        )
        let connectFuture = ClientBootstrap(group: eventLoop)
            .connectTimeout(TimeAmount(configuration.connectTimeout))
            .channelOption(.tcpOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    if let sslContext {
                        // SNI and the name checked in the server's certificate: the service name.
                        try channel.pipeline.syncOperations.addHandler(
                            NIOSSLClientHandler(context: try sslContext(), serverHostname: configuration.serverName)
                        )
                    }
                    let handler = ClientConnectionHandler(
                        signer: signer,
                        expectedServer: configuration.serverName,
                        maxFrameSize: configuration.maxFrameSize,
                        keepaliveInterval: TimeAmount(configuration.keepaliveInterval),
                        wallClock: wallClock,
                        readyPromise: readyPromise,
                        logger: logger
                    ) { [weak self] event in
                        self?.connectionEvent(event, channel: channel)
                    }
                    try channel.pipeline.syncOperations.addHandler(handler)
                    handlerPromise.succeed((NIOLoopBound(handler, eventLoop: channel.eventLoop), handler.submissions))
                }
            }
            .connect(host: address.host, port: address.port)
        connectFuture.whenFailure { error in
            readyPromise.fail(error)
            handlerPromise.fail(error)
        }
        let connected = connectFuture.and(handlerPromise.futureResult).flatMap { channel, handler in
            readyPromise.futureResult.map { Connection(channel: channel, handler: handler.0, submissions: handler.1) }
        }
        connected.whenComplete { [weak self] result in
            guard let self else { return }
            defer { self.changed.wake() }
            switch result {
            case .success(let connection):
                let keep = self.guarded.withLock { guarded -> Bool in
                    guard case .connecting = guarded.state else { return false }
                    guarded.state = .ready(connection)
                    guarded.failures = 0
                    guarded.lastError = nil
                    return true
                }
                if keep {
                    self.logger.debug("Connected")
                } else {
                    connection.channel.close(promise: nil)
                }
            case .failure(let error):
                let failures = self.guarded.withLock { guarded -> Int in
                    guarded.failures += 1
                    return guarded.failures
                }
                let delay = self.backoff(failures: failures)
                self.guarded.withLock { guarded in
                    guarded.lastError = error
                    if case .connecting = guarded.state {
                        guarded.state = .backingOff(until: .now + delay)
                    }
                }
                self.logger.info(
                    "Connect failed",
                    metadata: ["error": "\(error)", "retry_in_ms": "\(delay.milliseconds)"]
                )
                connectFuture.whenSuccess { $0.close(promise: nil) }
            }
        }
    }

    private func connectionEvent(_ event: ClientConnectionHandler.Event, channel: any Channel) {
        switch event {
        case .ready:
            break
        case .goingAway, .closed:
            guarded.withLock { guarded in
                if case .ready(let connection) = guarded.state, connection.channel === channel {
                    guarded.state = .idle
                }
            }
        }
    }

    /// Exponential backoff, each wait between half and all of the step.
    private func backoff(failures: Int) -> Duration {
        ExponentialBackoff(initial: configuration.initialBackoff, limit: configuration.maxBackoff, jitter: 0.5...1.0)
            .delay(afterFailures: failures)
    }

    func shutdown() async {
        let connection = guarded.withLock { guarded -> Connection? in
            defer { guarded.state = .shutdown }
            if case .ready(let connection) = guarded.state { return connection }
            return nil
        }
        changed.wake()
        if let connection {
            connection.channel.eventLoop.execute { connection.handler.value.close() }
            try? await connection.channel.closeFuture.get()
        }
    }
}
