/// A call as a client transport sends it: everything resolved, nothing left to default.
public struct ClientCall: Sendable {
    public var method: MethodDescriptor
    public var payload: [UInt8]
    public var metadata: RPCMetadata
    /// Time the caller waits; sent on the wire as the call's timeout.
    public var timeout: Duration?

    public init(method: MethodDescriptor, payload: [UInt8], metadata: RPCMetadata, timeout: Duration?) {
        self.method = method
        self.payload = payload
        self.metadata = metadata
        self.timeout = timeout
    }
}

/// Carries calls to servers: TCP (`AuthRPCNIO`) or in-process (``InProcessTransport``).
///
/// A transport returns the response bytes or throws an ``RPCError``; it enforces the call's
/// timeout on its side too, so a caller never waits past it.
public protocol ClientTransport: Sendable {
    func unary(_ call: ClientCall) async throws -> [UInt8]
}
