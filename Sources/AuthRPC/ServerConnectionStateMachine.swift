import AuthProtobuf

/// The server side of one connection, without I/O: what to do with each frame received and
/// each call that finishes. The transport's channel handler performs the returned actions.
///
/// Rules enforced here (docs/protocol.md): the first frame is `Hello`; call ids are non-zero
/// and strictly increasing; at most `maxConcurrentCalls` calls are open; after GOAWAY no call
/// above `lastCallID` starts; a frame a client must not send closes the connection.
///
/// Every call's state lives here: a call is *running* until it is answered, or *abandoned*
/// once the client cancelled it or its deadline passed (answered `DEADLINE_EXCEEDED`) while its
/// handler has not ended yet. A call holds its slot of `maxConcurrentCalls` until its handler
/// has ended (``callFinished(callID:now:)``), so cancelling cannot make room for more work than the
/// limit. A draining connection closes as soon as no call is running, however the last one
/// ended; handlers still running then are cancelled with the connection.
public struct ServerConnectionStateMachine: Sendable {
    public enum State: Sendable, Hashable {
        case awaitingHello
        case verifyingHello
        case active
        /// GOAWAY sent; calls up to `lastCallID` finish, then the connection closes.
        case draining(lastCallID: UInt64)
        case closed
    }

    public enum FrameAction: Sendable {
        /// Check the credential, then call ``helloVerified(_:)``.
        case verifyHello(Auth_Rpc_V1_Hello)
        /// Start serving this call.
        case startCall(Auth_Rpc_V1_Request)
        /// Answer this call with an error at once, without running it.
        case rejectCall(callID: UInt64, RPCError)
        /// Stop serving this call and send nothing for it.
        case cancelCall(callID: UInt64)
        /// As `cancelCall`, and it was the last running call of a draining connection: close.
        case cancelCallThenClose(callID: UInt64)
        case sendPong(payload: UInt64)
        /// Send GOAWAY with this error, then close the connection.
        case closeWithError(RPCError)
        /// The peer is going away: close once no call is open (now, if none is).
        case closeWhenIdle(closeNow: Bool)
        case none
    }

    public enum HelloAction: Sendable {
        case sendHelloAck
        /// Send GOAWAY with this error, then close.
        case refuse(RPCError)
    }

    public enum FinishAction: Sendable, Hashable {
        /// Send the call's answer, then close the connection when `close` (it was draining and
        /// this was its last call).
        case send(Answer, close: Bool)
        /// The call was already answered (deadline) or cancelled: send nothing.
        case drop
    }

    /// What a finished call is answered.
    public enum Answer: Sendable, Hashable {
        /// What its handler returned (a response or an error).
        case handlerResult
        /// `DEADLINE_EXCEEDED`: the call's deadline passed before its handler ended, and the
        /// deadline timer has not answered it yet; answered as the timer would have
        /// (docs/protocol.md, "Deadlines").
        case deadlineExceeded
    }

    public enum CallState: Sendable, Hashable {
        /// The handler runs; the call awaits its answer.
        case running
        /// Cancelled, or answered at its deadline; the handler has not ended yet.
        case abandoned
    }

    struct Call: Sendable {
        var state: CallState
        var deadline: ContinuousClock.Instant?
    }

    /// What to do when deadlines have passed (``deadlinesPassed(now:)``).
    public struct DeadlineAction: Sendable, Hashable {
        /// Answer these calls `DEADLINE_EXCEEDED` and cancel their handlers.
        public var expired: [UInt64]
        /// The connection was draining and no call runs any more: close it.
        public var close: Bool
    }

    public private(set) var state: State = .awaitingHello
    private var calls: [UInt64: Call] = [:]
    public private(set) var highestCallID: UInt64 = 0
    public private(set) var authenticatedCaller: String = ""
    private var peerGoingAway = false
    public let maxConcurrentCalls: Int

    public init(maxConcurrentCalls: Int) {
        self.maxConcurrentCalls = maxConcurrentCalls
    }

    /// Calls awaiting their answer.
    public var openCalls: Set<UInt64> { Set(calls.filter { $0.value.state == .running }.keys) }

    /// Calls holding a slot: running, or abandoned with a handler that has not ended.
    public var callsHoldingSlots: Int { calls.count }

    public func callState(_ callID: UInt64) -> CallState? { calls[callID]?.state }

    /// The earliest deadline of a running call: when to call ``deadlinesPassed(now:)``.
    public var nextDeadline: ContinuousClock.Instant? {
        calls.values.lazy.filter { $0.state == .running }.compactMap(\.deadline).min()
    }

