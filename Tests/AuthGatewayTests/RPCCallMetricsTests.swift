import AuthAPI
import AuthProtobuf
import AuthRPC
import Foundation
import Prometheus
import Testing

@testable import AuthGateway

/// Every call the gateway makes is counted and timed by its method in one client interceptor.
@Suite struct RPCCallMetricsTests {
    /// A transport answering each call from a script: OK for ContactExists, NOT_FOUND for GetUser.
    struct ScriptedTransport: ClientTransport {
        func unary(_ call: ClientCall) async throws -> [UInt8] {
            if call.method == Auth_Identity_V1_Identity.Method.getUser {
                throw RPCError(code: .notFound, message: "No such user.", reason: "user_not_found")
            }
            return try Auth_Identity_V1_ContactExistsResponse(exists: true).serializedBytes()
        }
    }

    @Test func callsAreCountedByServiceMethodAndCode() async throws {
        let registry = PrometheusCollectorRegistry()
        let metrics = GatewayMetrics(factory: PrometheusMetricsFactory(registry: registry))
        let client = Auth_Identity_V1_Identity.Client(
            wrapping: RPCClient(
                transport: ScriptedTransport(),
                callerService: "gateway",
                interceptors: [RPCCallMetrics(service: "identity", metrics: metrics)]
            )
        )
        for _ in 0..<2 { _ = try await client.contactExists(.init(phone: "+15550100001")) }
        await #expect(throws: RPCError.self) { try await client.getUser(.init(userID: UUID().uuidString)) }
        var buffer: [UInt8] = []
        registry.emit(into: &buffer)
        let text = String(decoding: buffer, as: UTF8.self)
        #expect(
            text.contains(#"gateway_rpc_client_calls_total{service="identity",method="ContactExists",code="OK"} 2"#),
            "\(text)"
        )
        #expect(
            text.contains(#"gateway_rpc_client_calls_total{service="identity",method="GetUser",code="NOT_FOUND"} 1"#),
            "\(text)"
        )
        #expect(
            text.contains(#"gateway_rpc_client_duration_seconds_count{service="identity",method="ContactExists"} 2"#),
            "\(text)"
        )
    }
}
