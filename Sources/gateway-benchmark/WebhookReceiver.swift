import ArgumentParser
import AuthCrypto
import AuthText
import NIOCore
import NIOHTTP1
import NIOPosix

/// The webhook otp-dispatch delivers codes to: checks `X-Auth-Signature` (HMAC-SHA256 of the
/// body with the shared secret) and hands each code to the ``CodeMailbox``.
///
/// A bare NIO HTTP/1.1 server answering on the event loop that read the request: the work per
/// delivery (an HMAC, a small JSON parse, a dictionary lookup) is less than a hop to a task
/// would cost, and the load generator's own CPU is what hides the system's headroom
/// (docs/benchmarks.md, "The load generator"). Anything but `POST /otp` gets 404.
struct WebhookReceiver {
    let channel: any Channel

    /// Largest body accepted; larger requests get 413 and the connection closes.
    static let maximumBodySize = 1 << 16

    static func start(port: Int, secret: String, mailbox: CodeMailbox) async throws -> WebhookReceiver {
        let hmac = HMACSHA256(key: Array(secret.utf8))
        do {
            let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                .childChannelOption(.tcpOption(.tcp_nodelay), value: 1)
                .childChannelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: true)
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

/// One connection's requests, one at a time (the server pipeline holds back pipelined ones).
private final class WebhookHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let hmac: HMACSHA256
    private let mailbox: CodeMailbox
    private var head: HTTPRequestHead?
    private var body: [UInt8] = []
    private var tooLarge = false

    init(hmac: HMACSHA256, mailbox: CodeMailbox) {
        self.hmac = hmac
        self.mailbox = mailbox
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            self.head = head
            self.body.removeAll(keepingCapacity: true)
            self.tooLarge = false
        case .body(let part):
            guard !tooLarge else { return }
            guard body.count + part.readableBytes <= WebhookReceiver.maximumBodySize else {
                tooLarge = true
                return
            }
            body.append(contentsOf: part.readableBytesView)
        case .end:
            guard let head else { return }
            self.head = nil
            let status = tooLarge ? .payloadTooLarge : answer(head)
            respond(context: context, status: status, keepAlive: head.isKeepAlive && !tooLarge)
        }
    }

    /// Checks the request and delivers its code; the status to answer with.
    private func answer(_ head: HTTPRequestHead) -> HTTPResponseStatus {
        guard head.method == .POST, head.uri == "/otp" else { return .notFound }
        guard WebhookSignature.isValid(head.headers.first(name: WebhookSignature.headerName), for: body, signer: hmac)
        else { return .unauthorized }
        guard case .object(let message)? = try? JSONValue.parse(body),
            let to = message["to"]?.stringValue, let code = message["code"]?.stringValue
        else {
            return .badRequest
        }
        mailbox.deliver(destination: to, code: code)
        return .ok
    }

    private func respond(context: ChannelHandlerContext, status: HTTPResponseStatus, keepAlive: Bool) {
        var headers = HTTPHeaders([("content-length", "0")])
        if !keepAlive { headers.add(name: "connection", value: "close") }
        context.write(
            wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: status, headers: headers))),
            promise: nil
        )
        let written = context.writeAndFlush(wrapOutboundOut(.end(nil)))
        if !keepAlive { written.assumeIsolated().whenComplete { _ in context.close(promise: nil) } }
    }
}
