import AuthAPI
import AuthProtobuf
import AuthRPC
import CoreMetrics
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import HTTPTypes
import Hummingbird
import Metrics

/// The gateway's metrics (docs/gateway.md#metrics), sent to `factory` (the process's
/// Prometheus registry; `GET /metrics` renders it).
struct GatewayMetrics: Sendable {
    let factory: any MetricsFactory

    /// `http_requests_total{route,method,status}` and `http_request_duration_seconds{route,method}`.
    func request(route: String, method: HTTPRequest.Method, status: Int, duration: Duration) {
        Counter(
            label: "http_requests_total",
            dimensions: [("route", route), ("method", method.rawValue), ("status", String(status))],
            factory: factory
        ).increment()
        Timer(
            label: "http_request_duration_seconds",
            dimensions: [("route", route), ("method", method.rawValue)],
            factory: factory
        ).recordNanoseconds(duration.nanoseconds)
    }

    /// `gateway_rpc_client_calls_total{service,method,code}` and
    /// `gateway_rpc_client_duration_seconds{service,method}`.
    func rpcCall(service: String, method: String, code: String, duration: Duration) {
        Counter(
            label: "gateway_rpc_client_calls_total",
            dimensions: [("service", service), ("method", method), ("code", code)],
            factory: factory
        ).increment()
        Timer(
            label: "gateway_rpc_client_duration_seconds",
            dimensions: [("service", service), ("method", method)],
            factory: factory
        ).recordNanoseconds(duration.nanoseconds)
    }
}

extension Duration {
    var nanoseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }
}

/// Counts each request by its route template and status, and times it.
struct MetricsMiddleware: RouterMiddleware {
    typealias Context = GatewayRequestContext
    let metrics: GatewayMetrics

    func handle(
        _ request: Request,
        context: GatewayRequestContext,
        next: (Request, GatewayRequestContext) async throws -> Response
    ) async throws -> Response {
        let start = ContinuousClock.now
        let response = try await next(request, context)
        let route = context.endpointPath.map { $0 == "NotFound" ? "unmatched" : $0 } ?? "unmatched"
        metrics.request(route: route, method: request.method, status: response.status.code, duration: .now - start)
        return response
    }
}

/// The three services, called for one request: each call carries the request's id, client
/// address and trace in its metadata, is bounded by the gateway's RPC timeout, is counted in
/// the metrics, and a refusal becomes an ``APIError`` through ``ServiceErrorMapping``.
struct Backends: Sendable {
    let identity: Auth_Identity_V1_Identity.Client
    let otp: Auth_Otp_V1_OTP.Client
    let session: Auth_Session_V1_Session.Client
    let timeout: Duration
    let metrics: GatewayMetrics

    enum Service: String {
        case identity
        case otpDispatch = "otp-dispatch"
        case session
    }

    func call<Response: Sendable>(
        _ service: Service,
        _ method: String,
        _ context: GatewayRequestContext,
        rules: ServiceErrorMapping.Rules = .plain,
        _ body: (CallOptions) async throws -> Response
    ) async throws -> Response {
        let options = CallOptions(timeout: timeout, metadata: context.rpcMetadata)
        let start = ContinuousClock.now
        do {
            let response = try await body(options)
            metrics.rpcCall(service: service.rawValue, method: method, code: "OK", duration: .now - start)
            return response
        } catch let error as RPCError {
            metrics.rpcCall(service: service.rawValue, method: method, code: error.code.description, duration: .now - start)
            throw ServiceErrorMapping.apiError(for: error, service: service.rawValue, rules: rules)
        } catch {
            metrics.rpcCall(service: service.rawValue, method: method, code: "UNKNOWN", duration: .now - start)
            var unavailable = APIError.unavailable
            unavailable.detail = "\(service.rawValue)/\(method): \(error)"
            throw unavailable
        }
    }
}
