import AuthProtobuf
import AuthRPC
import NIOCore
import NIOPosix

@testable import AuthRPCNIO

/// A server that does not hold the secret but acts like one: sends a Challenge and answers any
/// Hello with a HelloAck carrying `ackMAC`. For testing that clients check the server's proof.
final class FakeServerHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    let ackMAC: [UInt8]
    var decoder = FrameDecoder(maxFrameSize: 1 << 20)

    init(ackMAC: [UInt8]) { self.ackMAC = ackMAC }

    func channelActive(context: ChannelHandlerContext) {
        let challenge = ServiceCredentialVerifier(serverName: "test-server", secret: nil).challenge()
        write(.init(kind: .challenge(challenge)), context: context)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        decoder.append(unwrapInboundIn(data))
        while let body = try? decoder.nextFrame(), let frame = try? Auth_Rpc_V1_Frame(frameBody: body) {
            if case .hello = frame.kind {
                write(
                    .init(
                        kind: .helloAck(
                            Auth_Rpc_V1_HelloAck(
                                protocolVersion: rpcProtocolVersion,
                                service: "test-server",
                                maxFrameSize: 1 << 20,
                                maxConcurrentCalls: 10,
                                idleTimeoutMS: 60_000,
                                mac: ackMAC
                            )
                        )
                    ),
                    context: context
                )
            }
        }
    }

    private func write(_ frame: Auth_Rpc_V1_Frame, context: ChannelHandlerContext) {
        var buffer = context.channel.allocator.buffer(capacity: 128)
        _ = try? buffer.writeFrame(frame)
        context.writeAndFlush(wrapOutboundOut(buffer), promise: nil)
    }
}

func withFakeServer(ackMAC: [UInt8], _ body: (Int) async throws -> Void) async throws {
    let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
        .childChannelInitializer { channel in
            channel.eventLoop.makeCompletedFuture {
                try channel.pipeline.syncOperations.addHandler(FakeServerHandler(ackMAC: ackMAC))
            }
        }
        .bind(host: "127.0.0.1", port: 0)
        .get()
    do {
        try await body(channel.localAddress!.port!)
    } catch {
        try? await channel.close()
        throw error
    }
    try await channel.close()
}
