import AuthProtobuf
import AuthRPC
import Logging
import NIOCore

/// One open call on a client connection, as the connection handler keeps it.
final class PendingClientCall: @unchecked Sendable {
    // @unchecked: every stored property is read and written only on the connection's event
    // loop (the handler's methods), after the object is handed over in `startCall`.
    let call: ClientCall
    let continuation: CheckedContinuation<[UInt8], any Error>
    var callID: UInt64 = 0
    var timer: Scheduled<Void>?
    var finished = false

    init(call: ClientCall, continuation: CheckedContinuation<[UInt8], any Error>) {
        self.call = call
        self.continuation = continuation
    }

    func complete(_ result: Result<[UInt8], any Error>) {
        guard !finished else { return }
        finished = true
        timer?.cancel()
        continuation.resume(with: result)
    }
}

/// Why a call must go to another connection without having been started.
struct RetryOnAnotherConnection: Error {}

/// The client end of one connection: sends Hello, then multiplexes calls by call id.
final class ClientConnectionHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    enum Event: Sendable {
        case ready
        case goingAway
        case closed
    }

    private let signer: ServiceCredentialSigner
    private let wallClock: @Sendable () -> Int64
    private let keepaliveInterval: TimeAmount
    private let onEvent: @Sendable (Event) -> Void
    private let readyPromise: EventLoopPromise<Void>
    private var logger: Logger

    private var machine = ClientConnectionStateMachine<PendingClientCall>(maxConcurrentCalls: 1000)
    private var decoder: FrameDecoder
    private var context: ChannelHandlerContext?
    private var flushScheduled = false
    private var lastInboundAt = NIODeadline.now()
    private var keepaliveTask: RepeatedTask?
    private var pingOutstanding = false

    init(
        signer: ServiceCredentialSigner,
        maxFrameSize: Int,
        keepaliveInterval: TimeAmount,
        wallClock: @escaping @Sendable () -> Int64,
        readyPromise: EventLoopPromise<Void>,
        logger: Logger,
        onEvent: @escaping @Sendable (Event) -> Void
    ) {
        self.signer = signer
        self.decoder = FrameDecoder(maxFrameSize: maxFrameSize)
        self.keepaliveInterval = keepaliveInterval
        self.wallClock = wallClock
        self.readyPromise = readyPromise
        self.logger = logger
        self.onEvent = onEvent
    }

    var hasCapacity: Bool { machine.hasCapacity }
    var openCallCount: Int { machine.openCallCount }

    func channelActive(context: ChannelHandlerContext) {
        self.context = context
        send(.init(kind: .hello(signer.hello(nowUnixMS: wallClock()))), flush: true)
        let loopBound = NIOLoopBound(self, eventLoop: context.eventLoop)
        keepaliveTask = context.eventLoop.scheduleRepeatedTask(initialDelay: keepaliveInterval, delay: keepaliveInterval) { _ in
            loopBound.value.keepaliveTick()
        }
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        keepaliveTask?.cancel()
        let unavailable = RPCError(code: .unavailable, message: "The connection to the server was lost.", reason: "connection_lost")
        readyPromise.fail(unavailable)
        for call in machine.closed() {
            call.complete(.failure(unavailable))
        }
        onEvent(.closed)
        self.context = nil
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        logger.debug("Client connection error", metadata: ["error": "\(error)"])
        context.close(promise: nil)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        decoder.append(unwrapInboundIn(data))
        lastInboundAt = .now()
        pingOutstanding = false
        while true {
            let frame: Auth_Rpc_V1_Frame
            do {
                guard let body = try decoder.nextFrame() else { return }
                frame = try Auth_Rpc_V1_Frame(frameBody: body)
            } catch {
                logger.warning("Closing client connection: bad frame from server", metadata: ["error": "\(error)"])
                context.close(promise: nil)
                return
            }
            handle(frame, context: context)
        }
    }

    private func handle(_ frame: Auth_Rpc_V1_Frame, context: ChannelHandlerContext) {
        switch frame.kind {
        case .helloAck(let ack):
            if machine.helloAckReceived(ack) {
                readyPromise.succeed()
                onEvent(.ready)
            }
        case .response(let response):
            guard let call = machine.responseReceived(callID: response.callID) else { return }
            if let status = response.status, let error = RPCError(status: status) {
                call.complete(.failure(error))
            } else {
                call.complete(.success(response.payload))
            }
            if machine.isDrained { context.close(promise: nil) }
        case .goAway(let goAway):
            let refusal = RPCError(
                code: RPCError.Code(rawValue: Int(goAway.code.rawValue)),
                message: goAway.message.isEmpty ? "The server closed the connection." : goAway.message,
                reason: goAway.reason.isEmpty ? "going_away" : goAway.reason
            )
            readyPromise.fail(refusal)
            for call in machine.goAwayReceived(lastCallID: goAway.lastCallID) {
                call.complete(.failure(RetryOnAnotherConnection()))
            }
            onEvent(.goingAway)
            if machine.openCallCount == 0 { context.close(promise: nil) }
        case .ping(let ping):
            send(.init(kind: .pong(Auth_Rpc_V1_Pong(payload: ping.payload))), flush: true)
        case .pong:
            break
        case .hello, .request, .cancel, nil:
            logger.warning("Closing client connection: the server sent a frame only clients send")
            context.close(promise: nil)
        }
    }

    /// Starts a call on this connection. Must be called on the event loop. Returns false when
    /// the connection cannot take it (the caller tries another).
    func startCall(_ call: PendingClientCall) -> Bool {
        guard let context else { return false }
        guard case .send(let callID) = machine.startCall(call) else { return false }
        call.callID = callID
        var request = Auth_Rpc_V1_Request(
            callID: callID,
            method: call.call.method.path,
            metadata: call.call.metadata.proto,
            payload: call.call.payload
        )
        if let timeout = call.call.timeout {
            let micros = max(timeout.components.seconds * 1_000_000 + timeout.components.attoseconds / 1_000_000_000_000, 1)
            request.timeoutUS = UInt64(micros)
            let loopBound = NIOLoopBound(self, eventLoop: context.eventLoop)
            call.timer = context.eventLoop.scheduleTask(in: .microseconds(micros)) {
                loopBound.value.callTimedOut(call)
            }
        }
        send(.init(kind: .request(request)), flush: false)
        scheduleFlush()
        return true
    }

    /// The caller gave up (task cancelled): forget the call and tell the server.
    func cancel(_ call: PendingClientCall) {
        guard call.callID != 0, machine.cancel(callID: call.callID) != nil else { return }
        call.complete(.failure(RPCError(code: .cancelled, message: "The caller cancelled the call.", reason: "cancelled")))
        send(.init(kind: .cancel(Auth_Rpc_V1_Cancel(callID: call.callID))), flush: true)
    }

    private func callTimedOut(_ call: PendingClientCall) {
        guard machine.cancel(callID: call.callID) != nil else { return }
        call.complete(.failure(RPCError(
            code: .deadlineExceeded,
            message: "No response from the server before the deadline.",
            reason: "deadline_exceeded"
        )))
        send(.init(kind: .cancel(Auth_Rpc_V1_Cancel(callID: call.callID))), flush: true)
    }

    private func keepaliveTick() {
        guard let context else { return }
        let silence = NIODeadline.now() - lastInboundAt
        if pingOutstanding, silence >= keepaliveInterval * 2 {
            logger.warning("Closing client connection: no answer to keepalive ping")
            context.close(promise: nil)
        } else if silence >= keepaliveInterval, !pingOutstanding {
            pingOutstanding = true
            send(.init(kind: .ping(Auth_Rpc_V1_Ping(payload: UInt64(wallClock())))), flush: true)
        }
    }

    /// Sends GOAWAY and closes once open calls are answered (client shutdown).
    func close() {
        guard let context else { return }
        send(.init(kind: .goAway(Auth_Rpc_V1_GoAway(lastCallID: 0, code: .ok, message: "Client closing."))), flush: true)
        context.close(promise: nil)
    }

    private func scheduleFlush() {
        guard !flushScheduled, let context else { return }
        flushScheduled = true
        let loopBound = NIOLoopBound(self, eventLoop: context.eventLoop)
        context.eventLoop.execute {
            let handler = loopBound.value
            handler.flushScheduled = false
            handler.context?.flush()
        }
    }

    private func send(_ frame: Auth_Rpc_V1_Frame, flush: Bool) {
        guard let context else { return }
        var buffer = context.channel.allocator.buffer(capacity: 64)
        do {
            try buffer.writeFrame(frame)
        } catch {
            logger.error("Could not encode a frame", metadata: ["error": "\(error)"])
            return
        }
        if flush {
            context.writeAndFlush(wrapOutboundOut(buffer), promise: nil)
        } else {
            context.write(wrapOutboundOut(buffer), promise: nil)
        }
    }
}
