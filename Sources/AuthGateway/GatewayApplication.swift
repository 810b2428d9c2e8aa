import AuthAPI
import AuthProtobuf
import AuthRPC
import AuthRPCNIO
import AuthServiceRuntime
import Foundation
import Hummingbird
import Logging

/// The HTTP/JSON API the apps call. Each route is implemented by calling the backend services
/// over RPC. Until those have features, it serves health only.
public struct GatewayApplication: Sendable {
    public let configuration: ServiceConfiguration
    public let logger: Logger
    let identity: RPCClient
    let otpDispatch: RPCClient
    let session: RPCClient

    public init(configuration: ServiceConfiguration, logger: Logger) {
        self.configuration = configuration
        self.logger = logger
        func client(_ service: AuthServiceName) -> RPCClient {
            configuration.rpcClient(for: service, logger: logger, defaultTimeout: .seconds(5))
        }
        self.identity = client(.identity)
        self.otpDispatch = client(.otpDispatch)
        self.session = client(.session)
    }

    /// The Hummingbird application, ready to run as a `Service`.
    public func makeApplication() -> some ApplicationProtocol {
        let router = Router()
        router.get("/health/live") { _, _ in
            HealthReport(status: "SERVING", services: [:])
        }
        router.get("/health/ready") { _, _ -> EditedResponse<HealthReport> in
            let report = await self.readiness()
            return EditedResponse(status: report.status == "SERVING" ? .ok : .serviceUnavailable, response: report)
        }
        return Application(
            router: router,
            configuration: ApplicationConfiguration(
                address: .hostname(configuration.bindHost, port: configuration.port),
                serverName: "auth-gateway"
            ),
            logger: logger
        )
    }

    /// Asks every backend service's Health/Check, concurrently, each bounded by one second.
    func readiness() async -> HealthReport {
        let backends: [(String, RPCClient)] = [
            (AuthServiceName.identity.rawValue, identity),
            (AuthServiceName.otpDispatch.rawValue, otpDispatch),
            (AuthServiceName.session.rawValue, session),
        ]
        let statuses = await withTaskGroup(of: (String, String).self) { group in
            for (name, client) in backends {
                group.addTask {
                    do {
                        let response = try await Auth_Health_V1_Health.Client(wrapping: client)
                            .check(Auth_Health_V1_HealthCheckRequest(), options: CallOptions(timeout: .seconds(1)))
                        return (name, response.status == .serving ? "SERVING" : "NOT_SERVING")
                    } catch {
                        return (name, "UNREACHABLE")
                    }
                }
            }
            var statuses: [String: String] = [:]
            for await (name, status) in group { statuses[name] = status }
            return statuses
        }
        let allServing = statuses.values.allSatisfy { $0 == "SERVING" }
        return HealthReport(status: allServing ? "SERVING" : "NOT_SERVING", services: statuses)
    }
}

/// `GET /health/ready` body.
struct HealthReport: ResponseCodable {
    var status: String
    var services: [String: String]
}
