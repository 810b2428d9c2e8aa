import AuthPostgres
import AuthProtobuf
import AuthRPC
import AuthServiceCore
import AuthTestSupport
import Logging
import Testing

/// The services' one error conversion, through a router as a service registers it.
@Suite struct ServiceErrorInterceptorTests {
    struct DomainError: RPCErrorConvertible {
        var rpcError: RPCError { RPCError(code: .notFound, message: "No such thing.", reason: "thing_not_found") }
    }

    struct Unexpected: Error, CustomStringConvertible {
        var description: String { "a secret detail" }
    }

    /// A service of one method that throws whatever the test gives it.
    struct Throwing: RegistrableRPCService {
        static let method = MethodDescriptor(service: "auth.test.v1.Test", method: "Fail")
        let error: any Error & Sendable
        let logger: Logger

        func registerMethods(with router: inout RPCRouter) {
            let error = self.error
            router.register(Self.method, allowedCallers: .anyAuthenticated) {
                (_: Auth_Health_V1_HealthCheckRequest, _: ServerContext) -> Auth_Health_V1_HealthCheckResponse in
                throw error
            }
        }

        var interceptors: [any RPCServerInterceptor] { [ServiceErrorInterceptor(service: "test", logger: logger)] }
    }

    func status(of error: any Error & Sendable, log: CapturedLog = CapturedLog()) async -> RPCError? {
        var router = RPCRouter()
        router.register(Throwing(error: error, logger: log.logger()))
        let route = router.route(forPath: Throwing.method.path)
        let result = await route?.run(
            payload: [],
            context: ServerContext(method: Throwing.method, authenticatedCaller: "gateway")
        )
        guard case .failure(let status)? = result else { return nil }
        return status
    }

    @Test(arguments: [
        (PostgresError.Code.unavailable, RPCError.Code.unavailable, "unavailable", "The test database is unavailable."),
        (.connectionLost, .unavailable, "unavailable", "The test database is unavailable."),
        (.poolTimeout, .unavailable, "unavailable", "The test database is unavailable."),
        (.closed, .unavailable, "unavailable", "The test database is unavailable."),
        (.timeout, .deadlineExceeded, "deadline_exceeded", "A database statement timed out."),
        (.cancelled, .cancelled, "cancelled", "The call was cancelled."),
        (.uniqueViolation, .internal, "internal", "Internal error."),
        (.queryFailed, .internal, "internal", "Internal error."),
    ])
    func databaseErrors(code: PostgresError.Code, status: RPCError.Code, reason: String, message: String) async {
        let answer = await self.status(of: PostgresError(code: code, message: "m", table: "users"))
        #expect(answer?.code == status)
        #expect(answer?.reason == reason)
        #expect(answer?.message == message)
    }

    @Test func aServiceErrorTravelsAsItSaysAndOthersSayNothing() async {
        let domain = await status(of: DomainError())
        #expect(domain?.code == .notFound && domain?.reason == "thing_not_found" && domain?.message == "No such thing.")
        let cancelled = await status(of: CancellationError())
        #expect(cancelled?.code == .cancelled && cancelled?.reason == "cancelled")
        let unexpected = await status(of: Unexpected())
        #expect(unexpected?.code == .internal && unexpected?.reason == "internal")
        #expect(unexpected?.message == "Internal error.")
    }

    /// INTERNAL and UNAVAILABLE are logged once, with what caused them; the rest are answers
    /// the service meant, not failures.
    @Test func internalAndUnavailableAreLoggedWithTheirCause() async {
        let internalLog = CapturedLog()
        _ = await status(of: Unexpected(), log: internalLog)
        #expect(internalLog.records.withLock { $0.count } == 1)
        let line = internalLog.lines.first ?? ""
        #expect(line.contains("RPC call failed") && line.contains("a secret detail"), "\(line)")
        #expect(line.contains("/auth.test.v1.Test/Fail"), "\(line)")
        let unavailableLog = CapturedLog()
        _ = await status(of: PostgresError(code: .unavailable, message: "connection refused"), log: unavailableLog)
        #expect(unavailableLog.lines.count == 1)
        #expect(unavailableLog.lines.first?.contains("connection refused") == true)
        let quietLog = CapturedLog()
        _ = await status(of: DomainError(), log: quietLog)
        _ = await status(of: PostgresError(code: .timeout, message: "statement timeout"), log: quietLog)
        #expect(quietLog.lines.isEmpty)
    }
}
