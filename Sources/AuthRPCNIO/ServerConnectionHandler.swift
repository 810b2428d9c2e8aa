import AuthProtobuf
import AuthRPC
import Logging
import NIOCore
import Synchronization

/// Serves one accepted connection: splits frames, runs the connection state machine, starts a
/// task per call, enforces deadlines and limits, and writes responses.
///
/// Everything here runs on the channel's event loop, except handler bodies, which run in
/// tasks: on Swift's global executor by default, or, for routes declared
/// ``HandlerExecution/onEventLoopUntilFirstSuspension``, started with `Task.immediate` on
/// this loop (a handler that does not suspend then completes within the read that delivered
/// its request, and its answer leaves in the same flush).
///
/// The default path pays the hop to the global executor once per read, not once per call: the
/// calls decoded from one read are handed to at most ``handlerLanes`` tasks, and each of those
/// starts its calls' handlers with `Task.immediate` on its own thread (see ``OffLoopCall``).
final class ServerConnectionHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let router: RPCRouter
    private let verifier: ServiceCredentialVerifier
    /// Where the caller's certificate names come from (TLS), or nil in plaintext mode.
    private let peerCertificateNames: PeerCertificateNames?
    /// This connection's challenge, sent first; the Hello must answer it.
    private var challenge: Auth_Rpc_V1_Challenge?
    private let limits: ConnectionLimits
    private let serviceName: String
    private let onAuthenticated: @Sendable () -> Void
    private var logger: Logger

    private var state: ServerConnectionStateMachine
    private var decoder: FrameDecoder
    private var watchdog: ConnectionWatchdog
    private var context: ChannelHandlerContext?
    /// The task of each call whose handler has not ended (the state machine has the call's state).
    private var tasks: [UInt64: CallTask] = [:]
    /// Calls decoded in this read whose handlers start off the loop when the read is handled.
    private var callsToStart: [OffLoopCall] = []
    private var watchdogTask: RepeatedTask?
    private var inReadBurst = false
    /// A flush is scheduled on the event loop for writes made outside a read burst.
    private var flushScheduled = false
    /// Frames produced during a read burst, written as one buffer when the burst ends.
    private var pendingOutput: ByteBuffer?
    private var peer = ""
    /// Set by the first ``close()``: a connection is closed once, and logged once.
    private var closing = false

    private var deadlineTimer = EarliestDeadlineTimer()

    init(
        router: RPCRouter,
        verifier: ServiceCredentialVerifier,
        peerCertificateNames: PeerCertificateNames?,
        limits: ConnectionLimits,
        serviceName: String,
        logger: Logger,
        onAuthenticated: @escaping @Sendable () -> Void = {}
    ) {
        self.router = router
        self.verifier = verifier
        self.peerCertificateNames = peerCertificateNames
        self.limits = limits
        self.serviceName = serviceName
        self.logger = logger
        self.onAuthenticated = onAuthenticated
        self.state = ServerConnectionStateMachine(maxConcurrentCalls: limits.maxConcurrentCalls)
        // Until Hello is accepted, only a frame of Hello's size is read (docs/protocol.md §6).
        self.decoder = FrameDecoder(maxFrameSize: min(limits.maxHelloFrameSize, limits.maxFrameSize))
        self.watchdog = ConnectionWatchdog(limits: limits, now: .now)
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        peer = context.remoteAddress?.description ?? "unknown"
        logger[metadataKey: "peer"] = "\(peer)"
        let tick = min(limits.readTimeout, limits.idleTimeout) / 4
        let interval = max(TimeAmount(tick), .milliseconds(10))
        let loopBound = NIOLoopBound(self, eventLoop: context.eventLoop)
        watchdogTask = context.eventLoop.scheduleRepeatedTask(initialDelay: interval, delay: interval) { _ in
            loopBound.value.watchdogTick()
        }
    }

    func channelActive(context: ChannelHandlerContext) {
        // The server speaks first (with TLS, the handler below holds this until the handshake is done).
        let challenge = verifier.challenge()
        self.challenge = challenge
        send(.init(kind: .challenge(challenge)))
        context.fireChannelActive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        watchdogTask?.cancel()
        watchdogTask = nil
        abandonAllCalls()
        self.context = nil
    }

    func channelInactive(context: ChannelHandlerContext) {
        abandonAllCalls()
        context.fireChannelInactive()
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        watchdog.writabilityChanged(isWritable: context.channel.isWritable, now: .now)
        context.fireChannelWritabilityChanged()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        decoder.append(unwrapInboundIn(data))
        inReadBurst = true
        defer { startOffLoopCalls() }
        let now = ContinuousClock.now
        while state.state != .closed {
            if state.state != .awaitingHello, decoder.maxFrameSize != limits.maxFrameSize {
                decoder.maxFrameSize = limits.maxFrameSize
            }
            let body: ByteBuffer
            do {
                guard let next = try decoder.nextFrame() else { break }
                body = next
            } catch {
                logger.warning("Closing connection: frame too large", metadata: ["length": "\(error.length)"])
                sendGoAwayAndClose(
                    RPCError(
                        code: .resourceExhausted,
                        message: "Frame of \(error.length) bytes exceeds the limit of \(error.maxFrameSize).",
                        reason: RPCError.Reason.frameTooLarge
                    )
                )
                return
            }
            let frame: Auth_Rpc_V1_Frame
            do {
                frame = try Auth_Rpc_V1_Frame(frameBody: body)
            } catch {
                logger.warning("Closing connection: malformed frame")
                sendGoAwayAndClose(
                    RPCError(
                        code: .invalidArgument,
                        message: "Malformed frame.",
                        reason: RPCError.Reason.malformedFrame
                    )
                )
                return
            }
            if case .hello = frame.kind {
                watchdog.frameReceived(isHello: true, now: now)
            } else {
                watchdog.frameReceived(isHello: false, now: now)
            }
            handle(frame)
        }
        watchdog.bytesBuffered(partialFrame: decoder.hasPartialFrame, now: now)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        inReadBurst = false
        if let output = pendingOutput {
            pendingOutput = nil
            context.writeAndFlush(wrapOutboundOut(output), promise: nil)
        }
        context.fireChannelReadComplete()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if isTLSError(error) {
            logger.warning("Refused a connection: TLS handshake failed", metadata: ["error": "\(error)"])
        } else {
            logger.debug("Connection error", metadata: ["error": "\(error)"])
        }
        context.close(promise: nil)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is GracefulShutdownRequest {
            beginGracefulShutdown()
        } else {
            context.fireUserInboundEventTriggered(event)
        }
    }

    // MARK: Frames

    private func handle(_ frame: Auth_Rpc_V1_Frame) {
        switch state.frameReceived(frame) {
        case .verifyHello(let hello):
            let result: Result<ServiceCredentialVerifier.Accepted, RPCError>
            if let challenge, let context {
                let peer: ServiceCredentialVerifier.PeerIdentity =
                    peerCertificateNames.map { .certificate(dnsNames: $0(context)) } ?? .none
                result = verifier.verify(hello, challenge: challenge, peer: peer)
            } else {
                result = .failure(
                    RPCError(
                        code: .unauthenticated,
                        message: "No challenge was sent.",
                        reason: RPCError.Reason.invalidServiceCredential
                    )
                )
            }
            switch state.helloVerified(result.map(\.caller)) {
            case .sendHelloAck:
                logger[metadataKey: "caller"] = "\(PeerText.loggable(state.authenticatedCaller))"
                onAuthenticated()
                send(
                    .init(
                        kind: .helloAck(
                            Auth_Rpc_V1_HelloAck(
                                protocolVersion: rpcProtocolVersion,
                                service: serviceName,
                                maxFrameSize: UInt32(limits.maxFrameSize),
                                maxConcurrentCalls: UInt32(limits.maxConcurrentCalls),
                                idleTimeoutMS: UInt32(clamping: limits.idleTimeout.milliseconds),
                                mac: (try? result.get().ackMAC) ?? []
                            )
                        )
                    )
                )
            case .refuse(let error):
                logger.warning(
                    "Refused a caller",
                    metadata: ["reason": "\(error.reason)", "service": "\(PeerText.loggable(hello.service))"]
                )
                sendGoAwayAndClose(error)
            }
        case .startCall(let request):
            startCall(request)
        case .rejectCall(let callID, let error):
            send(.init(kind: .response(Auth_Rpc_V1_Response(callID: callID, status: error.status))))
        case .cancelCall(let callID):
            // The task stays until its handler ends: until then the call holds its slot.
            tasks[callID]?.cancel()
        case .cancelCallThenClose(let callID):
            tasks[callID]?.cancel()
            close()
        case .sendPong(let payload):
            send(.init(kind: .pong(Auth_Rpc_V1_Pong(payload: payload))))
        case .closeWithError(let error):
            logger.warning("Closing connection: protocol violation", metadata: ["reason": "\(error.reason)"])
            sendGoAwayAndClose(error)
        case .closeWhenIdle(let closeNow):
            logger.debug("The client is closing the connection", metadata: ["close_now": "\(closeNow)"])
            if closeNow { close() }
        case .none:
            break
        }
    }

    private func startCall(_ request: Auth_Rpc_V1_Request) {
        let callID = request.callID
        guard let route = router.route(forPath: request.method) else {
            finish(
                callID: callID,
                result: .failure(
                    RPCError(
                        code: .unimplemented,
                        message: "Method \(PeerText.loggable(request.method)) is not served here.",
                        reason: RPCError.Reason.unknownMethod
                    )
                )
            )
            return
        }
        if let refusal = route.authorize(caller: state.authenticatedCaller) {
            logger.warning(
                "Refused a caller: not allowed to call this method",
                metadata: [
                    "caller": "\(PeerText.loggable(state.authenticatedCaller))", "method": "\(route.method.path)",
                    "reason": "\(refusal.reason)",
                ]
            )
            finish(callID: callID, result: .failure(refusal))
            return
        }
        let wireMetadata = request.metadata ?? Auth_Rpc_V1_Metadata()
        if let violation = RPCMetadata.violation(in: wireMetadata) {
            finish(
                callID: callID,
                result: .failure(
                    RPCError(code: .invalidArgument, message: violation, reason: RPCError.Reason.invalidMetadata)
                )
            )
            return
        }
        let metadata = RPCMetadata(proto: wireMetadata)
        var deadline: ContinuousClock.Instant?
        var budget = Duration.zero
        if request.timeoutUS > 0 {
            let asked = Duration.microseconds(Int64(clamping: request.timeoutUS))
            budget = min(asked, limits.maxCallTimeout)
            deadline = ContinuousClock.now + budget
        }
        let serverContext = ServerContext(
            method: route.method,
            metadata: metadata,
            deadline: deadline,
            authenticatedCaller: state.authenticatedCaller,
            peer: peer
        )
        if let deadline {
            state.setDeadline(deadline, forCall: callID)
            armDeadlineTimer(in: budget)
        }
        let loopBound = NIOLoopBound(self, eventLoop: context!.eventLoop)
        let eventLoop = context!.eventLoop
        let payload = request.payload
        switch route.execution {
        case .offEventLoop:
            let call = OffLoopCall(callID: callID, route: route, payload: payload, context: serverContext)
            callsToStart.append(call)
            tasks[callID] = .offLoop(call)
        case .onEventLoopUntilFirstSuspension:
            if serverContext.deadlineHasPassed(now: .now) {
                finish(callID: callID, result: .failure(.deadlineExceededOnServer))
                return
            }
            let task = Task.immediate {
                let result = await route.run(payload: payload, context: serverContext)
                if eventLoop.inEventLoop {
                    loopBound.value.finish(callID: callID, result: result)
                } else {
                    eventLoop.execute { loopBound.value.finish(callID: callID, result: result) }
                }
            }
            // The task may already have finished (and ended the call) within Task.immediate.
            if state.callState(callID) != nil { tasks[callID] = .task(task) }
        }
    }

    /// At most this many tasks start the off-loop calls of one read: one per core, so handlers
    /// that work before their first suspension still spread over the concurrency pool.
    static let handlerLanes = max(1, System.coreCount)

    /// Hands the calls decoded in this read to the global executor: one task per lane (calls
    /// dealt round-robin), each starting its calls' handlers in turn with `Task.immediate`, so
    /// a burst of N calls costs `min(N, handlerLanes)` hops instead of N.
    private func startOffLoopCalls() {
        guard !callsToStart.isEmpty else { return }
        guard let context else {
            callsToStart.removeAll()
            return
        }
        let loopBound = NIOLoopBound(self, eventLoop: context.eventLoop)
        let eventLoop = context.eventLoop
        let laneCount = min(callsToStart.count, Self.handlerLanes)
        var lanes = [[OffLoopCall]](repeating: [], count: laneCount)
        for (index, call) in callsToStart.enumerated() { lanes[index % laneCount].append(call) }
        for calls in lanes {
            Task {
                // Handlers that end while their lane is still starting calls (those that do not
                // suspend, or resume at once) go back to the loop together, in one hop.
                let finished = FinishedCalls()
                for call in calls {
                    let callID = call.callID
                    call.start { result in
                        guard !finished.collect(callID: callID, result: result) else { return }
                        eventLoop.execute { loopBound.value.finish(callID: callID, result: result) }
                    }
                }
                let collected = finished.close()
                if !collected.isEmpty { eventLoop.execute { loopBound.value.finish(collected) } }
            }
        }
        callsToStart.removeAll(keepingCapacity: true)
    }

    /// Ends the calls a lane collected: their responses go out in one write and one flush.
    private func finish(_ calls: [FinishedCalls.Call]) {
        let wasInReadBurst = inReadBurst
        inReadBurst = true
        for call in calls { finish(callID: call.callID, result: call.result) }
        inReadBurst = wasInReadBurst
        guard !wasInReadBurst, let output = pendingOutput, let context else { return }
        pendingOutput = nil
        context.writeAndFlush(wrapOutboundOut(output), promise: nil)
    }

    /// Arms the connection's timer to fire `remaining` from now (a new call's budget: the timer
    /// keeps an earlier deadline), or, without it, at the earliest deadline of the running calls
    /// (a scan of them all, done only when the timer has fired).
    private func armDeadlineTimer(in remaining: Duration? = nil) {
        guard let remaining = remaining ?? state.nextDeadline.map({ $0 - .now }), let context else { return }
        let due = NIODeadline.now() + TimeAmount(remaining)
        let loopBound = NIOLoopBound(self, eventLoop: context.eventLoop)
        deadlineTimer.schedule(due, on: context.eventLoop) { loopBound.value.deadlineTimerFired() }
    }

    /// Answers every call whose deadline has passed and cancels its handler (which keeps the
    /// call's slot until it ends), then re-arms for the next deadline.
    private func deadlineTimerFired() {
        deadlineTimer.fired()
        let action = state.deadlinesPassed(now: .now)
        for callID in action.expired {
            tasks[callID]?.cancel()
            send(response(callID: callID, result: .failure(.deadlineExceededOnServer)))
        }
        if action.close {
            close()
        } else {
            armDeadlineTimer()
        }
    }

    private func response(callID: UInt64, result: Result<[UInt8], RPCError>) -> Auth_Rpc_V1_Frame {
        var response = Auth_Rpc_V1_Response(callID: callID)
        switch result {
        case .success(let bytes): response.payload = bytes
        case .failure(let error): response.status = error.status
        }
        return .init(kind: .response(response))
    }

    private func finish(callID: UInt64, result: Result<[UInt8], RPCError>) {
        tasks.removeValue(forKey: callID)
        switch state.callFinished(callID: callID, now: .now) {
        case .drop:
            return
        case .send(let answer, let closeAfter):
            switch answer {
            case .handlerResult: send(response(callID: callID, result: result))
            case .deadlineExceeded: send(response(callID: callID, result: .failure(.deadlineExceededOnServer)))
            }
            if closeAfter { close() }
        }
    }

    // MARK: Shutdown

    private func beginGracefulShutdown() {
        guard let (lastCallID, closeNow) = state.beginGracefulShutdown() else { return }
        send(
            .init(
                kind: .goAway(
                    Auth_Rpc_V1_GoAway(
                        lastCallID: lastCallID,
                        code: .unavailable,
                        message: "The server is shutting down.",
                        reason: RPCError.Reason.goingAway
                    )
                )
            )
        )
        if closeNow { close() }
    }

    private func watchdogTick() {
        guard !closing else { return }
        switch watchdog.check(now: .now, openCalls: state.callsHoldingSlots) {
        case .keep:
            return
        case .helloTimedOut:
            logger.info("Closing connection: no Hello in time")
            sendGoAwayAndClose(
                RPCError(code: .unauthenticated, message: "No Hello in time.", reason: RPCError.Reason.helloTimeout)
            )
        case .readTimedOut:
            logger.warning("Closing connection: frame not completed in time")
            sendGoAwayAndClose(
                RPCError(
                    code: .deadlineExceeded,
                    message: "Frame not completed in time.",
                    reason: RPCError.Reason.readTimeout
                )
            )
        case .writeStalled:
            logger.warning("Closing connection: peer does not read")
            _ = state.connectionClosed()
            context?.close(promise: nil)
        case .idle:
            logger.debug("Closing idle connection")
            sendGoAwayAndClose(
                RPCError(code: .unavailable, message: "Idle connection closed.", reason: RPCError.Reason.idle)
            )
        }
    }

    private func sendGoAwayAndClose(_ error: RPCError) {
        send(
            .init(
                kind: .goAway(
                    Auth_Rpc_V1_GoAway(
                        lastCallID: state.highestCallID,
                        code: Auth_Rpc_V1_StatusCode(rawValue: Int32(error.code.rawValue)),
                        message: error.message,
                        reason: error.reason
                    )
                )
            )
        )
        close()
    }

    /// Writes what is pending (a last GoAway or response), then closes. The close does not wait
    /// for that write longer than ``goAwayGrace``: a write queued behind a TLS handshake that
    /// never finishes never completes, and the connection must end anyway (issue 19, item 4).
    private func close() {
        guard let context, !closing else { return }
        closing = true
        watchdogTask?.cancel()
        watchdogTask = nil
        _ = state.connectionClosed()
        abandonAllCalls()
        let channel = context.channel
        let output = pendingOutput ?? channel.allocator.buffer(capacity: 0)
        pendingOutput = nil
        let forcedClose = context.eventLoop.scheduleTask(in: TimeAmount(min(limits.readTimeout, Self.goAwayGrace))) {
            channel.close(promise: nil)
        }
        context.writeAndFlush(wrapOutboundOut(output)).whenComplete { _ in
            forcedClose.cancel()
            channel.close(promise: nil)
        }
    }

    /// How long a closing connection waits for its last frame to be written.
    static let goAwayGrace: Duration = .seconds(1)

    private func abandonAllCalls() {
        _ = state.connectionClosed()
        for task in tasks.values {
            task.cancel()
        }
        tasks.removeAll()
        callsToStart.removeAll()
        deadlineTimer.cancel()
    }

    private func send(_ frame: Auth_Rpc_V1_Frame) {
        guard let context else { return }
        if inReadBurst {
            // Batched: appended to the burst's buffer, written when the burst ends.
            var output = pendingOutput ?? context.channel.allocator.buffer(capacity: 4096)
            pendingOutput = nil
            let writerIndex = output.writerIndex
            do {
                try output.writeFrame(frame)
            } catch {
                output.moveWriterIndex(to: writerIndex)
                logger.error("Could not encode a frame", metadata: ["error": "\(error)"])
            }
            pendingOutput = output
            return
        }
        var buffer = context.channel.allocator.buffer(capacity: 64)
        do {
            try buffer.writeFrame(frame)
        } catch {
            logger.error("Could not encode a frame", metadata: ["error": "\(error)"])
            return
        }
        // Responses of handlers that end off the loop arrive one task each; flushing once after
        // the tasks already queued on the loop writes them in one system call.
        context.write(wrapOutboundOut(buffer), promise: nil)
        guard !flushScheduled else { return }
        flushScheduled = true
        let loopBound = NIOLoopBound(self, eventLoop: context.eventLoop)
        context.eventLoop.execute {
            let handler = loopBound.value
            handler.flushScheduled = false
            handler.context?.flush()
        }
    }
}

