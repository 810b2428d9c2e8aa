import AuthCrypto
import AuthRPC
import AuthTracing
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import Tracing

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// What the gateway knows about the request it serves: the socket peer, and, once
/// ``RequestIdentityMiddleware`` has run, the request id, the client's address and the trace.
public struct GatewayRequestContext: RequestContext, RemoteAddressRequestContext {
    public var coreContext: CoreRequestContextStorage
    public let remoteAddress: SocketAddress?
    /// `X-Request-Id`: made by the gateway for each request.
    public var requestID = ""
    /// The end user's address (``ClientAddressResolver``); "" when unknown.
    public var clientIP = ""
    /// W3C `traceparent` sent on to the services: the caller's when well-formed, else a new one.
    public var traceparent = ""

    public init(source: ApplicationRequestContextSource) {
        self.coreContext = .init(source: source)
        self.remoteAddress = source.channel.remoteAddress
    }

    /// The request body limit (Hummingbird's own collectors honour it too).
    public var maxUploadSize: Int { JSONRequest.maxBodyBytes }

    /// What every RPC made for this request carries.
    var rpcMetadata: RPCMetadata {
        RPCMetadata(requestID: requestID, traceparent: traceparent, endUserIP: clientIP)
    }
}

/// The request being served, for log lines written while serving it (see
/// ``RequestIdentityMiddleware/logMetadata``).
enum CurrentRequest {
    @TaskLocal static var requestID: String?
}

/// Gives each request its id, client address and trace, serves it with them, and stamps
/// `X-Request-Id` on the answer (also on errors: it runs outside ``ErrorResponseMiddleware``).
struct RequestIdentityMiddleware: RouterMiddleware {
    typealias Context = GatewayRequestContext
    let resolver: ClientAddressResolver
    /// Production only: warns about `X-Forwarded-For` from untrusted peers.
    let forwardedForWarnings: ForwardedForWarnings?
    /// The access log (`AUTH_GATEWAY_ACCESS_LOG`, on by default): one `info` line per request.
    let accessLog: Logger?

    func handle(
        _ request: Request,
        context: GatewayRequestContext,
        next: (Request, GatewayRequestContext) async throws -> Response
    ) async throws -> Response {
        var context = context
        context.requestID = SecureRandom.uuid().uuidString.lowercased()
        context.clientIP = resolver.clientAddress(
            peer: context.remoteAddress?.ipAddress,
            forwardedFor: request.headers[values: .xForwardedFor],
            warnings: forwardedForWarnings
        )
        context.traceparent = Self.spanTraceparent() ?? Self.traceparent(request.headers[.traceparent])
        let started = ContinuousClock.now
        let requestID = context.requestID
        let served = context
        do {
            var response = try await CurrentRequest.$requestID.withValue(requestID) {
                try await next(request, context)
            }
            response.headers[.xRequestID] = requestID
            logAccess(request, served, status: response.status.code, since: started)
            return response
        } catch {
            logAccess(request, served, status: 500, since: started)
            throw error
        }
    }

    /// One line per request: method, the route template as `openapi.yaml` writes it
    /// (`/v1/sessions/{id}`; `NotFound` for no route), status, duration and request id. Never
    /// the path's own values, a query, a header or a body.
    private func logAccess(
        _ request: Request,
        _ context: GatewayRequestContext,
        status: Int,
        since started: ContinuousClock.Instant
    ) {
        guard let accessLog else { return }
        let elapsed = ContinuousClock.now - started
        let (seconds, attoseconds) = elapsed.components
        let milliseconds = Double(seconds) * 1000 + Double(attoseconds) / 1e15
        accessLog.info(
            "Request",
            metadata: [
                "http.method": "\(request.method)",
                "http.route": "\(context.endpointPath ?? "NotFound")",
                "http.status": "\(status)",
                "http.duration_ms": "\((milliseconds * 1000).rounded() / 1000)",
                "request_id": "\(context.requestID)",
            ]
        )
    }

