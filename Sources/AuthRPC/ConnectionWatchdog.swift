/// Decides when a server connection must be cut off for being slow or idle. Pure: the
/// transport feeds it events with the time they happened and asks it at each tick.
public struct ConnectionWatchdog: Sendable {
    public enum Verdict: Sendable, Hashable {
        case keep
        /// No Hello within the read timeout of connecting.
        case helloTimedOut
        /// A frame was started and no byte of it arrived for the read timeout.
        case readTimedOut
        /// Nothing received and no call open for the idle timeout.
        case idle
        /// The peer has not read what we sent for the read timeout.
        case writeStalled
    }

    public let limits: ConnectionLimits
    private var connectedAt: ContinuousClock.Instant
    private var helloReceived = false
    private var lastFrameAt: ContinuousClock.Instant
    /// When the last bytes arrived while a frame is unfinished.
    private var partialFrameProgressAt: ContinuousClock.Instant?
    private var unwritableSince: ContinuousClock.Instant?

    public init(limits: ConnectionLimits, now: ContinuousClock.Instant) {
        self.limits = limits
        self.connectedAt = now
        self.lastFrameAt = now
    }

    public mutating func frameReceived(isHello: Bool, now: ContinuousClock.Instant) {
        if isHello { helloReceived = true }
        lastFrameAt = now
    }

    /// After each read (new bytes arrived): whether bytes of an unfinished frame remain
    /// buffered. The read timeout counts from the last read that left a frame unfinished, so
    /// it measures a frame that makes no progress; a busy connection, whose buffer always ends
    /// in the start of its next frame, is not cut off.
    public mutating func bytesBuffered(partialFrame: Bool, now: ContinuousClock.Instant) {
        partialFrameProgressAt = partialFrame ? now : nil
    }

    public mutating func writabilityChanged(isWritable: Bool, now: ContinuousClock.Instant) {
        unwritableSince = isWritable ? nil : (unwritableSince ?? now)
    }

    public func check(now: ContinuousClock.Instant, openCalls: Int) -> Verdict {
        if !helloReceived, now - connectedAt >= limits.readTimeout { return .helloTimedOut }
        if let since = partialFrameProgressAt, now - since >= limits.readTimeout { return .readTimedOut }
        if let since = unwritableSince, now - since >= limits.readTimeout { return .writeStalled }
        if openCalls == 0, now - lastFrameAt >= limits.idleTimeout { return .idle }
        return .keep
    }
}
