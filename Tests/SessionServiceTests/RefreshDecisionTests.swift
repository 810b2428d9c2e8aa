import Foundation
import Testing

@testable import SessionService

/// The refresh rules without a database.
@Suite struct RefreshDecisionTests {
    let t0 = Date(timeIntervalSince1970: 1_780_272_000)
    let grace: Duration = .seconds(10)

    func state(
        token: Int64,
        session: Int64,
        usedAt: Date? = nil,
        revoked: Bool = false,
        tokenExpires: TimeInterval = 7 * 86_400,
        sessionExpires: TimeInterval = 30 * 86_400
    ) -> RefreshTokenState {
        RefreshTokenState(
            sessionID: UUID(),
            userID: "u",
            amr: ["pwd"],
            tokenGeneration: token,
            tokenExpiresAt: t0.addingTimeInterval(tokenExpires),
            usedAt: usedAt,
            successorSealed: usedAt == nil ? nil : [1, 2, 3],
            sessionGeneration: session,
            sessionExpiresAt: t0.addingTimeInterval(sessionExpires),
            revokedAt: revoked ? t0 : nil
        )
    }

    @Test func currentTokenRotates() {
        #expect(RefreshDecision.decide(state(token: 3, session: 3), now: t0, graceWindow: grace) == .rotate)
    }

    @Test func predecessorInsideGraceWindowGetsTheSameSuccessor() {
        let used = state(token: 2, session: 3, usedAt: t0)
        #expect(RefreshDecision.decide(used, now: t0, graceWindow: grace) == .returnSuccessor)
        #expect(RefreshDecision.decide(used, now: t0.addingTimeInterval(10), graceWindow: grace) == .returnSuccessor)
        // A replica whose clock is a little behind the one that rotated.
        #expect(RefreshDecision.decide(used, now: t0.addingTimeInterval(-1), graceWindow: grace) == .returnSuccessor)
    }

    @Test func predecessorAfterGraceWindowIsReuse() {
        let used = state(token: 2, session: 3, usedAt: t0)
        #expect(RefreshDecision.decide(used, now: t0.addingTimeInterval(10.001), graceWindow: grace) == .reuseDetected)
        #expect(RefreshDecision.decide(used, now: t0.addingTimeInterval(3600), graceWindow: grace) == .reuseDetected)
    }

    @Test func olderTokenIsReuseEvenInsideTheWindow() {
        // Its successor has been used too: the chain moved on without it.
        let old = state(token: 1, session: 3, usedAt: t0)
        #expect(RefreshDecision.decide(old, now: t0, graceWindow: grace) == .reuseDetected)
    }

    @Test func noGraceWindowMeansEveryReplayIsReuse() {
        let used = state(token: 2, session: 3, usedAt: t0)
        #expect(RefreshDecision.decide(used, now: t0.addingTimeInterval(0.5), graceWindow: .zero) == .reuseDetected)
    }

    @Test func revokedSessionRefusesEveryToken() {
        #expect(
            RefreshDecision.decide(state(token: 3, session: 3, revoked: true), now: t0, graceWindow: grace)
                == .reject(.sessionRevoked)
        )
        #expect(
            RefreshDecision.decide(state(token: 2, session: 3, usedAt: t0, revoked: true), now: t0, graceWindow: grace)
                == .reject(.sessionRevoked)
        )
    }

    @Test func expiry() {
        let current = state(token: 0, session: 0)
        #expect(
            RefreshDecision.decide(current, now: t0.addingTimeInterval(7 * 86_400 - 1), graceWindow: grace) == .rotate
        )
        #expect(
            RefreshDecision.decide(current, now: t0.addingTimeInterval(7 * 86_400), graceWindow: grace)
                == .reject(.sessionExpired)
        )
        let late = state(token: 4, session: 4, tokenExpires: 40 * 86_400)
        #expect(
            RefreshDecision.decide(late, now: t0.addingTimeInterval(30 * 86_400), graceWindow: grace)
                == .reject(.sessionExpired)
        )
        // The session's absolute expiry also ends the grace window's answer.
        let used = state(token: 2, session: 3, usedAt: t0.addingTimeInterval(30 * 86_400 - 1))
        #expect(
            RefreshDecision.decide(used, now: t0.addingTimeInterval(30 * 86_400), graceWindow: grace)
                == .reject(.sessionExpired)
        )
    }
}
