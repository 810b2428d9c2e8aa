/// Limits a server applies to each connection. Everything a peer controls is bounded.
public struct ConnectionLimits: Sendable, Hashable {
    /// The largest frame accepted (the length prefix's value), in bytes.
    public var maxFrameSize: Int
    /// Calls open at once on one connection; more are refused with RESOURCE_EXHAUSTED.
    public var maxConcurrentCalls: Int
    /// A connection with no frame for this long is closed.
    public var idleTimeout: Duration
    /// A frame must arrive completely within this long of its first byte, and a new connection
    /// must send Hello within it.
    public var readTimeout: Duration
    /// The longest timeout a call may ask for; longer ones are cut to this.
    public var maxCallTimeout: Duration
    /// The largest first frame (the `Hello`) accepted, checked before anything is decoded. A
    /// A version-2 Hello is about 100 bytes; 1024 leaves room for fields added later.
    public var maxHelloFrameSize: Int
    /// Connections a server holds open at once; more are refused.
    public var maxConnections: Int
    /// Connections from one peer address that have not completed Hello yet; more are refused.
    public var maxUnauthenticatedConnectionsPerPeer: Int

    public init(
        maxFrameSize: Int = 1 << 20,
        maxConcurrentCalls: Int = 256,
        idleTimeout: Duration = .seconds(300),
        readTimeout: Duration = .seconds(10),
        maxCallTimeout: Duration = .seconds(120),
        maxHelloFrameSize: Int = 1024,
        maxConnections: Int = 1024,
        maxUnauthenticatedConnectionsPerPeer: Int = 16
    ) {
        self.maxFrameSize = maxFrameSize
        self.maxConcurrentCalls = maxConcurrentCalls
        self.idleTimeout = idleTimeout
        self.readTimeout = readTimeout
        self.maxCallTimeout = maxCallTimeout
        self.maxHelloFrameSize = maxHelloFrameSize
        self.maxConnections = maxConnections
        self.maxUnauthenticatedConnectionsPerPeer = maxUnauthenticatedConnectionsPerPeer
    }
}
