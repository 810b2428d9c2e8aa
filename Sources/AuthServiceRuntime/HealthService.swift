import AuthAPI
import AuthProtobuf
import AuthRPC
import Synchronization

/// `auth.health.v1.Health`: SERVING while the server runs and its readiness check (the
/// database answering) passes; NOT_SERVING once shutdown began or the check fails.
public final class HealthService: Auth_Health_V1_Health.ServiceProtocol {
    /// Services this server serves, by full name (e.g. `auth.session.v1.Session`).
    public let serviceNames: Set<String>
    private let readiness: @Sendable () async -> Bool
    private let shuttingDown = Atomic<Bool>(false)

    /// - Parameter readiness: returns whether dependencies (the database) answer. Keep it
    ///   fast and bounded: it runs on every Check.
    public init(serviceNames: Set<String>, readiness: @escaping @Sendable () async -> Bool) {
        self.serviceNames = serviceNames
        self.readiness = readiness
    }

    /// Any authenticated caller may ask (load balancers' probes run `authctl health` with the
    /// service's own certificate, gateways check readiness).
    public var allowedCallers: Auth_Health_V1_Health.AllowedCallersByMethod {
        .init(check: .anyAuthenticated)
    }

    /// From now on Check answers NOT_SERVING (load balancers stop sending new work).
    public func markShuttingDown() {
        shuttingDown.store(true, ordering: .relaxed)
    }

    public func check(
        request: Auth_Health_V1_HealthCheckRequest,
        context: ServerContext
    ) async throws -> Auth_Health_V1_HealthCheckResponse {
        guard
            request.service.isEmpty || request.service == Auth_Health_V1_Health.serviceName
                || serviceNames.contains(request.service)
        else {
            return Auth_Health_V1_HealthCheckResponse(status: .serviceUnknown)
        }
        if shuttingDown.load(ordering: .relaxed) {
            return Auth_Health_V1_HealthCheckResponse(status: .notServing)
        }
        return Auth_Health_V1_HealthCheckResponse(status: await readiness() ? .serving : .notServing)
    }
}
