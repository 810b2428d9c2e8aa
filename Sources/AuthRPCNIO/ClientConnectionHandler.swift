import AuthProtobuf
import AuthRPC
import Logging
import NIOCore
import Synchronization

/// One open call on a client connection, as the connection handler keeps it.
final class PendingClientCall: @unchecked Sendable {
    // @unchecked: `continuation` is written once by the calling task before the call is
    // enqueued (under the submission queue's lock) and read on the event loop after it is
    // dequeued (under the same lock); every other property is only touched on the event loop.
    let call: ClientCall
    var continuation: UnsafeContinuation<[UInt8], any Error>?
    var callID: UInt64 = 0
    var deadline: NIODeadline?
    var cancelRequested = false
    var finished = false

    init(call: ClientCall) {
        self.call = call
    }

    func complete(_ result: Result<[UInt8], any Error>) {
        guard !finished else { return }
        finished = true
        continuation?.resume(with: result)
    }
}

/// Calls waiting to be started on a connection's event loop. Callers on any thread append;
/// only the first append of a batch schedules a drain, so a burst of calls costs one hop to
/// the event loop and one flush.
final class CallSubmissionQueue: Sendable {
    private let state = Mutex<[PendingClientCall]>([])

    /// Appends a call; true when the caller must schedule a drain on the event loop.
    func enqueue(_ call: PendingClientCall) -> Bool {
        state.withLock { calls in
            calls.append(call)
            return calls.count == 1
        }
    }

    func takeAll() -> [PendingClientCall] {
        state.withLock { calls in
            defer { calls = [] }
            return calls
        }
    }
}

/// Why a call must go to another connection without having been started.
struct RetryOnAnotherConnection: Error {}

