/// How long to wait before trying again after consecutive failures: `initial · 2^(failures − 1)`,
/// capped at `limit`, times a random factor from `jitter` so that many clients that failed
/// together do not retry together.
///
/// The one backoff rule of the project: the database pool's reconnects and transaction retries,
/// the LISTEN connection's reconnects and the RPC client's reconnects all use it.
public struct ExponentialBackoff: Sendable, Hashable {
    /// The delay after the first failure.
    public var initial: Duration
    /// The longest delay, before jitter.
    public var limit: Duration
    /// The factor the step is multiplied by, drawn uniformly from this range.
    public var jitter: ClosedRange<Double>

    /// Creates a backoff; `limit` below `initial` means every step is `limit`.
    public init(initial: Duration, limit: Duration, jitter: ClosedRange<Double> = 1...1) {
        precondition(initial >= .zero && limit >= .zero, "backoff durations must not be negative")
        precondition(jitter.lowerBound >= 0, "jitter must not be negative")
        self.initial = initial
        self.limit = limit
        self.jitter = jitter
    }

    /// The step before jitter after `failures` consecutive failures (0 and 1 both give
    /// `initial`). Doubles without overflowing, however many failures.
    public func step(afterFailures failures: Int) -> Duration {
        var step = min(self.initial, self.limit)
        var doublings = max(failures, 1) - 1
        while doublings > 0 && step < self.limit {
            step = step > self.limit / 2 ? self.limit : step * 2
            doublings -= 1
        }
        return step
    }

    /// The delay to wait after `failures` consecutive failures: the step times a random jitter.
    public func delay(afterFailures failures: Int) -> Duration {
        var generator = SystemRandomNumberGenerator()
        return self.delay(afterFailures: failures, using: &generator)
    }

    /// As ``delay(afterFailures:)``, with the random numbers from `generator` (for tests).
    public func delay<Generator: RandomNumberGenerator>(
        afterFailures failures: Int,
        using generator: inout Generator
    ) -> Duration {
        let factor = Double.random(in: self.jitter, using: &generator)
        return self.step(afterFailures: failures) * factor
    }
}
