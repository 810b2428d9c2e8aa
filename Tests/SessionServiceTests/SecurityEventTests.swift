import AuthAPI
import AuthRPC
import AuthTestSupport
import Foundation
import Testing

@testable import SessionService

/// `security_events` rows beyond refresh-token reuse (which RefreshTests covers).
@Suite struct SecurityEventTests {
    struct Row: Equatable {
        var kind: String
        var userID: String?
        var sessionID: String?
        var clientIP: String
    }

    func events(_ fixture: SessionFixture) async throws -> [Row] {
        try await fixture.query(
            "SELECT kind, user_id, session_id::text, client_ip FROM @security_events ORDER BY id"
        ).map { row in
            Row(
                kind: try row[0].string,
                userID: try row[1].decode(String?.self),
                sessionID: try row[2].decode(String?.self),
                clientIP: try row[3].string
            )
        }
    }

    func details(_ fixture: SessionFixture, kind: String) async throws -> [String: Any] {
        let text = try await fixture.query(
            "SELECT details::text FROM @security_events WHERE kind = $1",
            [.text(kind)]
        )[0][0].string
        return try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
    }

    @Test func refreshOfARevokedSessionIsRecorded() async throws {
        try await withSessionService { fixture in
            let pair = try await fixture.issue(userID: "asha")
            _ = try await fixture.client.revoke(.init(sessionID: pair.sessionID, reason: "logout"))
            await expectRPCError(.unauthenticated, "session_revoked") {
                try await fixture.refresh(pair.refreshToken, clientIP: "198.51.100.9")
            }
            #expect(
                try await events(fixture) == [
                    Row(
                        kind: "refresh_of_revoked_session",
                        userID: "asha",
                        sessionID: pair.sessionID,
                        clientIP: "198.51.100.9"
                    )
                ]
            )
            let details = try await details(fixture, kind: "refresh_of_revoked_session")
            #expect(details["token_generation"] as? Int == 0)
            #expect(details["caller"] as? String == "gateway")
        }
    }

    @Test func refreshOfAnExpiredSessionIsRecorded() async throws {
        try await withSessionService { fixture in
            let pair = try await fixture.issue(userID: "ravi")
            let refreshed = try await fixture.refresh(pair.refreshToken)
            #expect(try await events(fixture).isEmpty)  // a good refresh records nothing
            fixture.clock.advance(by: .seconds(7 * 86_400 + 1))
            await expectRPCError(.unauthenticated, "session_expired") {
                try await fixture.refresh(refreshed.refreshToken, clientIP: "2001:db8::1")
            }
            #expect(
                try await events(fixture) == [
                    Row(
                        kind: "refresh_of_expired_session",
                        userID: "ravi",
                        sessionID: pair.sessionID,
                        clientIP: "2001:db8::1"
                    )
                ]
            )
            #expect(try await details(fixture, kind: "refresh_of_expired_session")["token_generation"] as? Int == 1)
        }
    }

    @Test func keyRotationIsRecorded() async throws {
        try await withSessionService { fixture in
            let rotation = try await fixture.operatorClient.rotateSigningKey(.init())
            #expect(
                try await events(fixture) == [
                    Row(kind: "signing_key_rotated", userID: nil, sessionID: nil, clientIP: "")
                ]
            )
            let details = try await details(fixture, kind: "signing_key_rotated")
            #expect(details["caller"] as? String == "authctl")
            #expect(details["new_kid"] as? String == rotation.newKeyID)
            #expect(details["retiring_kids"] as? [String] == rotation.retiringKeyIds)
        }
    }

    @Test func aRefusedCallerIsRecorded() async throws {
        try await withSessionService { fixture in
            await expectRPCError(.permissionDenied, "caller_not_allowed") {
                try await fixture.client.rotateSigningKey(.init())
            }
            let intruder = makeClient(fixture.service, caller: #"evil", "x": "1"#)
            await expectRPCError(.permissionDenied, "caller_not_allowed") {
                try await intruder.rewrapSigningKeys(.init())
            }
            let rows = try await fixture.query(
                """
                SELECT kind, user_id IS NULL, details->>'caller', details->>'method'
                FROM @security_events ORDER BY id
                """
            )
            #expect(rows.count == 2)
            #expect(try rows.map { try $0[0].string } == ["caller_not_allowed", "caller_not_allowed"])
            #expect(try rows.map { try $0[1].bool } == [true, true])
            #expect(try rows.map { try $0[2].string } == ["gateway", #"evil", "x": "1"#])
            #expect(try rows.map { try $0[3].string } == ["RotateSigningKey", "RewrapSigningKeys"])
            // Nothing else happened: still one key.
            #expect(try await fixture.query("SELECT count(*) FROM @signing_keys")[0][0].int == 1)
        }
    }
}
