import AuthBackoff
import AuthPostgres
import Logging

/// Start-up's wait for the database: a service whose database is not reachable yet (both
/// started together, a database restart, a network still coming up) tries again with
/// exponential backoff instead of exiting, logging each failed attempt, and gives up after
/// `limit` (`AUTH_DB_START_TIMEOUT_SECONDS`), when the process exits non-zero.
public struct DatabaseStartup: Sendable {
    /// The total time allowed from the first attempt; 0 means one attempt.
    public var limit: Duration
    /// The wait after the first failed attempt; it doubles after each one…
    public var initialBackoff: Duration = .milliseconds(500)
    /// …up to this. (Longer than the pool's own reconnect backoff limit, so that each attempt
    /// really connects instead of failing at once inside the pool's backoff.)
    public var maximumBackoff: Duration = .seconds(5)

    public init(limit: Duration) {
        self.limit = limit
    }

    /// The database did not become reachable within the limit.
    public struct Unreachable: Error, CustomStringConvertible {
        public var attempts: Int
        public var waited: Duration
        public var lastError: any Error

        public var description: String {
            "the database was not reachable after \(attempts) attempts in \(waited) "
                + "(AUTH_DB_START_TIMEOUT_SECONDS); last error: \(lastError)"
        }
    }

    /// Runs `probe` until it succeeds. Errors that say the database is unreachable
    /// (``PostgresError/isUnavailable``, a pool timeout) are retried until `limit` has passed
    /// on `clock`; any other error (a wrong password, a missing database) is thrown at once.
    ///
    /// - Returns: the number of attempts made.
    @discardableResult
    public func wait(logger: Logger, probe: () async throws -> Void) async throws -> Int {
        try await wait(clock: ContinuousClock(), logger: logger, probe: probe)
    }

    /// ``wait(logger:probe:)`` on `clock` (tests pass one that does not really sleep).
    @discardableResult
    public func wait<C: Clock<Duration>>(
        clock: C,
        logger: Logger,
        probe: () async throws -> Void
    ) async throws -> Int {
        let start = clock.now
        // No jitter: replicas that start together already differ, and tests see exact waits.
        let backoff = ExponentialBackoff(initial: self.initialBackoff, limit: self.maximumBackoff)
        var attempt = 1
        while true {
            do {
                try await probe()
                if attempt > 1 {
                    logger.notice("The database is reachable", metadata: ["db.attempts": "\(attempt)"])
                }
                return attempt
            } catch let error as PostgresError where error.isUnavailable || error.code == .poolTimeout {
                let waited = start.duration(to: clock.now)
                let remaining = limit - waited
                guard remaining > .zero else {
                    throw Unreachable(attempts: attempt, waited: waited, lastError: error)
                }
                let next = min(backoff.delay(afterFailures: attempt), remaining)
                logger.warning(
                    "The database is not reachable; trying again",
                    metadata: [
                        "db.attempt": "\(attempt)", "db.retry_in": "\(next)",
                        "db.gives_up_in": "\(remaining)", "error": "\(error)",
                    ]
                )
                try await clock.sleep(for: next)
                attempt += 1
            }
        }
    }
}