    /// The `traceparent` of the request's span when traces are on (the tracing middleware ran
    /// first), so that log lines name the trace the spans are in; nil otherwise.
    static func spanTraceparent() -> String? {
        guard let current = ServiceContext.current else { return nil }
        var fields: [String: String] = [:]
        InstrumentationSystem.instrument.inject(current, into: &fields, using: TraceFieldsInjector())
        return fields["traceparent"]
    }

    /// Collects the trace context's fields by name.
    private struct TraceFieldsInjector: Injector {
        func inject(_ value: String, forKey key: String, into carrier: inout [String: String]) {
            carrier[key.lowercased()] = value
        }
    }

    /// The caller's `traceparent` when it is a well-formed version-00 one (W3C Trace Context
    /// §3.2: lower-case hex, ids not all zeros), else a new trace with a random trace id and
    /// parent id, sampled. Read and written by ``W3CTraceContext``, as the tracer reads it.
    static func traceparent(_ header: String?) -> String {
        if let header, isValidTraceparent(header) { return header }
        var random = SystemRandomNumberGenerator()
        return W3CTraceContext(
            traceID: .random(using: &random),
            spanID: random.next() | 1 << 63,
            sampled: true
        ).traceparent
    }

    static func isValidTraceparent(_ value: String) -> Bool {
        value.hasPrefix("00-") && W3CTraceContext(traceparent: value) != nil
    }

    /// `request_id` of the request the current task serves.
    static let logMetadata = Logger.MetadataProvider {
        guard let requestID = CurrentRequest.requestID else { return [:] }
        return ["request_id": "\(requestID)"]
    }
}

/// Turns every failure into the API's JSON error answer: ``APIError``s as they are, a route
/// that does not exist as 404, anything else as 500 (logged: a bug).
struct ErrorResponseMiddleware: RouterMiddleware {
    typealias Context = GatewayRequestContext
    let logger: Logger

    func handle(
        _ request: Request,
        context: GatewayRequestContext,
        next: (Request, GatewayRequestContext) async throws -> Response
    ) async throws -> Response {
        do {
            return try await next(request, context)
        } catch {
            let apiError = Self.apiError(error)
            var metadata: Logger.Metadata = [
                "request_id": "\(context.requestID)", "http.status": "\(apiError.status.code)",
                "http.route": "\(context.endpointPath ?? "")",
            ]
            if let detail = apiError.detail { metadata["error.detail"] = "\(detail)" }
            if apiError.status.code >= 500 {
                metadata["error"] = "\(error)"
                logger.error("Request failed: \(apiError.reason)", metadata: metadata)
            } else {
                logger.debug("Request refused: \(apiError.reason)", metadata: metadata)
            }
            return Self.response(apiError)
        }
    }

    static func apiError(_ error: any Error) -> APIError {
        switch error {
        case let error as APIError: return error
        case let error as HTTPError:
            switch error.status {
            case .notFound: return .routeNotFound
            case .methodNotAllowed: return .methodNotAllowed
            case .contentTooLarge: return .payloadTooLarge
            default:
                return APIError(error.status, "http_error", error.body ?? error.status.reasonPhrase)
            }
        case let error as RPCError:
            return ServiceErrorMapping.apiError(for: error, service: "unknown")
        default:
            var internalError = APIError.internalError
            internalError.detail = "\(error)"
            return internalError
        }
    }

    static func response(_ error: APIError) -> Response {
        var headers: HTTPFields = [:]
        if let retryAfter = error.retryAfter, error.status == .tooManyRequests {
            headers[.retryAfter] = String(retryAfter)
        }
        if let response = try? JSONResponse.make(ErrorBody(error), status: error.status, headers: headers) {
            return response
        }
        return Response(status: error.status, headers: headers)
    }
}

extension HTTPField.Name {
    static let xRequestID = Self("X-Request-Id")!
    static let xForwardedFor = Self("X-Forwarded-For")!
    static let traceparent = Self("traceparent")!
}
