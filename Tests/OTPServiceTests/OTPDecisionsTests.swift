import AuthCrypto
import Foundation
import Testing

@testable import OTPService

/// otp-dispatch's decisions without PostgreSQL: the figures in, the answer out.
@Suite struct OTPDecisionsTests {
    let configuration = OTPServiceConfiguration(secret: SecureRandom.bytes(count: 32))
    let now = Date(timeIntervalSince1970: 1_780_272_000)
    let sms = Destination(parsing: "+919999912345")!
    let email = Destination(parsing: "asha@example.com")!

    func figures(
        wrongCodes: Int = 0,
        lockedUntil: Date? = nil,
        consecutive: Int = 0,
        destinationLimitStart: Date? = nil,
        ipLimitStart: Date? = nil,
        pumping: (started: Int, verified: Int, oldestMinute: Date?) = (0, 0, nil)
    ) -> OTPStore.StartFigures {
        OTPStore.StartFigures(
            wrongCodes: wrongCodes,
            locks: OTPStore.DestinationLocks(lockedUntil: lockedUntil, consecutiveFailures: consecutive),
            destinationLimitStart: destinationLimitStart,
            ipLimitStart: ipLimitStart,
            pumping: pumping
        )
    }

    func refusal(_ decision: StartDecision) -> (reason: String, retryAfter: UInt32?)? {
        guard case .refuse(let error) = decision else { return nil }
        return (error.code.reason, error.retryAfterSeconds)
    }

    @Test func aStartWithinEveryLimitKeepsTheWindowsWrongCodes() {
        guard
            case .start(let remaining) = StartDecision(
                figures(wrongCodes: 2),
                destination: sms,
                now: now,
                configuration: configuration
            )
        else {
            Issue.record("refused")
            return
        }
        #expect(remaining == 3)
        guard
            case .start(let none) = StartDecision(
                figures(wrongCodes: 9),
                destination: sms,
                now: now,
                configuration: configuration
            )
        else {
            Issue.record("refused")
            return
        }
        #expect(none == 0)
    }

