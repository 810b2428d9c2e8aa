#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

// What otp-dispatch decides about a Start, a Resend and a Check, as pure values computed from
// the figures the store read (docs/otp.md, "Attempts and locks" and "Abuse limits"): tested
// without PostgreSQL (OTPDecisionsTests), as session's RefreshDecision is. The service reads
// the figures and writes what was decided, under the destination's lock, in one transaction.

/// Whether a Start may send a code.
enum StartDecision: Sendable {
    /// Start: the verification and its message are written; the code may be wrong this many
    /// more times.
    case start(attemptsRemaining: Int)
    case refuse(OTPError)

    /// The allow/deny lists of SMS calling codes, before anything is read.
    static func smsRefusal(callingCode: String, configuration: OTPServiceConfiguration) -> OTPError? {
        let denied = configuration.smsDeniedCallingCodes.contains(callingCode)
        let notAllowed =
            !configuration.smsAllowedCallingCodes.isEmpty
            && !configuration.smsAllowedCallingCodes.contains(callingCode)
        guard denied || notAllowed else { return nil }
        return OTPError(.destinationNotAllowed, "SMS to calling code +\(callingCode) is not offered.")
    }

    /// A Start of an ordinary destination, in the order the limits are documented: the
    /// destination's locks, its starts in the last hour, the client IP's, then (SMS only) the
    /// pumping guard of its calling code.
    init(
        _ figures: OTPStore.StartFigures,
        destination: Destination,
        now: Date,
        configuration: OTPServiceConfiguration
    ) {
        if let refusal = figures.locks.refusal(now: now, maxConsecutive: configuration.maxConsecutiveFailures) {
            self = .refuse(refusal)
            return
        }
        if let oldest = figures.destinationLimitStart {
            self = .refuse(
                OTPError(
                    .rateLimited,
                    "Too many codes for this destination; try again later.",
                    retryAfterSeconds: secondsUntil(oldest.addingTimeInterval(3_600), from: now)
                )
            )
            return
        }
        if let oldest = figures.ipLimitStart {
            self = .refuse(
                OTPError(
                    .rateLimited,
                    "Too many codes from this address; try again later.",
                    retryAfterSeconds: secondsUntil(oldest.addingTimeInterval(3_600), from: now)
                )
            )
            return
        }
        let pumping = figures.pumping
        if destination.channel == .sms, pumping.started > configuration.pumpingMinimumSent,
            pumping.verified * 100 < pumping.started * configuration.pumpingMinimumVerifiedPercent
        {
            // The oldest minute's codes stop counting once that whole minute is more than an
            // hour old.
            let frees = (pumping.oldestMinute ?? now).addingTimeInterval(3_600 + 60)
            self = .refuse(
                OTPError(
                    .countryThrottled,
                    "SMS codes to +\(destination.callingCode) are paused: too few of the last hour's codes were used.",
                    retryAfterSeconds: secondsUntil(frees, from: now)
                )
            )
            return
        }
        self = .start(attemptsRemaining: max(0, configuration.maxWrongCodes - figures.wrongCodes))
    }

    /// A Start of a test destination: every start limit passes; a lock from its wrong codes
    /// holds, as for any destination.
    init(testDestinationLocks locks: OTPStore.DestinationLocks, now: Date, configuration: OTPServiceConfiguration) {
        if let refusal = locks.refusal(now: now, maxConsecutive: configuration.maxConsecutiveFailures) {
            self = .refuse(refusal)
        } else {
            self = .start(attemptsRemaining: configuration.maxWrongCodes)
        }
    }
}

/// Whether a Resend may send a new code.
enum ResendDecision {
    /// When the verification's next code may be sent: after `firstResendDelay` from its start,
    /// then `resendInterval` after the last one; `resend_too_soon` before.
    static func tooSoon(_ row: VerificationRow, now: Date, configuration: OTPServiceConfiguration) -> OTPError? {
        let allowedAt = coolDownEnd(
            resends: row.resends,
            createdAt: row.createdAt,
            lastSentAt: row.lastSentAt,
            configuration: configuration
        )
        guard now < allowedAt else { return nil }
        return OTPError(
            .resendTooSoon,
            "A new code can be sent a little later.",
            retryAfterSeconds: secondsUntil(allowedAt, from: now)
        )
    }

