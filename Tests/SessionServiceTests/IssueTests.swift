import AuthAPI
import AuthCrypto
import AuthProtobuf
import AuthRPC
import AuthTestSupport
import AuthTime
import Foundation
import Testing

@testable import SessionService

@Suite struct IssueTests {
    @Test func issueReturnsAnAccessTokenAndARefreshToken() async throws {
        try await withSessionService { fixture in
            let now = fixture.clock.now().unixSeconds
            let pair = try await fixture.issue(userID: "user-42", amr: ["pwd", "face"])
            #expect(pair.accessTokenExpiresIn == 900)
            #expect(pair.refreshTokenExpiresIn == 7 * 86_400)
            #expect(pair.tokenType == "Bearer")
            #expect(pair.refreshToken.count == 43)
            #expect(UUID(uuidString: pair.sessionID) != nil)
            #expect(pair.sessionID == pair.sessionID.lowercased())

            let (header, claims) = try decodeJWT(pair.accessToken)
            #expect(header["alg"] as? String == "ES256")
            #expect(header["typ"] as? String == "at+jwt")
            #expect((header["kid"] as? String)?.isEmpty == false)
            #expect(Set(header.keys) == ["alg", "typ", "kid"])
            #expect(claims["iss"] as? String == "auth.session")
            #expect(claims["aud"] as? String == "auth.api")
            #expect(claims["sub"] as? String == "user-42")
            #expect(claims["sid"] as? String == pair.sessionID)
            #expect((claims["iat"] as? NSNumber)?.int64Value == now)
            #expect((claims["exp"] as? NSNumber)?.int64Value == now + 900)
            #expect((claims["jti"] as? String)?.count == 22)
            #expect(claims["amr"] as? [String] == ["pwd", "face"])
            #expect(Set(claims.keys) == ["iss", "aud", "sub", "sid", "iat", "exp", "jti", "amr"])

            let rows = try await fixture.query(
                """
                SELECT user_id, array_to_string(amr, ','), device_platform, device_name, device_user_agent, client_ip,
                    expires_at - created_at = interval '30 days', refresh_expires_at - created_at = interval '7 days',
                    generation, revoked_at IS NULL
                FROM @sessions
                """
            )
            #expect(rows.count == 1)
            let row = rows[0]
            #expect(try row[0].string == "user-42")
            #expect(try row[1].string == "pwd,face")
            #expect(try row[2].string == "ios")
            #expect(try row[3].string == "Asha's iPhone")
            #expect(try row[4].string == "Laten/1.0 iOS/18")
            #expect(try row[5].string == "203.0.113.7")
            #expect(try row[6].bool)
            #expect(try row[7].bool)
            #expect(try row[8].int64 == 0)
            #expect(try row[9].bool)
            let stored = try await fixture.query("SELECT token_hash FROM @refresh_tokens")
            #expect(try stored[0][0].bytes == SHA256.hash(try #require(RefreshToken(string: pair.refreshToken)).bytes))
        }
    }

    /// ACCESS_TOKEN_FORMAT_SUPABASE (the Supabase door): the claims Supabase's clients read, in
    /// every token of the session, refreshes included; Validate reads them back.
    @Test func aSupabaseFormatSessionMintsSupabasesClaimsOnEveryRefresh() async throws {
        try await withSessionService { fixture in
            let signedInAt = fixture.clock.now().unixSeconds
            let response = try await fixture.client.issue(
                Auth_Session_V1_IssueRequest(
                    userID: "user-sb",
                    amr: ["otp_email", "recovery"],
                    clientIP: "203.0.113.7",
                    tokenFormat: .supabase,
                    email: "asha@example.com",
                    phone: "+919999912345"
                )
            )
            let issued = try #require(response.tokens)
            fixture.clock.advance(seconds: 60)
            let refreshed = try await fixture.refresh(issued.refreshToken)
            for pair in [issued, refreshed] {
                let (_, claims) = try decodeJWT(pair.accessToken)
                #expect(claims["role"] as? String == "authenticated")
                #expect(claims["session_id"] as? String == issued.sessionID)
                #expect(claims["sid"] as? String == issued.sessionID)
                #expect(claims["aal"] as? String == "aal1")
                #expect(claims["is_anonymous"] as? Bool == false)
                #expect(claims["email"] as? String == "asha@example.com")
                #expect(claims["phone"] as? String == "919999912345")
                #expect(claims["aud"] as? [String] == ["auth.api", "authenticated"])
                let amr = try #require(claims["amr"] as? [[String: Any]])
                #expect(amr.map { $0["method"] as? String } == ["otp", "recovery"])
                #expect(amr.map { ($0["timestamp"] as? NSNumber)?.int64Value } == [signedInAt, signedInAt])
                // Our own verifier reads them back.
                let validated = try await fixture.validate(pair.accessToken, checkSession: true)
                #expect(validated.sessionLive)
                #expect(validated.claims?.amr == ["otp", "recovery"])
            }
            // Our format has none of them.
            let ours = try await fixture.issue()
            let (_, claims) = try decodeJWT(ours.accessToken)
            #expect(claims["role"] == nil && claims["session_id"] == nil && claims["aud"] as? String == "auth.api")
        }
    }