    /// The limits answer in their documented order, each with the seconds until it frees.
    @Test func limitsAnswerInOrder() {
        let everything = figures(
            lockedUntil: now.addingTimeInterval(300),
            consecutive: 100,
            destinationLimitStart: now.addingTimeInterval(-3_000),
            ipLimitStart: now.addingTimeInterval(-3_500),
            pumping: (1_000, 0, now.addingTimeInterval(-60))
        )
        #expect(
            refusal(StartDecision(everything, destination: sms, now: now, configuration: configuration))?.reason
                == "factor_locked"
        )
        var next = everything
        next.locks.consecutiveFailures = 0
        let locked = refusal(StartDecision(next, destination: sms, now: now, configuration: configuration))
        #expect(locked?.reason == "too_many_attempts" && locked?.retryAfter == 300)
        next.locks.lockedUntil = nil
        let destination = refusal(StartDecision(next, destination: sms, now: now, configuration: configuration))
        #expect(destination?.reason == "rate_limited" && destination?.retryAfter == 600)
        next.destinationLimitStart = nil
        let ip = refusal(StartDecision(next, destination: sms, now: now, configuration: configuration))
        #expect(ip?.reason == "rate_limited" && ip?.retryAfter == 100)
        next.ipLimitStart = nil
        let pumping = refusal(StartDecision(next, destination: sms, now: now, configuration: configuration))
        // The oldest minute (a minute ago) leaves the hour 3,600 + 60 s after it began.
        #expect(pumping?.reason == "country_throttled" && pumping?.retryAfter == 3_600)
        // The pumping guard is SMS's alone.
        guard case .start = StartDecision(next, destination: email, now: now, configuration: configuration) else {
            Issue.record("an email start was throttled by the pumping guard")
            return
        }
    }

    @Test func thePumpingGuardNeedsEnoughCodesAndTooFewUsed() {
        func decide(_ started: Int, _ verified: Int) -> String? {
            refusal(
                StartDecision(
                    figures(pumping: (started, verified, now)),
                    destination: sms,
                    now: now,
                    configuration: configuration
                )
            )?.reason
        }
        #expect(decide(100, 0) == nil)  // not more than the minimum sent
        #expect(decide(101, 0) == "country_throttled")
        #expect(decide(101, 21) == nil)  // 20.8 % used
        #expect(decide(101, 20) == "country_throttled")  // 19.8 %
    }

    @Test func smsAllowAndDenyLists() {
        var configuration = self.configuration
        #expect(StartDecision.smsRefusal(callingCode: "91", configuration: configuration) == nil)
        configuration.smsDeniedCallingCodes = ["234"]
        #expect(
            StartDecision.smsRefusal(callingCode: "234", configuration: configuration)?.code.reason
                == "destination_not_allowed"
        )
        #expect(StartDecision.smsRefusal(callingCode: "91", configuration: configuration) == nil)
        configuration.smsAllowedCallingCodes = ["91"]
        #expect(
            StartDecision.smsRefusal(callingCode: "1", configuration: configuration)?.code.reason
                == "destination_not_allowed"
        )
        #expect(StartDecision.smsRefusal(callingCode: "91", configuration: configuration) == nil)
    }

    @Test func aTestDestinationPassesEveryLimitButItsLock() {
        let open = StartDecision(
            testDestinationLocks: .init(lockedUntil: nil, consecutiveFailures: 0),
            now: now,
            configuration: configuration
        )
        guard case .start(let remaining) = open else {
            Issue.record("refused")
            return
        }
        #expect(remaining == configuration.maxWrongCodes)
        let locked = StartDecision(
            testDestinationLocks: .init(lockedUntil: now.addingTimeInterval(60), consecutiveFailures: 0),
            now: now,
            configuration: configuration
        )
        #expect(refusal(locked)?.reason == "too_many_attempts")
    }

    func row(
        createdAt: Date,
        lastSentAt: Date,
        resends: Int,
        status: String = "pending",
        expiresAt: Date? = nil
    ) -> VerificationRow {
        VerificationRow(
            id: UUID(),
            destination: sms,
            purpose: .login,
            locale: "en",
            codeMAC: [],
            createdAt: createdAt,
            expiresAt: expiresAt ?? now.addingTimeInterval(600),
            lastSentAt: lastSentAt,
            resends: resends,
            status: status,
            testDestination: false,
            decoy: false,
            subject: ""
        )
    }

    @Test func resendsAreSpacedThenBudgeted() throws {
        let first = row(createdAt: now.addingTimeInterval(-59), lastSentAt: now.addingTimeInterval(-59), resends: 0)
        #expect(ResendDecision.tooSoon(first, now: now, configuration: configuration)?.retryAfterSeconds == 1)
        let later = row(createdAt: now.addingTimeInterval(-600), lastSentAt: now.addingTimeInterval(-100), resends: 1)
        #expect(ResendDecision.tooSoon(later, now: now, configuration: configuration)?.retryAfterSeconds == 20)
        let due = row(createdAt: now.addingTimeInterval(-600), lastSentAt: now.addingTimeInterval(-120), resends: 1)
        #expect(ResendDecision.tooSoon(due, now: now, configuration: configuration) == nil)

        #expect(try ResendDecision.budget(resends: [], now: now, configuration: configuration).get() == 2)
        let two = [now.addingTimeInterval(-800), now.addingTimeInterval(-400)]
        #expect(try ResendDecision.budget(resends: two, now: now, configuration: configuration).get() == 0)
        let three = two + [now.addingTimeInterval(-10)]
        guard case .failure(let refused) = ResendDecision.budget(resends: three, now: now, configuration: configuration)
        else {
            Issue.record("a fourth resend in the window was allowed")
            return
        }
        // The oldest of the three leaves the 900 s window in 100 s.
        #expect(refused.code.reason == "rate_limited" && refused.retryAfterSeconds == 100)
    }

    func status(
        resends: Int,
        sinceLastSend: TimeInterval,
        recentResends: Int,
        limitingResend: Date? = nil,
        test: Bool = false
    ) -> VerificationStatus {
        VerificationStatus(
            destination: sms.normalized,
            test: test,
            decoy: false,
            status: "pending",
            createdAt: now.addingTimeInterval(-600),
            lastSentAt: now.addingTimeInterval(-sinceLastSend),
            expiresAt: now.addingTimeInterval(100),
            resends: resends,
            recentResends: recentResends,
            limitingResend: limitingResend,
            record: nil
        )
    }

    /// What GetDeliveryStatus tells an app before it offers "resend": the same cool-down and
    /// budget Resend applies, as seconds to wait and resends left.
    @Test func theResendOutlookFollowsTheCoolDownAndTheBudget() {
        // A resend 100 s ago: 20 s of cool-down left; two more in the window.
        var outlook = ResendDecision.outlook(
            status(resends: 1, sinceLastSend: 100, recentResends: 1),
            now: now,
            configuration: configuration
        )
        #expect(outlook.resendAfter == 20 && outlook.resendsRemaining == 2)
        // Cool-down over, budget left: now.
        outlook = ResendDecision.outlook(
            status(resends: 2, sinceLastSend: 130, recentResends: 2),
            now: now,
            configuration: configuration
        )
        #expect(outlook.resendAfter == 0 && outlook.resendsRemaining == 1)
        // Budget spent: until the limiting resend (800 s ago) leaves the 900 s window.
        outlook = ResendDecision.outlook(
            status(resends: 3, sinceLastSend: 130, recentResends: 3, limitingResend: now.addingTimeInterval(-800)),
            now: now,
            configuration: configuration
        )
        #expect(outlook.resendAfter == 100 && outlook.resendsRemaining == 0)
        // A test destination has no budget.
        outlook = ResendDecision.outlook(
            status(resends: 3, sinceLastSend: 130, recentResends: 3, test: true),
            now: now,
            configuration: configuration
        )
        #expect(outlook.resendAfter == 0 && outlook.resendsRemaining == 3)
    }

    @Test func checksRefuseWhatIsNotPendingOrExpiredAndLockOnTheLastWrongCode() {
        let pending = row(createdAt: now, lastSentAt: now, resends: 0)
        #expect(CheckDecision.refusal(pending, now: now) == nil)
        #expect(
            CheckDecision.refusal(row(createdAt: now, lastSentAt: now, resends: 0, status: "verified"), now: now)?.code
                .reason
                == "verification_not_found"
        )
        #expect(
            CheckDecision.refusal(row(createdAt: now, lastSentAt: now, resends: 0, expiresAt: now), now: now)?.code
                .reason
                == "code_expired"
        )
        let fourth = CheckDecision.afterWrongCode(wrongInWindow: 4, now: now, configuration: configuration)
        #expect(fourth.remaining == 1 && fourth.lockedUntil == nil)
        let fifth = CheckDecision.afterWrongCode(wrongInWindow: 5, now: now, configuration: configuration)
        #expect(fifth.remaining == 0 && fifth.lockedUntil == now.addingTimeInterval(900))
    }
}
