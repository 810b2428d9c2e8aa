import AuthProtobuf

/// The server side of one connection, without I/O: what to do with each frame received and
/// each call that finishes. The transport's channel handler performs the returned actions.
///
/// Rules enforced here (docs/protocol.md): the first frame is `Hello`; call ids are non-zero
/// and strictly increasing; at most `maxConcurrentCalls` calls are open; after GOAWAY no call
/// above `lastCallID` starts; a frame a client must not send closes the connection.
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
        case sendResponse
        case sendResponseThenClose
        /// The call was already answered (deadline) or cancelled: send nothing.
        case drop
    }

    public private(set) var state: State = .awaitingHello
    public private(set) var openCalls: Set<UInt64> = []
    public private(set) var highestCallID: UInt64 = 0
    public private(set) var authenticatedCaller: String = ""
    private var peerGoingAway = false
    public let maxConcurrentCalls: Int

    public init(maxConcurrentCalls: Int) {
        self.maxConcurrentCalls = maxConcurrentCalls
    }

    public mutating func frameReceived(_ frame: Auth_Rpc_V1_Frame) -> FrameAction {
        switch (state, frame.kind) {
        case (.closed, _):
            return .none
        case (.awaitingHello, .hello(let hello)):
            state = .verifyingHello
            return .verifyHello(hello)
        case (.awaitingHello, _), (.verifyingHello, _):
            return close(RPCError(code: .unauthenticated, message: "The first frame must be Hello.", reason: "hello_required"))
        case (_, .hello):
            return close(RPCError(code: .invalidArgument, message: "Hello was sent twice.", reason: "protocol_violation"))
        case (_, .request(let request)):
            return requestReceived(request)
        case (_, .cancel(let cancel)):
            return openCalls.remove(cancel.callID) == nil ? closeIfDrained() : .cancelCall(callID: cancel.callID)
        case (_, .ping(let ping)):
            return .sendPong(payload: ping.payload)
        case (_, .pong):
            return .none
        case (_, .goAway):
            peerGoingAway = true
            if openCalls.isEmpty {
                state = .closed
                return .closeWhenIdle(closeNow: true)
            }
            return .closeWhenIdle(closeNow: false)
        case (_, .helloAck), (_, .response), (_, .challenge), (_, nil):
            return close(RPCError(code: .invalidArgument, message: "A client may not send this frame.", reason: "protocol_violation"))
        }
    }

    public mutating func helloVerified(_ result: Result<String, RPCError>) -> HelloAction {
        guard state == .verifyingHello else {
            return .refuse(RPCError(code: .internal, message: "Unexpected credential result.", reason: "protocol_violation"))
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
            return close(RPCError(code: .invalidArgument, message: "Call ids must be non-zero and increase.", reason: "protocol_violation"))
        }
        highestCallID = request.callID
        if case .draining(let lastCallID) = state, request.callID > lastCallID {
            return .rejectCall(callID: request.callID, RPCError(code: .unavailable, message: "The server is shutting down; retry on another connection.", reason: "going_away"))
        }
        if peerGoingAway {
            return close(RPCError(code: .invalidArgument, message: "A call was started after GOAWAY.", reason: "protocol_violation"))
        }
        guard openCalls.count < maxConcurrentCalls else {
            return .rejectCall(callID: request.callID, RPCError(code: .resourceExhausted, message: "Too many calls open on this connection (limit \(maxConcurrentCalls)).", reason: "too_many_concurrent_calls"))
        }
        openCalls.insert(request.callID)
        return .startCall(request)
    }

    /// A call ended (answered, failed, or timed out by the server).
    public mutating func callFinished(callID: UInt64) -> FinishAction {
        guard openCalls.remove(callID) != nil else { return .drop }
        if openCalls.isEmpty, isDrainingOrPeerGone {
            state = .closed
            return .sendResponseThenClose
        }
        return .sendResponse
    }

    /// Starts graceful shutdown: returns the GOAWAY's last call id, and whether the
    /// connection can close now (no call open).
    public mutating func beginGracefulShutdown() -> (lastCallID: UInt64, closeNow: Bool)? {
        switch state {
        case .active, .awaitingHello, .verifyingHello:
            state = .draining(lastCallID: highestCallID)
            if openCalls.isEmpty {
                state = .closed
                return (highestCallID, true)
            }
            return (highestCallID, false)
        case .draining, .closed:
            return nil
        }
    }

    /// The connection closed: every open call is abandoned.
    public mutating func connectionClosed() -> Set<UInt64> {
        state = .closed
        defer { openCalls = [] }
        return openCalls
    }

    private var isDrainingOrPeerGone: Bool {
        if case .draining = state { return true }
        return peerGoingAway
    }

    private mutating func closeIfDrained() -> FrameAction {
        if openCalls.isEmpty, isDrainingOrPeerGone {
            state = .closed
            return .closeWhenIdle(closeNow: true)
        }
        return .none
    }

    private mutating func close(_ error: RPCError) -> FrameAction {
        state = .closed
        return .closeWithError(error)
    }
}
