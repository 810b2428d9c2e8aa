import Logging
import ServiceLifecycle

/// Deletes dead sessions on a schedule: every ``SessionServiceConfiguration/deadSessionSweepInterval``
/// (default 1 hour, `AUTH_SESSION_CLEANUP_INTERVAL_SECONDS`) it runs
/// ``SessionService/deleteDeadSessions(retention:)`` with
/// ``SessionServiceConfiguration/deadSessionRetention``. Every replica runs one; the clean-up's
/// transaction-scoped advisory lock lets one replica at a time delete, and a replica that finds
/// the lock taken skips its turn.
///
/// Add it to the process's `ServiceGroup` after the database pool; it stops at graceful
/// shutdown (a clean-up in progress ends with its current batch's statement cancelled).
/// The first clean-up runs one interval after start. A failed clean-up is logged and tried
/// again at the next interval.
public struct SessionMaintenance: Service {
    let service: SessionService
    let interval: Duration
    let retention: Duration
    let clock: any Clock<Duration>
    let logger: Logger
    /// Told the outcome of each clean-up (tests).
    let observer: (@Sendable (Result<SessionService.DeadSessionSweep, any Error>) -> Void)?

    /// - Parameters:
    ///   - clock: what the intervals are slept on; tests pass one they advance by hand.
    public init(service: SessionService, clock: any Clock<Duration> = ContinuousClock(), logger: Logger) {
        self.init(service: service, clock: clock, logger: logger, observer: nil)
    }

    init(
        service: SessionService,
        clock: any Clock<Duration>,
        logger: Logger,
        observer: (@Sendable (Result<SessionService.DeadSessionSweep, any Error>) -> Void)?
    ) {
        self.service = service
        self.interval = service.configuration.deadSessionSweepInterval
        self.retention = service.configuration.deadSessionRetention
        self.clock = clock
        self.logger = logger
        self.observer = observer
    }

    public func run() async throws {
        logger.info(
            "Dead-session clean-up scheduled",
            metadata: [
                "session.cleanup_interval_s": "\(interval.components.seconds)",
                "session.cleanup_retention_s": "\(retention.components.seconds)",
            ]
        )
        try? await cancelWhenGracefulShutdown { () async throws -> Void in
            while true {
                try await clock.sleep(for: interval)
                await sweep()
            }
        }
    }

    /// One clean-up; errors are logged, not thrown (the next interval tries again).
    func sweep() async {
        let result: Result<SessionService.DeadSessionSweep, any Error>
        do {
            result = .success(try await service.sweepDeadSessions(retention: retention))
        } catch {
            result = .failure(error)
        }
        switch result {
        case .success(let sweep) where sweep.lockedOut && sweep.deleted == 0:
            logger.debug("Dead-session clean-up skipped: another replica is running it")
        case .success(let sweep):
            logger.info("Deleted dead sessions", metadata: ["session.deleted": "\(sweep.deleted)"])
        case .failure(let error):
            logger.warning("Dead-session clean-up failed; trying again next interval", metadata: ["error": "\(error)"])
        }
        observer?(result)
    }
}
