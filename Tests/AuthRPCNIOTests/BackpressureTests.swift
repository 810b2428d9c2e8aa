import AuthRPC
import NIOCore
import NIOEmbedded
import Testing

@testable import AuthRPCNIO

/// Counts the `read` requests that reach the socket end of the pipeline.
final class ReadCounter: ChannelOutboundHandler {
    typealias OutboundIn = Any
    var reads = 0

    func read(context: ChannelHandlerContext) {
        reads += 1
        context.read()
    }
}

@Suite struct BackpressureTests {
    /// While the connection's writes cannot go out (the peer does not read), the server asks
    /// the socket for no more input; when they can, reading resumes.
    @Test func serverStopsReadingWhileItsWritesCannotGoOut() throws {
        let channel = EmbeddedChannel()
        let counter = ReadCounter()
        try channel.pipeline.syncOperations.addHandler(counter)
        try channel.pipeline.syncOperations.addServerConnectionHandlers(
            ServerConnectionHandler(
                router: RPCRouter(),
                verifier: ServiceCredentialVerifier(serverName: "test-server", secret: testSecret),
                peerCertificateNames: nil,
                limits: ConnectionLimits(),
                serviceName: "test-server",
                logger: quietLogger()
            )
        )
        channel.read()
        #expect(counter.reads == 1)

        channel.isWritable = false
        channel.pipeline.fireChannelWritabilityChanged()
        channel.read()
        channel.read()
        #expect(counter.reads == 1)

        channel.isWritable = true
        channel.pipeline.fireChannelWritabilityChanged()
        #expect(counter.reads == 2)
        channel.read()
        #expect(counter.reads == 3)
        _ = try? channel.finish()
    }
}
