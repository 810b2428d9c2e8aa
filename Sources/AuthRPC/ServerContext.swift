/// What a handler knows about the call it is serving.
public struct ServerContext: Sendable {
    /// The method being called.
    public var method: MethodDescriptor
    /// The metadata the caller sent.
    public var metadata: RPCMetadata
    /// When the caller stops waiting, if it said; the server abandons the call then.
    public var deadline: ContinuousClock.Instant?
    /// The service name the caller proved with its credential at connection start.
    public var authenticatedCaller: String
    /// The remote address, for logs.
    public var peer: String

    public init(
        method: MethodDescriptor,
        metadata: RPCMetadata = RPCMetadata(),
        deadline: ContinuousClock.Instant? = nil,
        authenticatedCaller: String = "",
        peer: String = ""
    ) {
        self.method = method
        self.metadata = metadata
        self.deadline = deadline
        self.authenticatedCaller = authenticatedCaller
        self.peer = peer
    }

    /// The context of the call the current task is serving, if any. Set by the server around
    /// each handler; read by ``RPCClient`` to propagate metadata and the deadline downstream.
    @TaskLocal public static var current: ServerContext?

    /// Time left before the deadline (zero when it has passed), or nil without a deadline.
    public func timeRemaining(now: ContinuousClock.Instant = .now) -> Duration? {
        guard let deadline else { return nil }
        return max(.zero, deadline - now)
    }

    /// True when the call has a deadline and it is at or before `now`.
    public func deadlineHasPassed(now: ContinuousClock.Instant) -> Bool {
        guard let deadline else { return false }
        return deadline <= now
    }
}
