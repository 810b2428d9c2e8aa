import AuthAPI
import AuthBackoff
import AuthProtobuf
import AuthRPC
import CoreMetrics
import HTTPTypes
import Hummingbird
import Metrics
import Synchronization

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The gateway's metrics (docs/gateway.md#metrics), sent to `factory` (the process's
/// Prometheus registry; `GET /metrics` renders it).
///
/// Each (counter, timer) pair is made once per label set and kept: making one asks the
/// registry, which validates the names and looks the series up under a lock, several
/// microseconds each time, and a sign-in records fourteen. The label sets are bounded (route
/// templates, methods, statuses, service methods, status codes); past `maxSeries` pairs,
/// new ones are made each time instead of kept.
final class GatewayMetrics: Sendable {
    let factory: any MetricsFactory
    private let series = Mutex<[SeriesKey: (Counter, Timer)]>([:])
    private static let maxSeries = 4_096

    init(factory: any MetricsFactory) {
        self.factory = factory
    }

    /// A counter's label and its three dimensions' values.
    private struct SeriesKey: Hashable {
        var counter: String
        var values: [String]
    }

    /// The counter of three `dimensions` and the timer of the first two.
    private func pair(counter: String, timer: String, _ dimensions: [(String, String)]) -> (Counter, Timer) {
        let key = SeriesKey(counter: counter, values: dimensions.map(\.1))
        if let pair = series.withLock({ $0[key] }) { return pair }
        let pair = (
            Counter(label: counter, dimensions: dimensions, factory: factory),
            Timer(label: timer, dimensions: Array(dimensions.dropLast()), factory: factory)
        )
        series.withLock { if $0.count < Self.maxSeries { $0[key] = pair } }
        return pair
    }

    /// `http_requests_total{route,method,status}` and `http_request_duration_seconds{route,method}`.
    func request(route: String, method: HTTPRequest.Method, status: Int, duration: Duration) {
        let (counter, timer) = pair(
            counter: "http_requests_total",
            timer: "http_request_duration_seconds",
            [("route", route), ("method", method.rawValue), ("status", String(status))]
        )
        counter.increment()
        timer.recordNanoseconds(duration.nanoseconds)
    }

    /// `gateway_rpc_client_calls_total{service,method,code}` and
    /// `gateway_rpc_client_duration_seconds{service,method}`.
    func rpcCall(service: String, method: String, code: String, duration: Duration) {
        let (counter, timer) = pair(
            counter: "gateway_rpc_client_calls_total",
            timer: "gateway_rpc_client_duration_seconds",
            [("service", service), ("method", method), ("code", code)]
        )
        counter.increment()
        timer.recordNanoseconds(duration.nanoseconds)
    }
}

extension Duration {
    var nanoseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }
}

/// Counts and times each call the gateway makes, by service, method and status code:
/// `gateway_rpc_client_calls_total` and `gateway_rpc_client_duration_seconds`. One per client,
/// run around every call (``RPCClientInterceptor``), so no call site names its method twice.
struct RPCCallMetrics: RPCClientInterceptor {
    /// The metrics' `service` label: `identity`, `otp-dispatch`, `session`.
    let service: String
    let metrics: GatewayMetrics

    func intercept(method: MethodDescriptor, next: () async throws -> [UInt8]) async throws -> [UInt8] {
        let start = ContinuousClock.now
        do {
            let bytes = try await next()
            metrics.rpcCall(service: service, method: method.method, code: "OK", duration: .now - start)
            return bytes
        } catch let error as RPCError {
            metrics.rpcCall(
                service: service,
                method: method.method,
                code: error.code.description,
                duration: .now - start
            )
            throw error
        } catch {
            metrics.rpcCall(service: service, method: method.method, code: "UNKNOWN", duration: .now - start)
            throw error
        }
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

    /// Runs `body`'s calls to `service` with the request's metadata and the gateway's timeout,
    /// and turns a refusal into an ``APIError`` by `rules`. (Each call is counted and timed by
    /// its method in the clients' ``RPCCallMetrics`` interceptor.)
    func call<Response: Sendable>(
        _ service: Service,
        _ context: GatewayRequestContext,
        rules: ServiceErrorMapping.Rules = .plain,
        _ body: (CallOptions) async throws -> Response
    ) async throws -> Response {
        let options = CallOptions(timeout: timeout, metadata: context.rpcMetadata)
        do {
            return try await body(options)
        } catch let error as RPCError {
            throw ServiceErrorMapping.apiError(for: error, service: service.rawValue, rules: rules)
        } catch {
            var unavailable = APIError.unavailable
            unavailable.detail = "\(service.rawValue): \(error)"
            throw unavailable
        }
    }

    /// Ends every session of `userID` (but `except`), trying again while session is
    /// unavailable: a password reset, change or clearing and an account deletion must not leave
    /// old sessions alive because one call was lost (issue 19). RevokeAll is idempotent, so a
    /// retry after a call that did reach session changes nothing. Up to ``revokeAttempts``
    /// attempts, 100 ms doubling to 1 s apart (×0.5–1.5); then 503 `unavailable`.
    func revokeAllSessions(
        userID: String,
        except: String = "",
        reason: String,
        forgetPersonalData: Bool = false,
        _ context: GatewayRequestContext
    ) async throws {
        let backoff = ExponentialBackoff(initial: .milliseconds(100), limit: .seconds(1), jitter: 0.5...1.5)
        var failures = 0
        while true {
            do {
                _ = try await call(.session, context) { options in
                    try await session.revokeAll(
                        Auth_Session_V1_RevokeAllRequest(
                            userID: userID,
                            exceptSessionID: except,
                            reason: reason,
                            forgetPersonalData: forgetPersonalData
                        ),
                        options: options
                    )
                }
                return
            } catch let error as APIError where error.status == .serviceUnavailable {
                failures += 1
                guard failures < Self.revokeAttempts else { throw error }
                try await Task.sleep(for: backoff.delay(afterFailures: failures))
            }
        }
    }

    static let revokeAttempts = 4
}
