/// Runs around every call a client makes, as grpc-swift 2's `ClientInterceptor` does: it sees
/// the method and what the call returned or threw (e.g. the gateway counts and times each call
/// by its method descriptor in one place). Listed in ``RPCClient/interceptors``, first
/// outermost, around the transport's call (encoding before, decoding after, both outside).
public protocol RPCClientInterceptor: Sendable {
    /// Calls `next` (the rest of the chain, then the transport) or answers without it.
    func intercept(
        method: MethodDescriptor,
        next: () async throws -> [UInt8]
    ) async throws -> [UInt8]
}
