import AuthPostgres
import CoreMetrics
import Synchronization

/// The database pool's occupancy as Prometheus series (docs/deployment.md, "What operators
/// watch"), sampled by ``record()`` (every 5 s in a service process):
///
/// - `db_pool_connections{state="in_use"|"idle"}`: connections leased (or being opened) and idle.
/// - `db_pool_max_connections`: the pool's bound (`AUTH_DB_POOL_SIZE`).
/// - `db_pool_waiting_callers`: callers waiting for a connection.
/// - `db_pool_acquire_timeouts_total`: callers that waited the acquire timeout in vain.
public final class DatabasePoolMetrics: Sendable {
    private let pool: PostgresPool
    private let inUse: Gauge
    private let idle: Gauge
    private let max: Gauge
    private let waiting: Gauge
    private let timeouts: Counter
    private let recordedTimeouts = Mutex(0)

    public init(pool: PostgresPool, factory: any MetricsFactory) {
        self.pool = pool
        self.inUse = Gauge(label: "db_pool_connections", dimensions: [("state", "in_use")], factory: factory)
        self.idle = Gauge(label: "db_pool_connections", dimensions: [("state", "idle")], factory: factory)
        self.max = Gauge(label: "db_pool_max_connections", factory: factory)
        self.waiting = Gauge(label: "db_pool_waiting_callers", factory: factory)
        self.timeouts = Counter(label: "db_pool_acquire_timeouts_total", factory: factory)
    }

    /// Records the pool's statistics now.
    public func record() {
        let statistics = pool.statistics
        inUse.record(statistics.leasedConnections)
        idle.record(statistics.idleConnections)
        max.record(statistics.maxConnections)
        waiting.record(statistics.waitingCallers)
        let newTimeouts = recordedTimeouts.withLock { recorded in
            defer { recorded = statistics.acquireTimeouts }
            return statistics.acquireTimeouts - recorded
        }
        if newTimeouts > 0 { timeouts.increment(by: newTimeouts) }
    }
}
