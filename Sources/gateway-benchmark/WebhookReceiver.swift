import ArgumentParser
import AuthCrypto
import AuthText
import BenchmarkHarness
import NIOCore
import NIOHTTP1
import NIOPosix

/// The webhook otp-dispatch delivers codes to: checks `X-Auth-Signature` (HMAC-SHA256 of the
/// body with the shared secret) and hands each code to the ``CodeMailbox``.
///
/// A bare NIO HTTP/1.1 server answering on the event loop that read the request: the work per
/// delivery (an HMAC, a small JSON parse, a dictionary lookup) is less than a hop to a task
/// would cost, and the load generator's own CPU is what hides the system's headroom
/// (docs/benchmarks.md, "The load generator"); for the same reason requests are framed by
/// ``HTTP1RequestDecoder`` rather than NIO's HTTP codec. Anything but `POST /otp` gets 404; a
/// request it cannot frame gets 400 (413 for a body over ``maximumBodySize``, 431 for a head
/// over 16 KiB) and the connection closes.
struct WebhookReceiver {
    let channel: any Channel

    /// Largest body accepted.
    static let maximumBodySize = 1 << 16

    static func start(
        port: Int,
        secret: String,
        mailbox: CodeMailbox,
        on group: any EventLoopGroup
    ) async throws -> WebhookReceiver {
        let hmac = HMACSHA256(key: Array(secret.utf8))
        do {
            let channel = try await ServerBootstrap(group: group)
                .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                .childChannelOption(.tcpOption(.tcp_nodelay), value: 1)
                .childChannelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        let decoder = HTTP1RequestDecoder(
                            keeping: [WebhookHandler.signatureHeader],
                            maximumBodySize: maximumBodySize
                        )
                        try channel.pipeline.syncOperations.addHandler(ByteToMessageHandler(decoder))
                        try channel.pipeline.syncOperations.addHandler(WebhookHandler(hmac: hmac, mailbox: mailbox))
                    }
                }
                .bind(host: "127.0.0.1", port: port)
                .get()
            return WebhookReceiver(channel: channel)
        } catch {
            throw ValidationError("the webhook receiver on port \(port) did not start: \(error)")
        }
    }

    func stop() {
        channel.close(promise: nil)
    }
}

/// One connection's requests, answered in the order they come.
private final class WebhookHandler: ChannelInboundHandler {
    typealias InboundIn = HTTP1Request
    typealias OutboundOut = ByteBuffer

    static let signatureHeader = WebhookSignature.headerName.lowercased()

    private let hmac: HMACSHA256
    private let mailbox: CodeMailbox

    init(hmac: HMACSHA256, mailbox: CodeMailbox) {
        self.hmac = hmac
        self.mailbox = mailbox
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let request = unwrapInboundIn(data)
        respond(context: context, status: answer(request), keepAlive: request.keepAlive)
    }

    /// A request that could not be framed is answered, then the connection closes; any other
    /// error closes it.
    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        guard let framing = error as? HTTP1FramingError else {
            context.close(promise: nil)
            return
        }
        let status: HTTPResponseStatus =
            switch framing {
            case .bodyTooLarge: .payloadTooLarge
            case .headTooLarge: .requestHeaderFieldsTooLarge
            default: .badRequest
            }
        respond(context: context, status: status, keepAlive: false)
    }

    /// Checks the request and delivers its code; the status to answer with.
    private func answer(_ request: HTTP1Request) -> HTTPResponseStatus {
        guard request.method == "POST", request.target == "/otp" else { return .notFound }
        let body = Array(request.body.readableBytesView)
        guard WebhookSignature.isValid(request.headers[Self.signatureHeader], for: body, signer: hmac) else {
            return .unauthorized
        }
        guard case .object(let message)? = try? JSONValue.parse(body),
            let to = message["to"]?.stringValue, let code = message["code"]?.stringValue
        else {
            return .badRequest
        }
        mailbox.deliver(destination: to, code: code)
        return .ok
    }

    private func respond(context: ChannelHandlerContext, status: HTTPResponseStatus, keepAlive: Bool) {
        var response = context.channel.allocator.buffer(capacity: 96)
        response.writeString("HTTP/1.1 \(status.code) \(status.reasonPhrase)\r\ncontent-length: 0\r\n")
        response.writeString(keepAlive ? "\r\n" : "connection: close\r\n\r\n")
        let written = context.writeAndFlush(wrapOutboundOut(response))
        if !keepAlive { written.assumeIsolated().whenComplete { _ in context.close(promise: nil) } }
    }
}
