import AuthAPI
import AuthRPC
import AuthTestSupport
import AuthTime
import Foundation
import Testing

@testable import SessionService

@Suite struct RevocationTests {
    @Test func revokeEndsOneSession() async throws {
        try await withSessionService { fixture in
            let mine = try await fixture.issue(userID: "asha")
            let other = try await fixture.issue(userID: "asha", platform: "android")
            #expect(try await fixture.validate(mine.accessToken, checkSession: true).sessionLive)

            // The session must be the given user's.
            await expectRPCError(.notFound, "session_not_found") {
                try await fixture.client.revoke(.init(sessionID: mine.sessionID, userID: "somebody-else"))
            }
            await expectRPCError(.notFound, "session_not_found") {
                try await fixture.client.revoke(.init(sessionID: UUID().uuidString))
            }
            let first = try await fixture.client.revoke(
                .init(sessionID: mine.sessionID, userID: "asha", reason: "logout")
            )
            #expect(first.revoked)
            let second = try await fixture.client.revoke(
                .init(sessionID: mine.sessionID, userID: "asha", reason: "logout")
            )
            #expect(second.revoked == false)

            await expectRPCError(.unauthenticated, "session_revoked") { try await fixture.refresh(mine.refreshToken) }
            let validated = try await fixture.validate(mine.accessToken, checkSession: true)
            #expect(validated.sessionLive == false)
            #expect(validated.claims?.subject == "asha")
            #expect(try await fixture.validate(other.accessToken, checkSession: true).sessionLive)
            _ = try await fixture.refresh(other.refreshToken)
            let reason = try await fixture.query(
                "SELECT revoke_reason FROM @sessions WHERE id = $1",
                [.uuid(string: mine.sessionID)!]
            )
            #expect(try reason[0][0].string == "logout")
        }
    }

    /// Issue 21 §3: a logout by refresh token (the access token expired): any token the session
    /// issued names it, current or already used; an unknown one is `invalid_refresh_token`.
    @Test func revokeByRefreshTokenEndsItsSession() async throws {
        try await withSessionService { fixture in
            let first = try await fixture.issue(userID: "asha")
            let current = try await fixture.refresh(first.refreshToken)
            let other = try await fixture.issue(userID: "asha", platform: "android")

            // The used token names the session as well as the current one.
            let revoked = try await fixture.client.revoke(.init(reason: "logout", refreshToken: first.refreshToken))
            #expect(revoked.revoked)
            #expect(revoked.sessionID == first.sessionID)
            #expect(revoked.userID == "asha")
            let again = try await fixture.client.revoke(.init(reason: "logout", refreshToken: current.refreshToken))
            #expect(again.revoked == false && again.sessionID == first.sessionID)
            await expectRPCError(.unauthenticated, "session_revoked") {
                try await fixture.refresh(current.refreshToken)
            }
            _ = try await fixture.refresh(other.refreshToken)

            for token in [RefreshToken.generate().string, "not-a-token"] {
                await expectRPCError(.unauthenticated, "invalid_refresh_token") {
                    try await fixture.client.revoke(.init(reason: "logout", refreshToken: token))
                }
            }
            // Another user's token, and a session id with a token, are refused.
            await expectRPCError(.unauthenticated, "invalid_refresh_token") {
                try await fixture.client.revoke(
                    .init(userID: "ravi", reason: "logout", refreshToken: other.refreshToken)
                )
            }
            await expectRPCError(.invalidArgument, "invalid_argument") {
                try await fixture.client.revoke(
                    .init(sessionID: other.sessionID, reason: "logout", refreshToken: other.refreshToken)
                )
            }
            #expect(try await fixture.validate(other.accessToken, checkSession: true).sessionLive)
        }
    }

    @Test func revokeAllKeepsTheCallersSession() async throws {
        try await withSessionService { fixture in
            let phone = try await fixture.issue(userID: "asha", platform: "ios")
            let tablet = try await fixture.issue(userID: "asha", platform: "ipados")
            let web = try await fixture.issue(userID: "asha", platform: "web")
            let someoneElse = try await fixture.issue(userID: "ravi")
            let response = try await fixture.client.revokeAll(
                .init(userID: "asha", exceptSessionID: phone.sessionID, reason: "password_changed")
            )
            #expect(response.revokedCount == 2)
            _ = try await fixture.refresh(phone.refreshToken)
            await expectRPCError(.unauthenticated, "session_revoked") { try await fixture.refresh(tablet.refreshToken) }
            await expectRPCError(.unauthenticated, "session_revoked") { try await fixture.refresh(web.refreshToken) }
            _ = try await fixture.refresh(someoneElse.refreshToken)

            // Without `except`, all of them; already revoked ones are not counted again.
            let all = try await fixture.client.revokeAll(.init(userID: "asha"))
            #expect(all.revokedCount == 1)
            #expect(try await fixture.client.listSessions(.init(userID: "asha")).sessions.isEmpty)
            #expect(try await fixture.client.listSessions(.init(userID: "ravi")).sessions.count == 1)
        }
    }

