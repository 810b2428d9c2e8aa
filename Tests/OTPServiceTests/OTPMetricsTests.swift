import AuthAPI
import AuthPostgres
import AuthTestSupport
import Foundation
import Prometheus
import Testing

@testable import OTPService

@Suite struct OTPMetricsTests {
    /// A service in a fresh schema, its metrics sent to `metrics`, on a clock the test moves.
    static func withService(
        metrics: OTPMetrics,
        _ body: (OTPService, ManualClock, PostgresPool, String) async throws -> Void
    ) async throws {
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
            try await body(service, clock, pool, schema)
        }
    }

    /// The send→verify funnel per channel, provider and calling code, in Prometheus text.
    @Test func theFunnelIsCounted() async throws {
        let registry = PrometheusCollectorRegistry()
        let metrics = OTPMetrics(factory: PrometheusMetricsFactory(registry: registry))
        try await Self.withService(metrics: metrics) { service, clock, pool, schema in
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

    /// The outbox's backlog gauges: what waits for a provider, and for how long the oldest has.
    @Test func theOutboxBacklogIsSampled() async throws {
        let registry = PrometheusCollectorRegistry()
        let metrics = OTPMetrics(factory: PrometheusMetricsFactory(registry: registry))
        func gauges() -> String {
            var buffer: [UInt8] = []
            registry.emit(into: &buffer)
            return String(decoding: buffer, as: UTF8.self)
        }
        try await Self.withService(metrics: metrics) { service, clock, pool, schema in
            try await service.recordOutboxBacklog()
            #expect(gauges().contains("otp_outbox_pending_messages 0.0\n"), "\(gauges())")
            #expect(gauges().contains("otp_outbox_oldest_pending_age_seconds 0.0\n"))

            let client = makeClient(service)
            _ = try await client.start(.init(destination: "+919999912347", purpose: .login))
            clock.advance(seconds: 20)
            _ = try await client.start(.init(destination: "+919999912348", purpose: .login))
            clock.advance(seconds: 10)
            try await service.recordOutboxBacklog()
            #expect(gauges().contains("otp_outbox_pending_messages 2.0\n"), "\(gauges())")
            #expect(gauges().contains("otp_outbox_oldest_pending_age_seconds 30.0\n"), "\(gauges())")

            let provider = ScriptedProvider(name: "webhook")
            let dispatcher = service.makeDispatcher(providers: ProviderSet(sms: [provider], email: [provider]))
            #expect(try await dispatcher.deliverDue() == 2)
            try await service.recordOutboxBacklog()
            #expect(gauges().contains("otp_outbox_pending_messages 0.0\n"), "\(gauges())")
        }
    }
}
