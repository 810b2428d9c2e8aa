import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import NIOHTTPTypes
import Synchronization

/// The deadlines of one HTTP connection (issue 19, item 8: a slowloris client, which opens
/// connections and sends their headers a byte at a time, or never, held a descriptor each for as
/// long as it liked). Pure: the handlers below feed it what happens, with the time.
///
/// - From the accept, the first request's headers must be complete within `headerTimeout`;
///   a later request's headers within `headerTimeout` of its first byte.
/// - A body must keep arriving: no gap longer than `idleTimeout` between its bytes.
/// - Between requests (keep-alive), no byte for `idleTimeout` closes the connection.
/// - While a request is being answered there is no deadline here (the RPC deadline bounds it).
struct HTTPConnectionDeadlines: Sendable {
    enum Phase: Equatable, Sendable {
        /// Waiting for a request's headers to be complete.
        case awaitingHead
        /// Headers read; the body is arriving.
        case readingBody
        /// The whole request is read; the answer is being made.
        case responding
        /// Keep-alive: every answer is written, no byte of the next request yet.
        case idle
    }

    let headerTimeout: TimeAmount
    let idleTimeout: TimeAmount
    private(set) var phase = Phase.awaitingHead
    /// When the connection is closed unless something moves it on; nil: no deadline.
    private(set) var deadline: NIODeadline?
    /// Requests whose headers arrived and whose answer has not ended.
    private var openRequests = 0

    init(acceptedAt now: NIODeadline, headerTimeout: TimeAmount, idleTimeout: TimeAmount) {
        self.headerTimeout = headerTimeout
        self.idleTimeout = idleTimeout
        self.deadline = now + headerTimeout
    }

    /// Bytes came from the client (before any parsing).
    mutating func bytesArrived(at now: NIODeadline) {
        switch phase {
        case .idle:
            phase = .awaitingHead
            deadline = now + headerTimeout
        case .readingBody:
            deadline = now + idleTimeout
        case .awaitingHead, .responding:
            break
        }
    }

    /// A request's headers are complete.
    mutating func headReceived(at now: NIODeadline) {
        openRequests += 1
        phase = .readingBody
        deadline = now + idleTimeout
    }

    /// A request's body is complete.
    mutating func requestEnded() {
        phase = .responding
        deadline = nil
    }

    /// An answer was written to its end.
    mutating func responseEnded(at now: NIODeadline) {
        openRequests = max(0, openRequests - 1)
        guard openRequests == 0, phase == .responding else { return }
        phase = .idle
        deadline = now + idleTimeout
    }

    func isExpired(at now: NIODeadline) -> Bool {
        deadline.map { now >= $0 } ?? false
    }
}

/// Counts the gateway's open HTTP connections against `AUTH_GATEWAY_MAX_CONNECTIONS`.
final class HTTPConnectionCount: Sendable {
    let limit: Int
    private let open = Atomic<Int>(0)

    init(limit: Int) {
        self.limit = limit
    }

    var current: Int { open.load(ordering: .relaxed) }

    /// Takes a place; false (and nothing taken) when every place is taken.
    func tryOpen() -> Bool {
        var current = open.load(ordering: .relaxed)
        while current < limit {
            let (exchanged, original) = open.compareExchange(
                expected: current,
                desired: current + 1,
                ordering: .relaxed
            )
            if exchanged { return true }
            current = original
        }
        return false
    }

    func closed() {
        open.subtract(1, ordering: .relaxed)
    }
}

/// One connection's deadline keeper: feeds ``HTTPConnectionDeadlines`` from the two handlers
/// and closes the channel when its deadline passes. Used on the channel's event loop only.
final class HTTPConnectionWatch {
    private var deadlines: HTTPConnectionDeadlines
    private let channel: any Channel
    private let logger: Logger
    private var timer: Scheduled<Void>?
    private var timerDeadline: NIODeadline?

    init(channel: any Channel, headerTimeout: TimeAmount, idleTimeout: TimeAmount, logger: Logger) {
        self.channel = channel
        self.logger = logger
        self.deadlines = HTTPConnectionDeadlines(
            acceptedAt: .now(),
            headerTimeout: headerTimeout,
            idleTimeout: idleTimeout
        )
        arm()
    }

    func bytesArrived() {
        deadlines.bytesArrived(at: .now())
        arm()
    }
    func headReceived() {
        deadlines.headReceived(at: .now())
        arm()
    }
    func requestEnded() { deadlines.requestEnded() }
    func responseEnded() {
        deadlines.responseEnded(at: .now())
        arm()
    }

