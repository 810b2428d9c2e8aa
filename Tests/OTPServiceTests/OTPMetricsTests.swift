import AuthAPI
import AuthTestSupport
import Foundation
import Prometheus
import Testing

@testable import OTPService

@Suite struct OTPMetricsTests {
    /// The send→verify funnel per channel, provider and calling code, in Prometheus text.
    @Test func theFunnelIsCounted() async throws {
        let registry = PrometheusCollectorRegistry()
        let metrics = OTPMetrics(factory: PrometheusMetricsFactory(registry: registry))
        try await PostgresTestDatabase.withTestSchema(maxConnections: 4, logger: testLogger) { pool, schema in
            var configuration = testConfiguration()
            configuration.schema = schema
            let clock = ManualClock()
            let service = try await OTPService.start(
                database: pool,
                configuration: configuration,
                clock: clock,
                metrics: metrics,
                logger: testLogger
            )
            let client = makeClient(service)
            let provider = ScriptedProvider(name: "webhook")
            let dispatcher = service.makeDispatcher(providers: ProviderSet(sms: [provider], email: [provider]))
            let first = try await client.start(.init(destination: "+919999912345", purpose: .login))
            _ = try await client.start(.init(destination: "+919999912346", purpose: .login))
            #expect(try await dispatcher.deliverDue() == 2)
            let rows = try await pool.query("SELECT code FROM \(identifier: schema).messages LIMIT 0")
            _ = rows
            let code = try #require(
                provider.sent.first { $0.verificationID.uuidString.lowercased() == first.verificationID }?.code
            )
            _ = try await client.check(.init(verificationID: first.verificationID, code: code))
        }
        var buffer: [UInt8] = []
        registry.emit(into: &buffer)
        let text = String(decoding: buffer, as: UTF8.self)
        #expect(text.contains(#"otp_codes_started_total{channel="sms",calling_code="91",test="false"} 2"#))
        #expect(text.contains(#"otp_codes_sent_total{channel="sms",provider="webhook",calling_code="91"} 2"#))
        #expect(text.contains(#"otp_codes_verified_total{channel="sms",calling_code="91"} 1"#))
    }
}
