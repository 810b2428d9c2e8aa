import AuthBackoff
import Logging

extension PostgresPool {
    /// Runs `body` in a transaction on a pooled connection, retrying the whole transaction on
    /// serialization failure (SQLSTATE 40001), deadlock (40P01) and a statement prepared before
    /// its table changed (``PostgresError/Code/staleStatement``).
    ///
    /// Each attempt sends `BEGIN ISOLATION LEVEL …`, runs `body`, and sends `COMMIT`; any error
    /// rolls back. A retryable error (also one raised by `COMMIT`) leads to a new attempt on a
    /// freshly leased connection after a short jittered backoff (``PostgresConfiguration/transactionRetryBackoff``,
    /// doubling per attempt), until `maxAttempts` attempts were made; then the last error is
    /// thrown. `body` must therefore be safe to run more than once: keep side effects outside
    /// the database (sending mail, publishing) out of it.
    ///
    /// - Parameters:
    ///   - isolation: The isolation level. `.serializable` gives the strongest guarantees and
    ///     fails most often; retries make that transparent.
    ///   - maxAttempts: The most times `body` runs (at least 1).
    @discardableResult
    public func transaction<R: Sendable>(
        isolation: PostgresIsolationLevel = .readCommitted,
        maxAttempts: Int = 5,
        _ body: @Sendable (PostgresConnection) throws -> R
    ) async throws -> R {
        var attempt = 1
        while true {
            do {
                return try await self.withConnection { connection in
                    try connection.transaction(isolation: isolation) { try body(connection) }
                }
            } catch let error as PostgresError where error.isRetryable && attempt < maxAttempts {
                let delay = self.retryDelay(afterAttempt: attempt)
                self.logger.debug(
                    "retrying transaction",
                    metadata: [
                        "postgres.error_code": "\(error.code)", "postgres.attempt": "\(attempt)",
                        "postgres.retry_in": "\(delay)",
                    ]
                )
                try await Task.sleep(for: delay)
                attempt += 1
            }
        }
    }

    private func retryDelay(afterAttempt attempt: Int) -> Duration {
        ExponentialBackoff(
            initial: self.configuration.transactionRetryBackoff,
            limit: .seconds(1),
            jitter: 0.5...1.5
        ).delay(afterFailures: attempt)
    }
}