/// What the event loop holds of a call whose handler has not ended, to cancel it.
enum CallTask {
    /// A handler started on the loop with `Task.immediate`.
    case task(Task<Void, Never>)
    /// A handler started off the loop, which may not have a task yet.
    case offLoop(OffLoopCall)

    func cancel() {
        switch self {
        case .task(let task): task.cancel()
        case .offLoop(let call): call.cancel()
        }
    }
}

/// A call whose handler starts off the event loop, in a task another task creates (see
/// ``ServerConnectionHandler/startOffLoopCalls()``). The event loop may cancel it before that
/// task exists: the cancellation is kept and handed to the task as soon as it is known, or the
/// handler does not start at all.
final class OffLoopCall: Sendable {
    let callID: UInt64
    let route: RPCRouter.Route
    let payload: [UInt8]
    let context: ServerContext
    private let task = Mutex(TaskState.notStarted)

    private enum TaskState: Sendable {
        case notStarted
        case cancelledBeforeStart
        case started(Task<Void, Never>)
        case cancelled
    }

    init(callID: UInt64, route: RPCRouter.Route, payload: [UInt8], context: ServerContext) {
        self.callID = callID
        self.route = route
        self.payload = payload
        self.context = context
    }

    func cancel() {
        let started: Task<Void, Never>? = task.withLock { state in
            switch state {
            case .notStarted:
                state = .cancelledBeforeStart
                return nil
            case .started(let task):
                state = .cancelled
                return task
            case .cancelledBeforeStart, .cancelled:
                return nil
            }
        }
        started?.cancel()
    }