    @Test func listShowsLiveSessionsMostRecentlyUsedFirst() async throws {
        try await withSessionService { fixture in
            let first = try await fixture.issue(
                userID: "asha",
                amr: ["otp_sms"],
                platform: "ios",
                clientIP: "203.0.113.1"
            )
            fixture.clock.advance(by: .seconds(60))
            let second = try await fixture.issue(
                userID: "asha",
                amr: ["oidc_google"],
                platform: "android",
                clientIP: "203.0.113.2"
            )
            fixture.clock.advance(by: .seconds(60))
            let third = try await fixture.issue(userID: "asha", amr: ["pwd"], platform: "web")
            _ = try await fixture.client.revoke(.init(sessionID: third.sessionID))
            fixture.clock.advance(by: .seconds(60))
            _ = try await fixture.refresh(first.refreshToken, clientIP: "198.51.100.9")
            _ = try await fixture.issue(userID: "ravi")

            let listed = try await fixture.client.listSessions(.init(userID: "asha")).sessions
            #expect(listed.map(\.sessionID) == [first.sessionID, second.sessionID])
            let top = try #require(listed.first)
            #expect(top.amr == ["otp_sms"])
            #expect(top.device?.platform == "ios")
            #expect(top.device?.name == "Asha's iPhone")
            #expect(top.clientIP == "198.51.100.9")
            let start = fixture.clock.now().unixSeconds - 180
            #expect(top.createdAt == start)
            #expect(top.lastRefreshedAt == start + 180)
            #expect(top.expiresAt == start + 30 * 86_400)
            #expect(listed[1].lastRefreshedAt == 0)
            #expect(listed[1].clientIP == "203.0.113.2")
        }
    }

    @Test func listIsBounded() async throws {
        try await withSessionService(configure: { $0.maxListedSessions = 3 }) { fixture in
            for _ in 0..<5 { _ = try await fixture.issue(userID: "busy") }
            #expect(try await fixture.client.listSessions(.init(userID: "busy")).sessions.count == 3)
        }
    }

    @Test func badRevocationRequests() async throws {
        try await withSessionService { fixture in
            await expectRPCError(.invalidArgument, "invalid_argument") {
                try await fixture.client.revoke(.init(sessionID: ""))
            }
            await expectRPCError(.invalidArgument, "invalid_argument") {
                try await fixture.client.revoke(.init(sessionID: "42"))
            }
            await expectRPCError(.invalidArgument, "invalid_argument") {
                try await fixture.client.revoke(.init(sessionID: UUID().uuidString, reason: "Log Out!"))
            }
            await expectRPCError(.invalidArgument, "invalid_argument") {
                try await fixture.client.revokeAll(.init(userID: ""))
            }
            await expectRPCError(.invalidArgument, "invalid_argument") {
                try await fixture.client.revokeAll(.init(userID: "u", exceptSessionID: "not-a-uuid"))
            }
            await expectRPCError(.invalidArgument, "invalid_argument") {
                try await fixture.client.listSessions(.init(userID: ""))
            }
        }
    }

    @Test func deadSessionsAreDeletedAfterTheirRetention() async throws {
        try await withSessionService { fixture in
            let revoked = try await fixture.issue()
            _ = try await fixture.refresh(revoked.refreshToken)
            _ = try await fixture.client.revoke(.init(sessionID: revoked.sessionID))
            let live = try await fixture.issue()
            fixture.clock.advance(by: .seconds(6 * 86_400))
            let kept = try await fixture.refresh(live.refreshToken)
            #expect(try await fixture.service.deleteDeadSessions(retention: .seconds(7 * 86_400)) == 0)
            fixture.clock.advance(by: .seconds(2 * 86_400))
            #expect(try await fixture.service.deleteDeadSessions(retention: .seconds(7 * 86_400)) == 1)
            #expect(try await fixture.query("SELECT count(*) FROM @refresh_tokens")[0][0].int == 2)
            _ = try await fixture.refresh(kept.refreshToken)
        }
    }
}
