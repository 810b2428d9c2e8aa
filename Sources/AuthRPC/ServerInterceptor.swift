/// Runs around every call of a service's methods, as grpc-swift 2's `ServerInterceptor` does:
/// it sees the call's context and what the handler returns or throws, and may change either.
/// A service lists its interceptors in ``RegistrableRPCService/interceptors``; the router
/// runs them, first listed outermost, after the caller check and around the handler (its
/// request decoding and response encoding included). The services' one error conversion (database, cancellation and crypto
/// errors to statuses) is such an interceptor.
public protocol RPCServerInterceptor: Sendable {
    /// Calls `next` (the rest of the chain, then the handler) or answers without it.
    func intercept(
        context: ServerContext,
        next: @Sendable (ServerContext) async throws -> [UInt8]
    ) async throws -> [UInt8]
}
