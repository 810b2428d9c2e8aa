import NIOCore
import NIOHTTP1
import NIOPosix

/// One plaintext HTTP/1.1 keep-alive connection to the gateway, one request at a time: what
/// each sign-in loop of ``SignInRun`` sends its requests on. A bare NIO pipeline rather than
/// async-http-client, whose pool, request state machine and tracing cost the load generator
/// more than the HTTP exchange itself (docs/benchmarks.md, "The load generator").
final class GatewayConnection: Sendable {
    struct Response: Sendable {
        var status: HTTPResponseStatus
        var body: ByteBuffer
    }

    /// The connection closed or failed before the answer was complete.
    struct Closed: Error {}

    let host: String
    let port: Int
    private let channel: any Channel
    private let collector: NIOLoopBound<ResponseCollector>

    private init(host: String, port: Int, channel: any Channel, collector: NIOLoopBound<ResponseCollector>) {
        self.host = host
        self.port = port
        self.channel = channel
        self.collector = collector
    }

    /// Connects on `eventLoop`; the future completes there.
    static func connect(host: String, port: Int, on eventLoop: any EventLoop) -> EventLoopFuture<GatewayConnection> {
        ClientBootstrap(group: eventLoop)
            .channelOption(.tcpOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHTTPClientHandlers()
                    try channel.pipeline.syncOperations.addHandler(ResponseCollector())
                }
            }
            .connect(host: host, port: port)
            .flatMapThrowing { channel in
                let collector = NIOLoopBound(
                    try channel.pipeline.syncOperations.handler(type: ResponseCollector.self),
                    eventLoop: channel.eventLoop
                )
                return GatewayConnection(host: host, port: port, channel: channel, collector: collector)
            }
    }

    var isActive: Bool { channel.isActive }

    /// The event loop the connection lives on: call ``post(_:body:headers:)`` there.
    var eventLoop: any EventLoop { channel.eventLoop }

    /// POSTs `body` (JSON) to `path` with `headers` besides Host, Content-Type and Content-Length.
    /// Call it on ``eventLoop``, one request at a time; the future completes there.
    func post(_ path: String, body: String, headers: [(String, String)] = []) -> EventLoopFuture<Response> {
        channel.eventLoop.preconditionInEventLoop()
        var head = HTTPRequestHead(version: .http1_1, method: .POST, uri: path)
        head.headers.reserveCapacity(4 + headers.count)
        head.headers.add(name: "host", value: "\(host):\(port)")
        head.headers.add(name: "content-type", value: "application/json")
        head.headers.add(name: "content-length", value: "\(body.utf8.count)")
        for (name, value) in headers { head.headers.add(name: name, value: value) }
        let promise = channel.eventLoop.makePromise(of: Response.self)
        collector.value.expect(promise)
        channel.write(HTTPClientRequestPart.head(head), promise: nil)
        channel.write(HTTPClientRequestPart.body(.byteBuffer(channel.allocator.buffer(string: body))), promise: nil)
        channel.writeAndFlush(HTTPClientRequestPart.end(nil), promise: nil)
        return promise.futureResult
    }

    func close() {
        channel.close(promise: nil)
    }
}

/// Gathers one response at a time and completes the promise of the request it answers.
private final class ResponseCollector: ChannelInboundHandler {
    typealias InboundIn = HTTPClientResponsePart

    private var waiting: EventLoopPromise<GatewayConnection.Response>?
    private var status: HTTPResponseStatus = .ok
    private var body: ByteBuffer?

    func expect(_ promise: EventLoopPromise<GatewayConnection.Response>) {
        precondition(waiting == nil, "one request at a time on a GatewayConnection")
        waiting = promise
        body = nil
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            status = head.status
        case .body(var part):
            if body == nil {
                body = part
            } else {
                body!.writeBuffer(&part)
            }
        case .end:
            let promise = waiting
            waiting = nil
            promise?.succeed(.init(status: status, body: body ?? context.channel.allocator.buffer(capacity: 0)))
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        fail(GatewayConnection.Closed())
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        fail(error)
        context.close(promise: nil)
    }

    private func fail(_ error: any Error) {
        let promise = waiting
        waiting = nil
        promise?.fail(error)
    }
}
