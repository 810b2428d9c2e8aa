import AuthProtobuf
import AuthRPC
import NIOCore
import NIOPosix
import Testing

@testable import AuthRPCNIO

/// A scripted server: sends a Challenge, accepts the Hello, then answers the first Request with an error GoAway and
/// closes, as a server does on a protocol error.
final class ErrorGoAwayServerHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer
    private var decoder = FrameDecoder(maxFrameSize: 1 << 20)
    private let verifier = ServiceCredentialVerifier(serverName: "scripted", secret: testSecret)
    private var challenge = Auth_Rpc_V1_Challenge()

    func channelActive(context: ChannelHandlerContext) {
        challenge = verifier.challenge()
        var out = context.channel.allocator.buffer(capacity: 64)
        _ = try? out.writeFrame(.init(kind: .challenge(challenge)))
        context.writeAndFlush(wrapOutboundOut(out), promise: nil)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        decoder.append(unwrapInboundIn(data))
        while let body = try? decoder.nextFrame(), let frame = try? Auth_Rpc_V1_Frame(frameBody: body) {
            var out = context.channel.allocator.buffer(capacity: 64)
            switch frame.kind {
            case .hello(let hello):
                let mac = (try? verifier.verify(hello, challenge: challenge, peer: .none).get())?.ackMAC ?? []
                _ = try? out.writeFrame(
                    .init(
                        kind: .helloAck(
                            Auth_Rpc_V1_HelloAck(protocolVersion: rpcProtocolVersion, service: "scripted", mac: mac)
                        )
                    )
                )
                context.writeAndFlush(wrapOutboundOut(out), promise: nil)
            case .request(let request):
                _ = try? out.writeFrame(
                    .init(
                        kind: .goAway(
                            Auth_Rpc_V1_GoAway(
                                lastCallID: request.callID,
                                code: .invalidArgument,
                                message: "scripted protocol error",
                                reason: "protocol_violation"
                            )
                        )
                    )
                )
                let channel = context.channel
                context.writeAndFlush(wrapOutboundOut(out)).whenComplete { _ in channel.close(promise: nil) }
            default:
                break
            }
        }
    }
}

@Suite struct ClientConnectionHandlerTests {
    @Test func openCallsFailWithTheCodeOfAnErrorGoAway() async throws {
        let server = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(ErrorGoAwayServerHandler())
                }
            }
            .bind(host: "127.0.0.1", port: 0)
            .get()
        let (client, transport) = makeClient(port: server.localAddress!.port!)
        let error = await rpcError { _ = try await client.echo(1) }
        #expect(error?.code == .invalidArgument)
        #expect(error?.reason == "protocol_violation")
        await transport.shutdown()
        try await server.close()
    }
}
