import AuthProtobuf

/// The client side of one connection, without I/O. `Pending` is whatever the transport keeps
/// per open call (typically a continuation).
///
/// Call ids are allocated here, increasing from 1. After GOAWAY the calls the server did not
/// start are handed back for retry on another connection; when the connection closes, the
/// rest are handed back to fail.
public struct ClientConnectionStateMachine<Pending> {
    public enum State: Sendable, Hashable {
        case awaitingHelloAck
        case ready
        case goingAway
        case closed
    }

    public enum StartResult {
        case send(callID: UInt64)
        /// Not started: the connection is not ready, is going away, or is full.
        case unavailable
    }

    public private(set) var state: State = .awaitingHelloAck
    public private(set) var maxConcurrentCalls: Int
    private var nextCallID: UInt64 = 1
    private var pending: [UInt64: Pending] = [:]

    public init(maxConcurrentCalls: Int = 100) {
        self.maxConcurrentCalls = maxConcurrentCalls
    }

    public var openCallCount: Int { pending.count }

    /// The highest call id handed out so far (0 before the first call).
    public var highestCallID: UInt64 { nextCallID - 1 }

    /// The open calls by call id.
    public var openCalls: [UInt64: Pending] { pending }

    /// Can take another call now.
    public var hasCapacity: Bool { state == .ready && pending.count < maxConcurrentCalls }

    public mutating func helloAckReceived(_ ack: Auth_Rpc_V1_HelloAck) -> Bool {
        guard state == .awaitingHelloAck else { return false }
        state = .ready
        if ack.maxConcurrentCalls > 0 {
            maxConcurrentCalls = min(maxConcurrentCalls, Int(ack.maxConcurrentCalls))
        }
        return true
    }

    public mutating func startCall(_ call: Pending) -> StartResult {
        guard hasCapacity else { return .unavailable }
        let callID = nextCallID
        nextCallID += 1
        pending[callID] = call
        return .send(callID: callID)
    }

    /// The call answered; `nil` when it is no longer open (cancelled, or an unknown id).
    public mutating func responseReceived(callID: UInt64) -> Pending? {
        pending.removeValue(forKey: callID)
    }

    /// The caller gave up on a call; returns it when it was open, so a Cancel frame is sent.
    public mutating func cancel(callID: UInt64) -> Pending? {
        pending.removeValue(forKey: callID)
    }

    /// The server is shutting down. Returns the calls it will not serve (ids above
    /// `lastCallID`), which may be retried elsewhere.
    public mutating func goAwayReceived(lastCallID: UInt64) -> [Pending] {
        if state != .closed { state = .goingAway }
        let unstarted = pending.keys.filter { $0 > lastCallID }.sorted()
        return unstarted.compactMap { pending.removeValue(forKey: $0) }
    }

    /// The client is closing the connection (it sends GOAWAY): no new call starts here; the
    /// open ones are answered first. True when none is open, so it can close now.
    public mutating func closeRequested() -> Bool {
        if state != .closed { state = .goingAway }
        return pending.isEmpty
    }

    /// The connection is gone; returns every call still open.
    public mutating func closed() -> [Pending] {
        state = .closed
        defer { pending = [:] }
        return pending.keys.sorted().compactMap { pending[$0] }
    }

    /// Whether the connection may be closed: going away with nothing open.
    public var isDrained: Bool { state == .goingAway && pending.isEmpty }
}