    /// When a verification with `resends` resends may be resent, as far as its cool-down goes.
    static func coolDownEnd(
        resends: Int,
        createdAt: Date,
        lastSentAt: Date,
        configuration: OTPServiceConfiguration
    ) -> Date {
        resends == 0
            ? createdAt.addingTimeInterval(configuration.firstResendDelay.timeInterval)
            : lastSentAt.addingTimeInterval(configuration.resendInterval.timeInterval)
    }

    /// What an app is told before it offers "resend" (GetDeliveryStatus): the seconds until a
    /// Resend is allowed, by the cool-down and the destination's budget, and the resends left.
    /// `recentResends` are the destination's within the window; `limitingResend`, when they
    /// fill the budget, is the one whose leaving the window frees a resend. A test destination
    /// has no budget.
    static func outlook(
        _ status: VerificationStatus,
        now: Date,
        configuration: OTPServiceConfiguration
    ) -> (resendAfter: UInt32, resendsRemaining: UInt32) {
        var allowedAt = coolDownEnd(
            resends: status.resends,
            createdAt: status.createdAt,
            lastSentAt: status.lastSentAt,
            configuration: configuration
        )
        var remaining = configuration.maxResends
        if !status.test {
            remaining = max(0, configuration.maxResends - status.recentResends)
            if remaining == 0 {
                let frees =
                    status.limitingResend?.addingTimeInterval(configuration.resendWindow.timeInterval)
                    ?? now.addingTimeInterval(configuration.resendWindow.timeInterval)
                allowedAt = max(allowedAt, frees)
            }
        }
        let after: UInt32 = allowedAt > now ? secondsUntil(allowedAt, from: now) : 0
        return (after, UInt32(clamping: remaining))
    }

    /// The destination's resend budget, from its resends within `resendWindow` (oldest first):
    /// how many remain after this one, or `rate_limited` until the one that frees a resend
    /// leaves the window.
    static func budget(
        resends: [Date],
        now: Date,
        configuration: OTPServiceConfiguration
    ) -> Result<Int, OTPError> {
        let window = configuration.resendWindow.timeInterval
        guard resends.count >= configuration.maxResends else {
            return .success(configuration.maxResends - resends.count - 1)
        }
        let frees =
            configuration.maxResends == 0
            ? now.addingTimeInterval(window)
            : resends[resends.count - configuration.maxResends].addingTimeInterval(window)
        return .failure(
            OTPError(
                .rateLimited,
                "Too many codes for this destination; try again later.",
                retryAfterSeconds: secondsUntil(frees, from: now)
            )
        )
    }
}

/// What a Check of a code does.
enum CheckDecision {
    /// Before the code is compared: a verification that is no longer pending is not found
    /// (used, failed or superseded), an expired one is `code_expired`.
    static func refusal(_ row: VerificationRow, now: Date) -> OTPError? {
        guard row.status == "pending" else { return OTPService.notFound() }
        guard row.expiresAt > now else { return OTPError(.codeExpired, "The code has expired; ask for a new one.") }
        return nil
    }

    /// After a wrong code, with the destination's wrong codes within the attempt window (this
    /// one included): how many remain, and until when the destination is locked when none does
    /// (the verification then fails).
    static func afterWrongCode(
        wrongInWindow: Int,
        now: Date,
        configuration: OTPServiceConfiguration
    ) -> (remaining: Int, lockedUntil: Date?) {
        let remaining = max(0, configuration.maxWrongCodes - wrongInWindow)
        return (remaining, remaining == 0 ? now.addingTimeInterval(configuration.lockout.timeInterval) : nil)
    }
}

extension OTPStore.DestinationLocks {
    /// Why a locked destination is refused: the consecutive-failure limit first (it holds until
    /// an operator unlocks it), then the window's lock; nil when it is not locked.
    func refusal(now: Date, maxConsecutive: Int) -> OTPError? {
        if consecutiveFailures >= maxConsecutive {
            return OTPError(
                .factorLocked,
                "Too many wrong codes: codes to this destination are locked. Contact support to unlock it."
            )
        }
        return lockedUntil.map { OTPService.tooManyAttempts(until: $0, now: now) }
    }
}
