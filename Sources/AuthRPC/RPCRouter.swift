import AuthProtobuf
import Tracing

/// Where a server starts a handler. The choice is explicit per method because a handler's
/// synchronous start (until its first `await` that suspends) otherwise runs on the event loop
/// that read the request, holding up every other connection on that loop.
public enum HandlerExecution: Sendable, Hashable {
    /// In a task on Swift's global executor; the event loop only hands the call over. The
    /// default, and the only choice for handlers that sign, verify, hash, encrypt or do any
    /// other CPU work (or a blocking call) before they suspend. Costs a thread hop per call.
    case offEventLoop
    /// On the event loop that read the request (`Task.immediate`), until the handler's first
    /// suspension; a handler that does not suspend answers within the same read. Only for
    /// handlers that do next to nothing before they suspend (e.g. Health/Check).
    case onEventLoopUntilFirstSuspension
}

/// The methods a server serves, by path. Typed handlers are registered once at start-up
/// (generated `registerMethods(with:)` does it); the transport looks them up per call.
public struct RPCRouter: Sendable {
    /// A handler after type erasure: request bytes in, response bytes out.
    public typealias ErasedHandler = @Sendable ([UInt8], ServerContext) async throws -> [UInt8]

    /// One registered method.
    public struct Route: Sendable {
        public let method: MethodDescriptor
        /// Who may call it; checked before the handler runs.
        public let allowedCallers: AllowedCallers
        public let handler: ErasedHandler
        /// Where the server starts the handler; see ``HandlerExecution``.
        public internal(set) var execution: HandlerExecution = .offEventLoop
        /// Run around the handler, first outermost (the service's ``RegistrableRPCService/interceptors``).
        public internal(set) var interceptors: [any RPCServerInterceptor] = []

        @usableFromInline
        init(method: MethodDescriptor, allowedCallers: AllowedCallers, handler: @escaping ErasedHandler) {
            self.method = method
            self.allowedCallers = allowedCallers
            self.handler = handler
        }
    }

    @usableFromInline
    var routes: [String: Route] = [:]

    public init() {}

    /// Registers a typed handler, with the callers allowed to call it (there is no default:
    /// every method says who may call it). Registering the same method twice replaces the first.
    /// (Inlinable so the decode and encode are specialized for the message types.)
    @inlinable
    public mutating func register<Request: ProtobufCMessage, Response: ProtobufCMessage>(
        _ method: MethodDescriptor,
        allowedCallers: AllowedCallers,
        handler: @escaping @Sendable (Request, ServerContext) async throws -> Response
    ) {
        routes[method.path] = Route(method: method, allowedCallers: allowedCallers) { bytes, context in
            let request: Request
            do {
                request = try Request(serializedBytes: bytes)
            } catch {
                throw RPCError(
                    code: .invalidArgument,
                    message: "The request message of \(method.path) could not be decoded.",
                    reason: RPCError.Reason.malformedRequest
                )
            }
            let response = try await handler(request, context)
            do {
                return try response.serializedBytes()
            } catch {
                throw RPCError(
                    code: .internal,
                    message: "The response could not be encoded.",
                    reason: RPCError.Reason.`internal`
                )
            }
        }
    }

    /// Declares where `method`'s handler starts (``HandlerExecution/offEventLoop`` unless
    /// declared otherwise). Call after registering the method.
    public mutating func setExecution(_ execution: HandlerExecution, for method: MethodDescriptor) {
        precondition(routes[method.path] != nil, "\(method.path) is not registered")
        routes[method.path]?.execution = execution
    }

    /// Registers every method of a service, each run through the service's interceptors.
    public mutating func register(_ service: some RegistrableRPCService) {
        var added = RPCRouter()
        service.registerMethods(with: &added)
        let interceptors = service.interceptors
        for (path, var route) in added.routes {
            route.interceptors = interceptors
            routes[path] = route
        }
    }

    /// The route for a wire path, if any.
    public func route(forPath path: String) -> Route? { routes[path] }

    /// Every registered method, sorted by path.
    public var methods: [MethodDescriptor] { routes.values.map(\.method).sorted { $0.path < $1.path } }
}

/// A service implementation that can add its methods to a router.
public protocol RegistrableRPCService: Sendable {
    func registerMethods(with router: inout RPCRouter)
    /// Run around each of its methods (none unless the service says).
    var interceptors: [any RPCServerInterceptor] { get }
}

extension RegistrableRPCService {
    public var interceptors: [any RPCServerInterceptor] { [] }
}

extension RPCRouter.Route {
    /// `PERMISSION_DENIED` / `caller_not_allowed` when `caller` may not call this method, else nil.
    public func authorize(caller: String) -> RPCError? {
        guard !allowedCallers.allows(caller) else { return nil }
        return RPCError(
            code: .permissionDenied,
            message: "Caller \(caller.isEmpty ? "(none)" : caller) may not call \(method.path).",
            reason: RPCError.Reason.callerNotAllowed
        )
    }

    /// Runs the handler through the route's interceptors with `context` as
    /// ``ServerContext/current`` and converts whatever they throw into an ``RPCError``. A
    /// caller the method does not allow gets `PERMISSION_DENIED` (`caller_not_allowed`) without
    /// the interceptors or the handler running.
    public func run(payload: [UInt8], context: ServerContext) async -> Result<[UInt8], RPCError> {
        if let refusal = authorize(caller: context.authenticatedCaller) {
            return .failure(refusal)
        }
        guard RPCTracing.isTracing else { return await runUntraced(payload: payload, context: context) }
        var traceContext = ServiceContext.current ?? .topLevel
        InstrumentationSystem.instrument.extract(context.metadata, into: &traceContext, using: RPCMetadataExtractor())
        return await withSpan(method.path, context: traceContext, ofKind: .server) { span in
            let result = await self.runUntraced(payload: payload, context: context)
            if span.isRecording {
                RPCTracing.annotate(span, method)
                RPCTracing.finish(span, code: result.failure?.code)
            }
            return result
        }
    }

    private func runUntraced(payload: [UInt8], context: ServerContext) async -> Result<[UInt8], RPCError> {
        do {
            let bytes = try await ServerContext.$current.withValue(context) {
                try await Self.call(interceptors[...], handler, payload, context)
            }
            return .success(bytes)
        } catch {
            return .failure(RPCError(converting: error))
        }
    }

    private static func call(
        _ interceptors: ArraySlice<any RPCServerInterceptor>,
        _ handler: @escaping RPCRouter.ErasedHandler,
        _ payload: [UInt8],
        _ context: ServerContext
    ) async throws -> [UInt8] {
        guard let first = interceptors.first else { return try await handler(payload, context) }
        let rest = interceptors.dropFirst()
        return try await first.intercept(context: context) { context in
            try await call(rest, handler, payload, context)
        }
    }
}

extension Result {
    /// The error of a failure; nil for a success.
    fileprivate var failure: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }
}
