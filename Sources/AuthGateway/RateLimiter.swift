import AuthTime
import Synchronization

/// Token buckets per key (a client IP, with the route): `capacity` requests at once, refilled
/// at `capacity` per `period`. Pure state driven by the caller's clock; thread-safe.
///
/// Memory is bounded: when more than `maxKeys` buckets exist, the full ones (clients idle long
/// enough to have their whole budget back) are dropped, and if that is not enough, the least
/// recently used, down to 90 % of `maxKeys`. A dropped full bucket starts full again, which is
/// what it was.
public final class RateLimiter: Sendable {
    public struct Decision: Sendable, Equatable {
        /// The request may go on.
        public var allowed: Bool
        /// When refused: whole seconds until one request is allowed again (at least 1).
        public var retryAfterSeconds: Int
    }

    struct Bucket {
        var tokens: Double
        var updated: ContinuousClock.Instant
    }

    public let capacity: Int
    public let period: Duration
    public let maxKeys: Int
    private let buckets: Mutex<[String: Bucket]>

    public init(capacity: Int, per period: Duration, maxKeys: Int = 100_000) {
        precondition(capacity > 0 && period > .zero && maxKeys > 0)
        self.capacity = capacity
        self.period = period
        self.maxKeys = maxKeys
        self.buckets = Mutex([:])
    }

    private var refillPerSecond: Double { Double(capacity) / period.timeInterval }

    /// Takes one request from `key`'s budget at `now`.
    public func acquire(_ key: String, now: ContinuousClock.Instant) -> Decision {
        let capacity = Double(self.capacity)
        let rate = refillPerSecond
        return buckets.withLock { buckets in
            var bucket = buckets[key] ?? Bucket(tokens: capacity, updated: now)
            let elapsed = max(0, (now - bucket.updated).timeInterval)
            bucket.tokens = min(capacity, bucket.tokens + elapsed * rate)
            bucket.updated = now
            let decision: Decision
            if bucket.tokens >= 1 {
                bucket.tokens -= 1
                decision = Decision(allowed: true, retryAfterSeconds: 0)
            } else {
                let wait = (1 - bucket.tokens) / rate
                decision = Decision(allowed: false, retryAfterSeconds: max(1, Int(wait.rounded(.up))))
            }
            buckets[key] = bucket
            if buckets.count > maxKeys { Self.evict(&buckets, keep: maxKeys, capacity: capacity, rate: rate, now: now) }
            return decision
        }
    }

    /// How many buckets are kept (for tests and metrics).
    public var trackedKeys: Int { buckets.withLock { $0.count } }

    private static func evict(
        _ buckets: inout [String: Bucket],
        keep: Int,
        capacity: Double,
        rate: Double,
        now: ContinuousClock.Instant
    ) {
        func level(_ bucket: Bucket) -> Double {
            min(capacity, bucket.tokens + max(0, (now - bucket.updated).timeInterval) * rate)
        }
        buckets = buckets.filter { level($0.value) < capacity }
        guard buckets.count > keep else { return }
        // Still too many clients mid-budget: keep the most recently seen (a client being limited
        // keeps knocking, so its bucket stays).
        let kept = buckets.sorted { $0.value.updated > $1.value.updated }.prefix(keep * 9 / 10)
        buckets = Dictionary(uniqueKeysWithValues: kept.map { ($0.key, $0.value) })
    }
}