    /// Runs the handler in a task started on the calling thread (`Task.immediate`) and passes
    /// its result to `finish`. A call cancelled before this ends without its handler: `finish`
    /// gets ``RPCError/cancelledBeforeStart`` (its answer is not sent anyway). A call whose
    /// deadline has passed by now ends without its handler too, with `DEADLINE_EXCEEDED`
    /// (docs/protocol.md, "Deadlines": such a call is not run).
    func start(finish: @escaping @Sendable (Result<[UInt8], RPCError>) -> Void) {
        if task.withLock({ if case .cancelledBeforeStart = $0 { true } else { false } }) {
            finish(.failure(.cancelledBeforeStart))
            return
        }
        if context.deadlineHasPassed(now: .now) {
            finish(.failure(.deadlineExceededOnServer))
            return
        }
        let started = Task.immediate { [route, payload, context] in
            finish(await route.run(payload: payload, context: context))
        }
        let cancelled: Bool = task.withLock { state in
            if case .cancelledBeforeStart = state { return true }
            state = .started(started)
            return false
        }
        if cancelled { started.cancel() }
    }
}

/// The results of a lane's handlers that ended before the lane finished starting its calls,
/// gathered to go back to the event loop in one hop; once closed, results are not taken.
final class FinishedCalls: Sendable {
    struct Call: Sendable {
        let callID: UInt64
        let result: Result<[UInt8], RPCError>
    }

