import AuthProtobuf
import AuthRPC
import AuthTestSupport
import NIOCore
import NIOPosix
import Testing

@testable import AuthRPCNIO

/// A scripted server: sends a Challenge, accepts the Hello with a HelloAck that proves the
/// secret, then follows its script.
final class ScriptedServerHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    enum Script {
        /// Answers the first Request with an error GoAway and closes, as a server does on a
        /// protocol error.
        case errorGoAwayAtFirstRequest
        /// Goes away right after the handshake, as a server that begins to shut down while a
        /// client connects: the HelloAck and a shutdown GoAway in one write, then the close.
        case goAwayAfterHandshake
        /// Answers every Request with an empty success.
        case answerEveryRequest
    }

    private let script: Script
    private var decoder = FrameDecoder(maxFrameSize: 1 << 20)
    private let verifier = ServiceCredentialVerifier(serverName: "scripted", secret: testSecret)
    private var challenge = Auth_Rpc_V1_Challenge()

    init(_ script: Script) { self.script = script }

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
            switch (frame.kind, script) {
            case (.hello(let hello), _):
                let mac = (try? verifier.verify(hello, challenge: challenge, peer: .none).get())?.ackMAC ?? []
                _ = try? out.writeFrame(
                    .init(
                        kind: .helloAck(
                            Auth_Rpc_V1_HelloAck(protocolVersion: rpcProtocolVersion, service: "scripted", mac: mac)
                        )
                    )
                )
                guard case .goAwayAfterHandshake = script else {
                    context.writeAndFlush(wrapOutboundOut(out), promise: nil)
                    continue
                }
                let goAway = Auth_Rpc_V1_GoAway(
                    lastCallID: 0,
                    code: .unavailable,
                    message: "The server is shutting down.",
                    reason: "going_away"
                )
                writeAndClose(.init(kind: .goAway(goAway)), after: out, context: context)
            case (.request(let request), .errorGoAwayAtFirstRequest):
                let goAway = Auth_Rpc_V1_GoAway(
                    lastCallID: request.callID,
                    code: .invalidArgument,
                    message: "scripted protocol error",
                    reason: "protocol_violation"
                )
                writeAndClose(.init(kind: .goAway(goAway)), after: out, context: context)
            case (.request(let request), _):
                _ = try? out.writeFrame(.init(kind: .response(Auth_Rpc_V1_Response(callID: request.callID))))
                context.writeAndFlush(wrapOutboundOut(out), promise: nil)
            default:
                break
            }
        }
    }

    /// Writes `frame` behind what `output` holds, in one write, then closes.
    private func writeAndClose(_ frame: Auth_Rpc_V1_Frame, after output: ByteBuffer, context: ChannelHandlerContext) {
        var output = output
        _ = try? output.writeFrame(frame)
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(output)).whenComplete { _ in channel.close(promise: nil) }
    }
}

@Suite struct ClientConnectionHandlerTests {
    @Test func openCallsFailWithTheCodeOfAnErrorGoAway() async throws {
        let server = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(ScriptedServerHandler(.errorGoAwayAtFirstRequest))
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

extension ClientConnectionHandlerTests {
    /// The connection goes away in the read that makes it ready. The slot must not keep it as
    /// its ready connection: when the ready callback ran on another event loop after the
    /// handler had seen the GoAway and the close, it did, for good, and every call failed with
    /// `no_connection` without another connect.
    @Test func aConnectionThatGoesAwayAsItBecomesReadyIsReplaced() async throws {
        // How many connections the scripted server accepted.
        let connections = Locked(0)
        let server = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .childChannelInitializer { channel in
                let first = connections.withLock {
                    $0 += 1
                    return $0 == 1
                }
                return channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(
                        ScriptedServerHandler(first ? .goAwayAfterHandshake : .answerEveryRequest)
                    )
                }
            }
            .bind(host: "127.0.0.1", port: 0)
            .get()
        // Three event loops, as a machine with three cores or more has: the old code took the
        // connection's loop and its two promises' loops one after another from the group, which
        // with the two loops of a two-core machine made the ready promise's loop the
        // connection's by chance, and the race never showed.
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 3)
        let transport = TCPClientTransport(
            configuration: RPCClientConfiguration(
                addresses: [RPCAddress(host: "127.0.0.1", port: server.localAddress!.port!)],
                serviceName: "test-client",
                secret: testSecret,
                initialBackoff: .milliseconds(20),
                maxBackoff: .milliseconds(200)
            ),
            eventLoopGroup: group,
            logger: quietLogger()
        )
        let client = RPCClient(transport: transport, callerService: "test-client", defaultTimeout: .seconds(60))
        // The scripted success is an empty HealthResponse: status 0.
        #expect(try await client.echo(7) == 0)
        #expect(connections.withLock { $0 } == 2)
        await transport.shutdown()
        try await server.close()
        try await group.shutdownGracefully()
    }
}