    @Test func emailAndPhoneAreOnlyForTheSupabaseFormat() async throws {
        try await withSessionService { fixture in
            let refused = await expectRPCError(.invalidArgument, "invalid_argument") {
                try await fixture.client.issue(
                    Auth_Session_V1_IssueRequest(
                        userID: "user-1",
                        amr: ["pwd"],
                        clientIP: "203.0.113.7",
                        email: "asha@example.com"
                    )
                )
            }
            #expect(refused?.fieldViolations.map(\.field) == ["token_format"])
        }
    }

    @Test func eachIssueIsANewSession() async throws {
        try await withSessionService { fixture in
            let a = try await fixture.issue()
            let b = try await fixture.issue()
            #expect(a.sessionID != b.sessionID)
            #expect(a.refreshToken != b.refreshToken)
            #expect(
                try decodeJWT(a.accessToken).claims["jti"] as? String != decodeJWT(b.accessToken).claims["jti"]
                    as? String
            )
        }
    }

    @Test func userIDCharactersAreEscapedInTheToken() async throws {
        try await withSessionService { fixture in
            let pair = try await fixture.issue(userID: #"we"ird\id"#)
            #expect(try decodeJWT(pair.accessToken).claims["sub"] as? String == #"we"ird\id"#)
            #expect(try await fixture.validate(pair.accessToken).claims?.subject == #"we"ird\id"#)
        }
    }

    @Test(arguments: [
        (Auth_Session_V1_IssueRequest(userID: "", amr: ["pwd"]), "user_id", "required"),
        (Auth_Session_V1_IssueRequest(userID: String(repeating: "u", count: 129), amr: ["pwd"]), "user_id", "too_long"),
        (Auth_Session_V1_IssueRequest(userID: "has space", amr: ["pwd"]), "user_id", "invalid_value"),
        (Auth_Session_V1_IssueRequest(userID: "u", amr: []), "amr", "required"),
        (Auth_Session_V1_IssueRequest(userID: "u", amr: ["password"]), "amr", "unknown_value"),
        (Auth_Session_V1_IssueRequest(userID: "u", amr: ["pwd", "pwd"]), "amr", "duplicate"),
        (Auth_Session_V1_IssueRequest(userID: "u", amr: Array(repeating: "pwd", count: 9)), "amr", "too_many"),
        (
            Auth_Session_V1_IssueRequest(
                userID: "u",
                amr: ["pwd"],
                device: .init(platform: String(repeating: "p", count: 33))
            ), "device.platform", "too_long"
        ),
        (
            Auth_Session_V1_IssueRequest(
                userID: "u",
                amr: ["pwd"],
                device: .init(name: String(repeating: "n", count: 129))
            ), "device.name", "too_long"
        ),
        (
            Auth_Session_V1_IssueRequest(
                userID: "u",
                amr: ["pwd"],
                device: .init(userAgent: String(repeating: "a", count: 513))
            ), "device.user_agent", "too_long"
        ),
        (
            Auth_Session_V1_IssueRequest(userID: "u", amr: ["pwd"], device: .init(name: "tab\there")), "device.name",
            "invalid_value"
        ),
        (Auth_Session_V1_IssueRequest(userID: "u", amr: ["pwd"], clientIP: "300.1.1.1"), "client_ip", "invalid_value"),
    ])
    func invalidIssueRequestsAreRefused(
        request: Auth_Session_V1_IssueRequest,
        field: String,
        reason: String
    ) async throws {
        try await withSessionService { fixture in
            do {
                _ = try await fixture.client.issue(request)
                Issue.record("accepted an invalid request")
            } catch let error as RPCError {
                #expect(error.code == .invalidArgument)
                #expect(error.reason == "invalid_argument")
                #expect(error.fieldViolations.map(\.field) == [field])
                #expect(error.fieldViolations.first?.reason == reason)
            }
            #expect(try await fixture.query("SELECT count(*) FROM @sessions")[0][0].int == 0)
        }
    }

    @Test func everyBadFieldIsReportedAtOnce() async throws {
        try await withSessionService { fixture in
            do {
                _ = try await fixture.client.issue(.init(userID: "", amr: ["x"], clientIP: "nope"))
                Issue.record("accepted an invalid request")
            } catch let error as RPCError {
                #expect(error.fieldViolations.map(\.field) == ["user_id", "amr", "client_ip"])
            }
        }
    }
}