/// The client end of one connection: answers the server's Challenge with Hello, checks the
/// server's proof in HelloAck, then multiplexes calls by call id.
final class ClientConnectionHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    enum Event: Sendable {
        case ready
        case goingAway
        case closed
    }

    private let signer: ServiceCredentialSigner
    private let expectedServer: String?
    /// The server's challenge and our answer, once sent (to check the HelloAck against).
    private var handshake: (challenge: Auth_Rpc_V1_Challenge, hello: Auth_Rpc_V1_Hello)?
    private let wallClock: @Sendable () -> Int64
    private let keepaliveInterval: TimeAmount
    private let onEvent: @Sendable (Event) -> Void
    private let readyPromise: EventLoopPromise<Void>
    private var logger: Logger

    let submissions = CallSubmissionQueue()
    private var machine = ClientConnectionStateMachine<PendingClientCall>(maxConcurrentCalls: 1000)
    private var deadlineTimer = EarliestDeadlineTimer()
    private var decoder: FrameDecoder
    private var context: ChannelHandlerContext?
    private var flushScheduled = false
    private var lastInboundAt = NIODeadline.now()
    private var keepaliveTask: RepeatedTask?
    /// The error of a refusing or error GoAway: open calls fail with it when the server closes.
    private var goAwayError: RPCError?
    private var pingOutstanding = false

    init(
        signer: ServiceCredentialSigner,
        expectedServer: String?,
        maxFrameSize: Int,
        keepaliveInterval: TimeAmount,
        wallClock: @escaping @Sendable () -> Int64,
        readyPromise: EventLoopPromise<Void>,
        logger: Logger,
        onEvent: @escaping @Sendable (Event) -> Void
    ) {
        self.signer = signer
        self.expectedServer = expectedServer
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
        // The server speaks first (Challenge); the Hello answers it.
        let loopBound = NIOLoopBound(self, eventLoop: context.eventLoop)
        keepaliveTask = context.eventLoop.scheduleRepeatedTask(
            initialDelay: keepaliveInterval,
            delay: keepaliveInterval
        ) { _ in
            loopBound.value.keepaliveTick()
        }
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        keepaliveTask?.cancel()
        deadlineTimer.cancel()
        let failure =
            goAwayError
            ?? RPCError(
                code: .unavailable,
                message: "The connection to the server was lost.",
                reason: RPCError.Reason.connectionLost
            )
        readyPromise.fail(failure)
        for call in machine.closed() {
            call.complete(.failure(failure))
        }
        onEvent(.closed)
        self.context = nil
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if isTLSError(error), goAwayError == nil {
            logger.warning("TLS handshake with the server failed", metadata: ["error": "\(error)"])
            goAwayError = RPCError(
                code: .unavailable,
                message: "TLS handshake with the server failed: \(error)",
                reason: RPCError.Reason.tlsHandshakeFailed
            )
        } else {
            logger.debug("Client connection error", metadata: ["error": "\(error)"])
        }
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
        case .challenge(let challenge):
            guard handshake == nil else {
                refuseServer(
                    RPCError(
                        code: .invalidArgument,
                        message: "The server sent a second Challenge.",
                        reason: RPCError.Reason.protocolViolation
                    ),
                    context: context
                )
                return
            }
            switch signer.hello(answering: challenge, expectedServer: expectedServer) {
            case .success(let hello):
                handshake = (challenge, hello)
                send(.init(kind: .hello(hello)), flush: true)
            case .failure(let error):
                refuseServer(error, context: context)
            }
        case .helloAck(let ack):
            guard let handshake else {
                refuseServer(
                    RPCError(
                        code: .invalidArgument,
                        message: "HelloAck before Challenge.",
                        reason: RPCError.Reason.protocolViolation
                    ),
                    context: context
                )
                return
            }
            if let error = signer.verifyAck(ack, hello: handshake.hello, challenge: handshake.challenge) {
                refuseServer(error, context: context)
                return
            }
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
            // A shutdown GoAway (UNAVAILABLE) lets started calls finish; any other code means the
            // server closes now and abandons them (docs/protocol.md §5).
            if refusal.code != .unavailable, refusal.code != .ok { goAwayError = refusal }
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

    /// The server failed the handshake (wrong service, no proof of the secret): fail with `error`.
    private func refuseServer(_ error: RPCError, context: ChannelHandlerContext) {
        logger.warning("Refused the server", metadata: ["reason": "\(error.reason)"])
        goAwayError = error
        readyPromise.fail(error)
        context.close(promise: nil)
    }

    /// Starts every submitted call, then flushes once. On the event loop.
    func drainSubmissions() {
        let calls = submissions.takeAll()
        guard let context else {
            for call in calls { call.complete(.failure(RetryOnAnotherConnection())) }
            return
        }
        var output = context.channel.allocator.buffer(capacity: 128 * calls.count)
        for call in calls where !call.finished {
            if call.cancelRequested {
                call.complete(.failure(RPCError.cancelledByCaller))
            } else if !startCall(call, into: &output) {
                call.complete(.failure(RetryOnAnotherConnection()))
            }
        }
        if output.readableBytes > 0 {
            context.writeAndFlush(wrapOutboundOut(output), promise: nil)
        }
    }

    /// Starts a call on this connection (written, not flushed). Returns false when the
    /// connection cannot take it (the caller tries another).
    private func startCall(_ call: PendingClientCall, into output: inout ByteBuffer) -> Bool {
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
            // Bounded so that neither the conversion nor the deadline below can overflow.
            let micros = min(max(timeout.microseconds, 1), Int64.max / 1000)
            request.timeoutUS = UInt64(micros)
            let due = NIODeadline.now() + .microseconds(micros)
            call.deadline = due
            let loopBound = NIOLoopBound(self, eventLoop: context.eventLoop)
            deadlineTimer.schedule(due, on: context.eventLoop) { loopBound.value.deadlineTimerFired() }
        }
        let writerIndex = output.writerIndex
        do {
            try output.writeFrame(.init(kind: .request(request)))
        } catch {
            output.moveWriterIndex(to: writerIndex)
            _ = machine.cancel(callID: callID)
            call.complete(
                .failure(
                    RPCError(
                        code: .invalidArgument,
                        message: "The request could not be encoded.",
                        reason: RPCError.Reason.malformedRequest
                    )
                )
            )
            return true
        }
        return true
    }

    /// The caller gave up (task cancelled): forget the call and tell the server.
    func cancel(_ call: PendingClientCall) {
        guard call.callID != 0 else {
            // Not started yet: the drain completes it.
            call.cancelRequested = true
            return
        }
        guard machine.cancel(callID: call.callID) != nil else { return }
        call.complete(.failure(RPCError.cancelledByCaller))
        send(.init(kind: .cancel(Auth_Rpc_V1_Cancel(callID: call.callID))), flush: true)
        closeIfDrained()
    }

    /// Fails every call whose deadline has passed, then re-arms for the next one.
    private func deadlineTimerFired() {
        deadlineTimer.fired()
        let now = NIODeadline.now()
        var next: NIODeadline?
        for (callID, call) in machine.openCalls {
            guard let due = call.deadline else { continue }
            if due <= now {
                _ = machine.cancel(callID: callID)
                call.complete(
                    .failure(
                        RPCError(
                            code: .deadlineExceeded,
                            message: "No response from the server before the deadline.",
                            reason: RPCError.Reason.deadlineExceeded
                        )
                    )
                )
                send(.init(kind: .cancel(Auth_Rpc_V1_Cancel(callID: callID))), flush: true)
            } else {
                next = min(next ?? due, due)
            }
        }
        if let next, let context {
            let loopBound = NIOLoopBound(self, eventLoop: context.eventLoop)
            deadlineTimer.schedule(next, on: context.eventLoop) { loopBound.value.deadlineTimerFired() }
        }
        closeIfDrained()
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

    /// Sends GOAWAY and closes once open calls are answered, cancelled or past their deadline
    /// (client shutdown, docs/protocol.md §5).
    func close() {
        guard let context, machine.state != .goingAway, machine.state != .closed else { return }
        send(
            .init(
                kind: .goAway(
                    Auth_Rpc_V1_GoAway(
                        lastCallID: machine.highestCallID,
                        code: .ok,
                        message: "Client closing.",
                        reason: RPCError.Reason.clientClosing
                    )
                )
            ),
            flush: true
        )
        if machine.closeRequested() { context.close(promise: nil) }
    }

    /// Closes a connection that is going away once its last call has ended.
    private func closeIfDrained() {
        if machine.isDrained { context?.close(promise: nil) }
    }

    @discardableResult
    private func send(_ frame: Auth_Rpc_V1_Frame, flush: Bool) -> Bool {
        guard let context else { return false }
        var buffer = context.channel.allocator.buffer(capacity: 64)
        do {
            try buffer.writeFrame(frame)
        } catch {
            logger.error("Could not encode a frame", metadata: ["error": "\(error)"])
            return false
        }
        if flush {
            context.writeAndFlush(wrapOutboundOut(buffer), promise: nil)
        } else {
            context.write(wrapOutboundOut(buffer), promise: nil)
        }
        return true
    }
}

extension RPCError {
    static let cancelledByCaller = RPCError(
        code: .cancelled,
        message: "The caller cancelled the call.",
        reason: RPCError.Reason.cancelled
    )
}