    public mutating func frameReceived(_ frame: Auth_Rpc_V1_Frame) -> FrameAction {
        switch (state, frame.kind) {
        case (.closed, _):
            return .none
        case (.awaitingHello, .hello(let hello)):
            state = .verifyingHello
            return .verifyHello(hello)
        case (.awaitingHello, _), (.verifyingHello, _):
            return close(
                RPCError(
                    code: .unauthenticated,
                    message: "The first frame must be Hello.",
                    reason: RPCError.Reason.helloRequired
                )
            )
        case (_, .hello):
            return close(
                RPCError(
                    code: .invalidArgument,
                    message: "Hello was sent twice.",
                    reason: RPCError.Reason.protocolViolation
                )
            )
        case (_, .request(let request)):
            return requestReceived(request)
        case (_, .cancel(let cancel)):
            guard calls[cancel.callID]?.state == .running else { return .none }
            calls[cancel.callID]?.state = .abandoned
            if closeIfDrained() { return .cancelCallThenClose(callID: cancel.callID) }
            return .cancelCall(callID: cancel.callID)
        case (_, .ping(let ping)):
            return .sendPong(payload: ping.payload)
        case (_, .pong):
            return .none
        case (_, .goAway):
            peerGoingAway = true
            if !hasRunningCalls {
                state = .closed
                return .closeWhenIdle(closeNow: true)
            }
            return .closeWhenIdle(closeNow: false)
        case (_, .helloAck), (_, .response), (_, .challenge), (_, nil):
            return close(
                RPCError(
                    code: .invalidArgument,
                    message: "A client may not send this frame.",
                    reason: RPCError.Reason.protocolViolation
                )
            )
        }
    }

    public mutating func helloVerified(_ result: Result<String, RPCError>) -> HelloAction {
        guard state == .verifyingHello else {
            return .refuse(
                RPCError(
                    code: .internal,
                    message: "Unexpected credential result.",
                    reason: RPCError.Reason.protocolViolation
                )
            )
        }
        switch result {
        case .success(let caller):
            authenticatedCaller = caller
            state = .active
            return .sendHelloAck
        case .failure(let error):
            state = .closed
            return .refuse(error)
        }
    }

    private mutating func requestReceived(_ request: Auth_Rpc_V1_Request) -> FrameAction {
        guard request.callID > highestCallID else {
            return close(
                RPCError(
                    code: .invalidArgument,
                    message: "Call ids must be non-zero and increase.",
                    reason: RPCError.Reason.protocolViolation
                )
            )
        }
        highestCallID = request.callID
        if case .draining(let lastCallID) = state, request.callID > lastCallID {
            return .rejectCall(
                callID: request.callID,
                RPCError(
                    code: .unavailable,
                    message: "The server is shutting down; retry on another connection.",
                    reason: RPCError.Reason.goingAway
                )
            )
        }
        if peerGoingAway {
            return close(
                RPCError(
                    code: .invalidArgument,
                    message: "A call was started after GOAWAY.",
                    reason: RPCError.Reason.protocolViolation
                )
            )
        }
        guard calls.count < maxConcurrentCalls else {
            return .rejectCall(
                callID: request.callID,
                RPCError(
                    code: .resourceExhausted,
                    message: "Too many calls open on this connection (limit \(maxConcurrentCalls)).",
                    reason: RPCError.Reason.tooManyConcurrentCalls
                )
            )
        }
        calls[request.callID] = Call(state: .running)
        return .startCall(request)
    }

    /// The server abandons a running call at `deadline` (see ``deadlinesPassed(now:)``).
    public mutating func setDeadline(_ deadline: ContinuousClock.Instant, forCall callID: UInt64) {
        guard calls[callID]?.state == .running else { return }
        calls[callID]?.deadline = deadline
    }

    /// Abandons every running call whose deadline is at or before `now`.
    public mutating func deadlinesPassed(now: ContinuousClock.Instant) -> DeadlineAction {
        var expired: [UInt64] = []
        for (callID, call) in calls where call.state == .running {
            if let deadline = call.deadline, deadline <= now {
                calls[callID]?.state = .abandoned
                expired.append(callID)
            }
        }
        return DeadlineAction(expired: expired.sorted(), close: !expired.isEmpty && closeIfDrained())
    }

    /// A call's handler ended (with an answer or an error) at `now`, or a call ended before it
    /// had one (unknown method, bad metadata). Frees its slot; `.drop` when it was already
    /// answered or cancelled, `.deadlineExceeded` when its deadline is at or before `now`.
    public mutating func callFinished(callID: UInt64, now: ContinuousClock.Instant) -> FinishAction {
        guard let call = calls.removeValue(forKey: callID) else { return .drop }
        guard call.state == .running else { return .drop }
        let late = call.deadline.map { $0 <= now } ?? false
        return .send(late ? .deadlineExceeded : .handlerResult, close: closeIfDrained())
    }

    /// Starts graceful shutdown: returns the GOAWAY's last call id, and whether the
    /// connection can close now (no call open).
    public mutating func beginGracefulShutdown() -> (lastCallID: UInt64, closeNow: Bool)? {
        switch state {
        case .active, .awaitingHello, .verifyingHello:
            state = .draining(lastCallID: highestCallID)
            if !hasRunningCalls {
                state = .closed
                return (highestCallID, true)
            }
            return (highestCallID, false)
        case .draining, .closed:
            return nil
        }
    }

    /// The connection closed: every call still holding a slot is abandoned (its handler must
    /// be cancelled).
    public mutating func connectionClosed() -> Set<UInt64> {
        state = .closed
        defer { calls = [:] }
        return Set(calls.keys)
    }

    private var hasRunningCalls: Bool { calls.values.contains { $0.state == .running } }

    private var isDrainingOrPeerGone: Bool {
        if case .draining = state { return true }
        return peerGoingAway
    }

    /// Closes (and says so) when draining and no call is running any more.
    private mutating func closeIfDrained() -> Bool {
        guard state != .closed, !hasRunningCalls, isDrainingOrPeerGone else { return false }
        state = .closed
        return true
    }

    private mutating func close(_ error: RPCError) -> FrameAction {
        state = .closed
        return .closeWithError(error)
    }
}
