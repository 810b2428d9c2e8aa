import AuthPostgres
import AuthServiceRuntime
import AuthTestSupport
import Dispatch
import Prometheus
import Testing

/// The pool's occupancy in Prometheus text: what the pool-exhaustion alerts read
/// (deploy/prometheus/alerts.yaml).
@Suite struct DatabasePoolMetricsTests {
    @Test func occupancyAndTimeoutsAreRecorded() async throws {
        let registry = PrometheusCollectorRegistry()
        func text() -> String {
            var buffer: [UInt8] = []
            registry.emit(into: &buffer)
            return String(decoding: buffer, as: UTF8.self)
        }
        try await PostgresTestDatabase.withTestSchema(
            maxConnections: 1,
            configure: { $0.acquireTimeout = .milliseconds(200) }
        ) { pool, _ in
            let metrics = DatabasePoolMetrics(pool: pool, factory: PrometheusMetricsFactory(registry: registry))
            try await pool.query("SELECT 1", [])
            metrics.record()
            #expect(text().contains("db_pool_max_connections 1.0\n"), "\(text())")
            #expect(text().contains(#"db_pool_connections{state="idle"} 1.0"#), "\(text())")
            #expect(text().contains(#"db_pool_connections{state="in_use"} 0.0"#), "\(text())")
            #expect(text().contains("db_pool_waiting_callers 0.0\n"))

            // One caller holds the only connection (its body blocks the pool's thread, as
            // libpq's calls do) until the other has waited in vain.
            let held = DispatchSemaphore(value: 0)
            let release = DispatchSemaphore(value: 0)
            let holder = Task {
                try await pool.withConnection { _ in
                    held.signal()
                    release.wait()
                }
            }
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                DispatchQueue.global().async {
                    held.wait()
                    continuation.resume()
                }
            }
            metrics.record()
            #expect(text().contains(#"db_pool_connections{state="in_use"} 1.0"#), "\(text())")
            var timedOut = false
            do {
                try await pool.query("SELECT 1", [])
            } catch let error as PostgresError {
                timedOut = error.code == .poolTimeout
            }
            #expect(timedOut)
            metrics.record()
            #expect(text().contains("db_pool_acquire_timeouts_total 1\n"), "\(text())")
            // Counted once: a second sample adds nothing.
            metrics.record()
            #expect(text().contains("db_pool_acquire_timeouts_total 1\n"), "\(text())")
            release.signal()
            try await holder.value
        }
    }
}