    private let state = Mutex<(collecting: Bool, calls: [Call])>((true, []))

    /// Takes `result` if the lane is still starting calls; false when the caller must send it.
    func collect(callID: UInt64, result: Result<[UInt8], RPCError>) -> Bool {
        state.withLock { state in
            guard state.collecting else { return false }
            state.calls.append(Call(callID: callID, result: result))
            return true
        }
    }

    /// Stops collecting; returns what was collected.
    func close() -> [Call] {
        state.withLock { state in
            state.collecting = false
            return state.calls
        }
    }
}

/// Sent down a server connection's pipeline to start graceful shutdown (GOAWAY, drain, close).
struct GracefulShutdownRequest: Sendable {}

extension RPCError {
    static let cancelledBeforeStart = RPCError(
        code: .cancelled,
        message: "The call was cancelled before its handler started.",
        reason: RPCError.Reason.cancelled
    )

    static let deadlineExceededOnServer = RPCError(
        code: .deadlineExceeded,
        message: "The call's deadline passed; the server abandoned it.",
        reason: RPCError.Reason.deadlineExceeded
    )
}

extension Duration {
    /// Saturates at ±Int64.max instead of trapping.
    var milliseconds: Int64 { saturating(unitsPerSecond: 1000) }

    /// Saturates at ±Int64.max instead of trapping.
    var microseconds: Int64 { saturating(unitsPerSecond: 1_000_000) }

    private func saturating(unitsPerSecond: Int64) -> Int64 {
        let (seconds, attoseconds) = components
        let limit: Int64 = seconds < 0 ? .min : .max
        let (whole, overflow) = seconds.multipliedReportingOverflow(by: unitsPerSecond)
        if overflow { return limit }
        let (total, overflowAgain) = whole.addingReportingOverflow(
            attoseconds / (1_000_000_000_000_000_000 / unitsPerSecond)
        )
        return overflowAgain ? limit : total
    }
}
