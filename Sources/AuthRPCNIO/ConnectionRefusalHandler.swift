import AuthProtobuf
import AuthRPC
import NIOCore

/// Stands in for ``ServerConnectionHandler`` on a connection the server does not take (too
/// many connections): sends one GOAWAY with the refusal and closes, reading nothing.
final class ConnectionRefusalHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let error: RPCError
    private var sent = false

    init(_ error: RPCError) {
        self.error = error
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { refuse(context: context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        refuse(context: context)
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {}

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }

    private func refuse(context: ChannelHandlerContext) {
        guard !sent else { return }
        sent = true
        var buffer = context.channel.allocator.buffer(capacity: 128)
        _ = try? buffer.writeFrame(
            Auth_Rpc_V1_Frame(
                kind: .goAway(
                    Auth_Rpc_V1_GoAway(
                        lastCallID: 0,
                        code: Auth_Rpc_V1_StatusCode(rawValue: Int32(error.code.rawValue)),
                        message: error.message,
                        reason: error.reason
                    )
                )
            )
        )
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(buffer)).whenComplete { _ in channel.close(promise: nil) }
    }
}
