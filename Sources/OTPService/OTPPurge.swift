import AuthTime
import Logging
import ServiceLifecycle

/// Removes what the service no longer needs, on a schedule: every
/// ``OTPServiceConfiguration/purgeInterval`` (default 1 hour) it deletes verifications whose
/// code expired more than ``OTPServiceConfiguration/purgeRetention`` ago (default 1 day),
/// with their messages (a message still waiting to be sent keeps its verification), and the
/// limit events and destination locks older than every window. Every replica may run it; the
/// deletes are idempotent and batched.
public struct OTPPurge: Service {
    let service: OTPService
    let clock: any Clock<Duration>
    let logger: Logger

    /// - Parameter clock: what the intervals are slept on; tests pass one they advance by hand.
    public init(service: OTPService, clock: any Clock<Duration> = ContinuousClock(), logger: Logger) {
        self.service = service
        self.clock = clock
        self.logger = logger
    }

    public func run() async throws {
        let configuration = service.configuration
        logger.info(
            "OTP purge scheduled",
            metadata: [
                "otp.purge_interval_s": "\(configuration.purgeInterval.components.seconds)",
                "otp.purge_retention_s": "\(configuration.purgeRetention.components.seconds)",
            ]
        )
        try? await cancelWhenGracefulShutdown { () async throws -> Void in
            while true {
                try await clock.sleep(for: configuration.purgeInterval)
                do {
                    let (verifications, events) = try await service.purge()
                    logger.info(
                        "OTP purge done",
                        metadata: [
                            "otp.purged_verifications": "\(verifications)", "otp.purged_limit_events": "\(events)",
                        ]
                    )
                } catch {
                    logger.warning("OTP purge failed; trying again next interval", metadata: ["error": "\(error)"])
                }
            }
        }
    }
}

extension OTPService {
    /// One purge (see ``OTPPurge``); returns how many verifications and limit events it deleted.
    @discardableResult
    public func purge(batch: Int = 1_000) async throws -> (verifications: Int, events: Int) {
        let now = clock.microsecondNow()
        let cutoff = now.addingTimeInterval(-configuration.purgeRetention.timeInterval)
        // Limit events are needed for the longest window (at least the hour of the start limits).
        let longest = max(
            3_600,
            configuration.attemptWindow.timeInterval,
            configuration.resendWindow.timeInterval,
            configuration.lockout.timeInterval
        )
        let eventCutoff = now.addingTimeInterval(-longest)
        var totals = (0, 0)
        while true {
            let (verifications, events) = try await store.purge(before: cutoff, eventsBefore: eventCutoff, batch: batch)
            totals.0 += verifications
            totals.1 += events
            if verifications < batch && events < batch { return totals }
        }
    }
}

extension OTPService {
    /// The most pending messages the backlog gauge counts (a count past it costs a scan of
    /// the whole backlog every sample; the alert fires long before).
    static let backlogCountLimit = 100_000

    /// Samples the outbox's backlog into the gauges `otp_outbox_pending_messages` (messages
    /// not yet handed to a provider, counted up to 100,000) and
    /// `otp_outbox_oldest_pending_age_seconds` (0 when none is pending). otp-dispatch runs it
    /// every 15 s; every replica reports the same shared outbox.
    public func recordOutboxBacklog() async throws {
        let (pending, oldestAge) = try await store.outboxBacklog(
            now: clock.microsecondNow(),
            countLimit: Self.backlogCountLimit
        )
        metrics.outbox(pending: pending, oldestAge: oldestAge)
    }
}