    func stop() {
        timer?.cancel()
        timer = nil
        timerDeadline = nil
    }

    /// Keeps one timer, at or before the current deadline: a later deadline is checked when the
    /// timer fires, so bytes that move the deadline on cost no timer each.
    private func arm() {
        guard let deadline = deadlines.deadline else { return }
        if let scheduled = timerDeadline, scheduled <= deadline { return }
        timer?.cancel()
        timerDeadline = deadline
        let loopBound = NIOLoopBound(self, eventLoop: channel.eventLoop)
        timer = channel.eventLoop.scheduleTask(deadline: deadline) { loopBound.value.timerFired() }
    }

    private func timerFired() {
        timer = nil
        timerDeadline = nil
        guard deadlines.isExpired(at: .now()) else {
            arm()
            return
        }
        logger.debug("Closing an HTTP connection past its deadline", metadata: ["phase": "\(deadlines.phase)"])
        channel.close(promise: nil)
    }
}

/// First in the pipeline: every byte the client sends, before the HTTP decoder.
final class HTTPByteArrivalHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    private let watch: HTTPConnectionWatch

    init(watch: HTTPConnectionWatch) {
        self.watch = watch
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        watch.bytesArrived()
        context.fireChannelRead(data)
    }

    func channelInactive(context: ChannelHandlerContext) {
        watch.stop()
        context.fireChannelInactive()
    }
}

/// Closes its connection as soon as it is active: the gateway holds its most connections.
final class CloseWhenActiveHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { context.close(promise: nil) }
    }

    func channelActive(context: ChannelHandlerContext) {
        context.close(promise: nil)
    }
}

/// After the HTTP decoder: where requests begin and end, and where answers end.
final class HTTPRequestBoundaryHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart
    private let watch: HTTPConnectionWatch

    init(watch: HTTPConnectionWatch) {
        self.watch = watch
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head: watch.headReceived()
        case .end: watch.requestEnded()
        case .body: break
        }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if case .end = unwrapOutboundIn(data) { watch.responseEnded() }
        context.write(data, promise: promise)
    }
}

/// Hummingbird's HTTP/1.1 server with the gateway's connection limits (issue 19, item 8): the
/// header and idle deadlines of ``HTTPConnectionDeadlines``, and at most `maxConnections` open
/// connections (past it a new connection is closed at once).
struct GuardedHTTP1Channel: HTTPChannelHandler {
    typealias Value = HTTP1Channel.Value
    let responder: HTTPChannelHandler.Responder
    let headerTimeout: TimeAmount
    let idleTimeout: TimeAmount
    let connections: HTTPConnectionCount

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        let admitted = connections.tryOpen()
        let watch = NIOLoopBound(
            HTTPConnectionWatch(
                channel: channel,
                headerTimeout: headerTimeout,
                idleTimeout: idleTimeout,
                logger: logger
            ),
            eventLoop: channel.eventLoop
        )
        if admitted {
            let connections = self.connections
            channel.closeFuture.whenComplete { _ in connections.closed() }
        }
        do {
            if !admitted {
                // Set up like any other (a failed setup would end the server's accept loop), and
                // closed as soon as it is active (the initializer runs before registration).
                logger.debug("Closing a connection: AUTH_GATEWAY_MAX_CONNECTIONS reached")
                watch.value.stop()
                try channel.pipeline.syncOperations.addHandler(CloseWhenActiveHandler())
            }
            try channel.pipeline.syncOperations.addHandler(HTTPByteArrivalHandler(watch: watch.value))
        } catch {
            return channel.eventLoop.makeFailedFuture(error)
        }
        let http1 = HTTP1Channel(
            responder: responder,
            configuration: HTTP1Channel.Configuration(
                additionalChannelHandlers: [HTTPRequestBoundaryHandler(watch: watch.value)]
            )
        )
        return http1.setup(channel: channel, logger: logger)
    }

    func handle(value: Value, logger: Logger) async {
        await handleHTTP(asyncChannel: value, logger: logger)
    }
}

extension HTTPServerBuilder {
    /// HTTP/1.1 with the gateway's header and idle deadlines and connection cap.
    static func guardedHTTP1(headerTimeout: Duration, idleTimeout: Duration, maxConnections: Int) -> HTTPServerBuilder {
        let connections = HTTPConnectionCount(limit: maxConnections)
        return HTTPServerBuilder { responder in
            GuardedHTTP1Channel(
                responder: responder,
                headerTimeout: TimeAmount(headerTimeout),
                idleTimeout: TimeAmount(idleTimeout),
                connections: connections
            )
        }
    }
}
