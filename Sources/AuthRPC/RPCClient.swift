import AuthProtobuf
import Tracing

/// Makes typed calls over a transport. Generated `Client` structs wrap one.
///
/// Inside a handler, calls carry the served call's request id, trace context and end-user
/// IP, and never wait past its deadline.
public struct RPCClient: Sendable {
    public let transport: any ClientTransport
    /// The name this client's service calls itself in metadata (`caller_service`).
    public let callerService: String
    /// The timeout of a call whose options and context give none.
    public var defaultTimeout: Duration
    /// Run around each call, first outermost.
    public var interceptors: [any RPCClientInterceptor]

    public init(
        transport: any ClientTransport,
        callerService: String,
        defaultTimeout: Duration = .seconds(10),
        interceptors: [any RPCClientInterceptor] = []
    ) {
        self.transport = transport
        self.callerService = callerService
        self.defaultTimeout = defaultTimeout
        self.interceptors = interceptors
    }

    @inlinable
    public func unary<Request: ProtobufCMessage, Response: ProtobufCMessage>(
        _ method: MethodDescriptor,
        request: Request,
        options: CallOptions = CallOptions()
    ) async throws -> Response {
        let call = try self.prepare(method, request: request, options: options)
        let bytes = try await self.send(call)
        do {
            return try Response(serializedBytes: bytes)
        } catch {
            throw RPCError(
                code: .internal,
                message: "The response of \(method.path) could not be decoded.",
                reason: RPCError.Reason.malformedResponse
            )
        }
    }

    /// Calls `method` with a request already encoded, returning the response's bytes: for tools
    /// that work from descriptors rather than generated types (authctl's `call` and `bench`).
    public func unary(
        _ method: MethodDescriptor,
        payload: [UInt8],
        options: CallOptions = CallOptions()
    ) async throws -> [UInt8] {
        try await self.send(try self.prepare(method, payload: { payload }, options: options))
    }

    /// The call through the interceptors to the transport, in a `client` span whose trace
    /// context the metadata carries (``RPCTracing``).
    @usableFromInline
    func send(_ call: ClientCall) async throws -> [UInt8] {
        guard RPCTracing.isTracing else { return try await sendUntraced(call) }
        return try await withSpan(call.method.path, ofKind: .client) { span in
            guard span.isRecording else { return try await self.sendUntraced(call) }
            RPCTracing.annotate(span, call.method)
            var call = call
            InstrumentationSystem.instrument.inject(span.context, into: &call.metadata, using: RPCMetadataInjector())
            do {
                let response = try await self.sendUntraced(call)
                RPCTracing.finish(span, code: nil)
                return response
            } catch let error as RPCError {
                RPCTracing.finish(span, code: error.code)
                throw error
            }
        }
    }

    private func sendUntraced(_ call: ClientCall) async throws -> [UInt8] {
        guard !interceptors.isEmpty else { return try await transport.unary(call) }
        return try await Self.send(call, through: interceptors[...], transport)
    }

    private static func send(
        _ call: ClientCall,
        through interceptors: ArraySlice<any RPCClientInterceptor>,
        _ transport: any ClientTransport
    ) async throws -> [UInt8] {
        guard let first = interceptors.first else { return try await transport.unary(call) }
        let rest = interceptors.dropFirst()
        return try await first.intercept(method: call.method) { try await send(call, through: rest, transport) }
    }

    /// Resolves metadata and timeout against the call being served, if any.
    @inlinable
    func prepare<Request: ProtobufCMessage>(
        _ method: MethodDescriptor,
        request: Request,
        options: CallOptions,
        now: ContinuousClock.Instant = .now
    ) throws -> ClientCall {
        try self.prepare(
            method,
            payload: {
                do {
                    return try request.serializedBytes()
                } catch {
                    throw RPCError(
                        code: .invalidArgument,
                        message: "The request could not be encoded: \(error)",
                        reason: RPCError.Reason.malformedRequest
                    )
                }
            },
            options: options,
            now: now
        )
    }

    @inlinable
    func prepare(
        _ method: MethodDescriptor,
        payload encode: () throws -> [UInt8],
        options: CallOptions,
        now: ContinuousClock.Instant = .now
    ) throws -> ClientCall {
        var metadata = options.metadata
        var timeout = options.timeout ?? defaultTimeout
        if let served = ServerContext.current {
            if metadata.requestID.isEmpty { metadata.requestID = served.metadata.requestID }
            if metadata.traceparent.isEmpty { metadata.traceparent = served.metadata.traceparent }
            if metadata.tracestate.isEmpty { metadata.tracestate = served.metadata.tracestate }
            if metadata.endUserIP.isEmpty { metadata.endUserIP = served.metadata.endUserIP }
            if let remaining = served.timeRemaining(now: now) {
                guard remaining > .zero else {
                    throw RPCError(
                        code: .deadlineExceeded,
                        message: "The deadline of the call being served has passed.",
                        reason: RPCError.Reason.deadlineExceeded
                    )
                }
                timeout = min(timeout, remaining)
            }
        }
        metadata.callerService = callerService
        let payload = try encode()
        return ClientCall(method: method, payload: payload, metadata: metadata, timeout: timeout)
    }
}
