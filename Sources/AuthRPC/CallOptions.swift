/// Per-call settings of a client call.
public struct CallOptions: Sendable {
    /// How long the caller waits. The smaller of this and the time left of the call being
    /// served (``ServerContext/current``) is sent on the wire. `nil`: the client's default.
    public var timeout: Duration?
    /// Metadata to send; empty fields are filled from the call being served, if any.
    public var metadata: RPCMetadata

    public init(timeout: Duration? = nil, metadata: RPCMetadata = RPCMetadata()) {
        self.timeout = timeout
        self.metadata = metadata
    }
}
