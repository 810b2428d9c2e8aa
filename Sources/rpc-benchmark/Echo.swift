import AuthRPCNIO
import NIOCore
import NIOPosix

/// The ceiling: a length-prefixed TCP echo with no RPC layer. The server sends every frame
/// back as it is; the client matches replies to callers in order.
///
/// Two flavours: `plain` is the textbook NIO echo (the server writes each frame and flushes
/// once per read, as NIO's own EchoServer example does; the client writes and flushes each
/// request); `batched` also coalesces the client's writes exactly as the RPC transport does
/// (one flush per burst of submissions), so the difference to the RPC columns is the RPC
/// layer alone.
enum EchoMode: String, CaseIterable, Sendable {
    case plain
    case batched
}

struct EchoServer {
    let channel: any Channel
    var port: Int { channel.localAddress!.port! }

    static func start(port: Int = 0) async throws -> EchoServer {
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .childChannelOption(.tcpOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(EchoServerHandler())
                }
            }
            .bind(host: "127.0.0.1", port: port)
            .get()
        return EchoServer(channel: channel)
    }

    func close() async throws { try await channel.close() }
}

final class EchoServerHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer
    private var decoder = FrameDecoder(maxFrameSize: 1 << 20)
    private var wrote = false

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        decoder.append(unwrapInboundIn(data))
        while let frame = try? decoder.nextFrame() {
            var out = context.channel.allocator.buffer(capacity: frame.readableBytes + 4)
            out.writeInteger(UInt32(frame.readableBytes), endianness: .big)
            out.writeImmutableBuffer(frame)
            context.write(wrapOutboundOut(out), promise: nil)
            wrote = true
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        if wrote {
            wrote = false
            context.flush()
        }
    }
}

final class EchoClientHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer
    private let mode: EchoMode
    init(mode: EchoMode) { self.mode = mode }
    private var decoder = FrameDecoder(maxFrameSize: 1 << 20)
    private var waiting = CircularBuffer<CheckedContinuation<Void, any Error>>()
    private var context: ChannelHandlerContext?
    private var flushScheduled = false

    func handlerAdded(context: ChannelHandlerContext) { self.context = context }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        decoder.append(unwrapInboundIn(data))
        while (try? decoder.nextFrame()) != nil {
            waiting.popFirst()?.resume()
        }
    }

    func send(_ frame: ByteBuffer, continuation: CheckedContinuation<Void, any Error>) {
        guard let context else {
            continuation.resume(throwing: ChannelError.ioOnClosedChannel)
            return
        }
        waiting.append(continuation)
        if mode == .plain {
            context.writeAndFlush(wrapOutboundOut(frame), promise: nil)
            return
        }
        context.write(wrapOutboundOut(frame), promise: nil)
        if !flushScheduled {
            flushScheduled = true
            let loopBound = NIOLoopBound(self, eventLoop: context.eventLoop)
            context.eventLoop.execute {
                loopBound.value.flushScheduled = false
                loopBound.value.context?.flush()
            }
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        while let continuation = waiting.popFirst() {
            continuation.resume(throwing: ChannelError.ioOnClosedChannel)
        }
        self.context = nil
    }
}

struct EchoClient {
    let channel: any Channel
    let handler: NIOLoopBound<EchoClientHandler>

    static func connect(host: String = "127.0.0.1", port: Int, mode: EchoMode) async throws -> EchoClient {
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .channelOption(.tcpOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(EchoClientHandler(mode: mode))
                }
            }
            .connect(host: host, port: port)
            .get()
        let handler = try await channel.eventLoop.submit {
            NIOLoopBound(
                try channel.pipeline.syncOperations.handler(type: EchoClientHandler.self),
                eventLoop: channel.eventLoop
            )
        }.get()
        return EchoClient(channel: channel, handler: handler)
    }

    func roundTrip(_ frame: ByteBuffer) async throws {
        let handler = self.handler
        try await withCheckedThrowingContinuation { continuation in
            channel.eventLoop.execute {
                handler.value.send(frame, continuation: continuation)
            }
        }
    }

    func close() async throws { try await channel.close() }
}
