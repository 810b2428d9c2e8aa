import BenchmarkHarness
import NIOCore
import NIOPosix

/// One plaintext HTTP/1.1 keep-alive connection to the gateway, one request at a time: what
/// each sign-in loop of ``SignInRun`` sends its requests on. A bare NIO pipeline rather than
/// async-http-client, whose pool, request state machine and tracing cost the load generator
/// more than the HTTP exchange itself; each request is written as one buffer and each answer
/// framed by ``HTTP1ResponseDecoder`` rather than NIO's HTTP codec, whose headers as strings
/// and three parts per message cost it a third of its CPU (docs/benchmarks.md, "The load
/// generator").
final class GatewayConnection: Sendable {
    /// The connection closed or failed before the answer was complete.
    struct Closed: Error {}

    /// Host and Content-Type, the same for every request on the connection.
    private let fixedHeaders: [(name: String, value: String)]
    private let channel: any Channel
    private let collector: NIOLoopBound<ResponseCollector>

    private init(host: String, port: Int, channel: any Channel, collector: NIOLoopBound<ResponseCollector>) {
        self.fixedHeaders = [("host", "\(host):\(port)"), ("content-type", "application/json")]
        self.channel = channel
        self.collector = collector
    }

    /// Connects on `eventLoop`; the future completes there.
    static func connect(host: String, port: Int, on eventLoop: any EventLoop) -> EventLoopFuture<GatewayConnection> {
        ClientBootstrap(group: eventLoop)
            .channelOption(.tcpOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(ByteToMessageHandler(HTTP1ResponseDecoder()))
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

    /// The event loop the connection lives on: call ``post(_:body:headers:then:)`` there.
    var eventLoop: any EventLoop { channel.eventLoop }

    /// What ``post(_:body:headers:then:)`` calls with the answer, on ``eventLoop``.
    typealias Completion = (Result<HTTP1Response, any Error>) -> Void

    /// POSTs `body` (JSON) to `path` with `headers` besides Host, Content-Type and Content-Length,
    /// and calls `completion` with the answer. Call it on ``eventLoop``, one request at a time;
    /// `completion` runs there. A callback rather than a future: a sign-in makes two requests,
    /// and a future (its allocation, its callback list, the runtime's look-up of its generic
    /// type) per step was a tenth of the load generator's CPU (docs/benchmarks.md, "Issue 24,
    /// thirteenth stop").
    func post(
        _ path: String,
        body: String,
        headers: [(name: String, value: String)] = [],
        then completion: @escaping Completion
    ) {
        channel.eventLoop.preconditionInEventLoop()
        var request = channel.allocator.buffer(capacity: 160 + path.utf8.count + body.utf8.count)
        HTTP1RequestWriter.write(
            method: "POST",
            target: path,
            headers: fixedHeaders + headers,
            body: body,
            into: &request
        )
        collector.value.expect(completion)
        channel.writeAndFlush(request, promise: nil)
    }

    func close() {
        channel.close(promise: nil)
    }
}

/// Hands each response to the completion of the request it answers.
private final class ResponseCollector: ChannelInboundHandler {
    typealias InboundIn = HTTP1Response

    private var waiting: GatewayConnection.Completion?

    func expect(_ completion: @escaping GatewayConnection.Completion) {
        precondition(waiting == nil, "one request at a time on a GatewayConnection")
        waiting = completion
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let response = unwrapInboundIn(data)
        let completion = waiting
        waiting = nil
        completion?(.success(response))
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
        let completion = waiting
        waiting = nil
        completion?(.failure(error))
    }
}
