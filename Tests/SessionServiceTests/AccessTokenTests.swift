import AuthAPI
import AuthAccessToken
import AuthCrypto
import AuthRPC
import AuthTestSupport
import AuthTime
import Foundation
import Testing

@testable import SessionService

/// Validate refuses everything that is not an access token we signed and that is still valid.
@Suite struct AccessTokenTests {
    /// A token with the given header and claims, signed by `sign` over the signing input.
    func token(header: [String: Any], claims: [String: Any], sign: ([UInt8]) throws -> [UInt8]) throws -> String {
        let headerJSON = try JSONSerialization.data(withJSONObject: header, options: [.sortedKeys])
        let claimsJSON = try JSONSerialization.data(withJSONObject: claims, options: [.sortedKeys])
        let input = Base64URL.encode(Array(headerJSON)) + "." + Base64URL.encode(Array(claimsJSON))
        return input + "." + Base64URL.encode(try sign(Array(input.utf8)))
    }

    /// Valid claims for `fixture`'s issuer and audience at its current time.
    func validClaims(_ fixture: SessionFixture, sessionID: String = UUID().uuidString.lowercased()) -> [String: Any] {
        let now = fixture.clock.now().unixSeconds
        return [
            "iss": fixture.configuration.issuer, "aud": fixture.configuration.audience, "sub": "user-1",
            "sid": sessionID, "iat": now, "exp": now + 900, "jti": "jti-1", "amr": ["pwd"],
        ]
    }

    func currentKey(_ fixture: SessionFixture) async throws -> SigningKey {
        try #require(try await fixture.service.keys.current().signingKey(at: fixture.clock.now()))
    }

    @Test func validTokenValidates() async throws {
        try await withSessionService { fixture in
            let pair = try await fixture.issue(amr: ["otp_email"])
            let response = try await fixture.validate(pair.accessToken)
            let claims = try #require(response.claims)
            #expect(claims.subject == "user-1")
            #expect(claims.sessionID == pair.sessionID)
            #expect(claims.issuer == "auth.session")
            #expect(claims.audience == "auth.api")
            #expect(claims.expiresAt - claims.issuedAt == 900)
            #expect(claims.amr == ["otp_email"])
            #expect(!claims.tokenID.isEmpty)
            #expect(response.sessionLive == false)  // not asked
            #expect(try await fixture.validate(pair.accessToken, checkSession: true).sessionLive)

            // A hand-made token with our key and the right header and claims passes too, so
            // each rejection below is about the one thing it changes.
            let key = try await currentKey(fixture)
            let handMade = try token(
                header: ["alg": "ES256", "typ": "at+jwt", "kid": key.kid],
                claims: validClaims(fixture),
                sign: { try key.privateKey.signature(for: $0) }
            )
            #expect(try await fixture.validate(handMade).claims?.subject == "user-1")
        }
    }

    @Test func checkSessionGivesTheSessionsCreationAndAbsoluteExpiry() async throws {
        try await withSessionService { fixture in
            let issuedAt = fixture.clock.now().unixSeconds
            let pair = try await fixture.issue()
            // A refresh later: the session keeps its creation and absolute expiry.
            fixture.clock.advance(seconds: 120)
            let refreshed = try await fixture.refresh(pair.refreshToken)
            fixture.clock.advance(seconds: 60)

            let checked = try await fixture.validate(refreshed.accessToken, checkSession: true)
            #expect(checked.sessionLive)
            #expect(checked.sessionCreatedAt == issuedAt)
            #expect(checked.sessionExpiresAt == issuedAt + Int64(fixture.configuration.sessionLifetime.timeInterval))
            let rows = try await fixture.query(
                "SELECT extract(epoch FROM created_at)::bigint, extract(epoch FROM expires_at)::bigint FROM @sessions WHERE id = $1",
                [.uuid(string: pair.sessionID)!]
            )
            #expect(try rows[0][0].int == Int(checked.sessionCreatedAt))
            #expect(try rows[0][1].int == Int(checked.sessionExpiresAt))

            // Not asked: 0.
            let unchecked = try await fixture.validate(refreshed.accessToken)
            #expect(unchecked.sessionCreatedAt == 0)
            #expect(unchecked.sessionExpiresAt == 0)

            // Not live: 0.
            _ = try await fixture.client.revoke(.init(sessionID: pair.sessionID, reason: "logout"))
            let revoked = try await fixture.validate(refreshed.accessToken, checkSession: true)
            #expect(revoked.sessionLive == false)
            #expect(revoked.sessionCreatedAt == 0)
            #expect(revoked.sessionExpiresAt == 0)
        }
    }

    /// The gateway's check after its own verification: the session's id and user only.
    @Test func checkSessionAnswersForTheSessionOfItsUserOnly() async throws {
        try await withSessionService { fixture in
            let issuedAt = fixture.clock.now().unixSeconds
            let pair = try await fixture.issue(userID: "user-7")
            let live = try await fixture.client.checkSession(.init(sessionID: pair.sessionID, userID: "user-7"))
            #expect(live.live)
            #expect(live.createdAt == issuedAt)
            #expect(live.expiresAt == issuedAt + Int64(fixture.configuration.sessionLifetime.timeInterval))

            // Another user's session, or one that does not exist: not live, nothing told.
            let other = try await fixture.client.checkSession(.init(sessionID: pair.sessionID, userID: "user-8"))
            #expect(other.live == false)
            #expect(other.createdAt == 0 && other.expiresAt == 0)
            let unknown = try await fixture.client.checkSession(.init(sessionID: UUID().uuidString, userID: "user-7"))
            #expect(unknown.live == false)

            // Past its absolute expiry, or revoked: not live.
            fixture.clock.advance(seconds: fixture.configuration.sessionLifetime.timeInterval)
            #expect(
                try await fixture.client.checkSession(.init(sessionID: pair.sessionID, userID: "user-7")).live == false
            )
            let second = try await fixture.issue(userID: "user-7")
            #expect(try await fixture.client.checkSession(.init(sessionID: second.sessionID, userID: "user-7")).live)
            _ = try await fixture.client.revoke(.init(sessionID: second.sessionID, reason: "logout"))
            #expect(
                try await fixture.client.checkSession(.init(sessionID: second.sessionID, userID: "user-7")).live
                    == false
            )

            // Malformed: refused, naming the fields.
            let refused = await #expect(throws: RPCError.self) {
                _ = try await fixture.client.checkSession(.init(sessionID: "not-a-uuid", userID: ""))
            }
            #expect(refused?.code == .invalidArgument)
            #expect(Set(refused?.fieldViolations.map(\.field) ?? []) == ["session_id", "user_id"])

            // Only the gateway asks; and identity and otp-dispatch, which call no session
            // method, may not issue, validate or revoke (issue 19: the lists were wider).
            let identity = makeClient(try await fixture.replica().0, caller: "identity")
            await expectRPCError(.permissionDenied, "caller_not_allowed") {
                _ = try await identity.checkSession(.init(sessionID: pair.sessionID, userID: "user-7"))
            }
            await expectRPCError(.permissionDenied, "caller_not_allowed") {
                _ = try await identity.issue(.init(userID: "user-7", amr: ["pwd"]))
            }
            await expectRPCError(.permissionDenied, "caller_not_allowed") {
                _ = try await identity.revokeAll(.init(userID: "user-7", reason: "test"))
            }
            let otp = makeClient(try await fixture.replica().0, caller: "otp-dispatch")
            await expectRPCError(.permissionDenied, "caller_not_allowed") {
                _ = try await otp.validate(.init(accessToken: pair.accessToken))
            }
        }
    }

    @Test func algNoneIsRejected() async throws {
        try await withSessionService { fixture in
            let key = try await currentKey(fixture)
            let unsigned = try token(
                header: ["alg": "none", "typ": "at+jwt", "kid": key.kid],
                claims: validClaims(fixture),
                sign: { _ in [] }
            )
            await expectRPCError(.unauthenticated, "invalid_access_token") { try await fixture.validate(unsigned) }
            let upper = try token(
                header: ["alg": "NONE", "typ": "at+jwt", "kid": key.kid],
                claims: validClaims(fixture),
                sign: { _ in [] }
            )
            await expectRPCError(.unauthenticated, "invalid_access_token") { try await fixture.validate(upper) }
        }
    }

    /// The algorithm-confusion attack: HS256 "signed" with the server's public key as the secret.
    @Test func hs256SignedWithThePublicKeyIsRejected() async throws {
        try await withSessionService { fixture in
            let key = try await currentKey(fixture)
            let jwkJSON = try JSONEncoder().encode(key.publicKey.jwk(kid: key.kid))
            for secret in [
                key.publicKey.x963Representation, Array(jwkJSON), Array(try await fixture.service.jwksJSON().utf8),
            ] {
                let forged = try token(
                    header: ["alg": "HS256", "typ": "at+jwt", "kid": key.kid],
                    claims: validClaims(fixture),
                    sign: { HMACSHA256(key: secret).authenticationCode(for: $0) }
                )
                await expectRPCError(.unauthenticated, "invalid_access_token") { try await fixture.validate(forged) }
            }
        }
    }

    @Test func unknownKidIsRejected() async throws {
        try await withSessionService { fixture in
            let stranger = try ES256PrivateKey()
            let forged = try token(
                header: ["alg": "ES256", "typ": "at+jwt", "kid": "not-our-key"],
                claims: validClaims(fixture),
                sign: { try stranger.signature(for: $0) }
            )
            await expectRPCError(.unauthenticated, "unknown_signing_key") { try await fixture.validate(forged) }
            let noKid = try token(
                header: ["alg": "ES256", "typ": "at+jwt"],
                claims: validClaims(fixture),
                sign: { try stranger.signature(for: $0) }
            )
            await expectRPCError(.unauthenticated, "unknown_signing_key") { try await fixture.validate(noKid) }
            // Our kid, someone else's key.
            let key = try await currentKey(fixture)
            let wrongKey = try token(
                header: ["alg": "ES256", "typ": "at+jwt", "kid": key.kid],
                claims: validClaims(fixture),
                sign: { try stranger.signature(for: $0) }
            )
            await expectRPCError(.unauthenticated, "invalid_access_token") { try await fixture.validate(wrongKey) }
        }
    }

    @Test func tamperedPayloadIsRejected() async throws {
        try await withSessionService { fixture in
            let pair = try await fixture.issue(userID: "victim")
            let segments = pair.accessToken.split(separator: ".").map(String.init)
            var claims = try decodeJWT(pair.accessToken).claims
            claims["sub"] = "attacker"
            let payload = Base64URL.encode(
                Array(try JSONSerialization.data(withJSONObject: claims, options: [.sortedKeys]))
            )
            let tampered = segments[0] + "." + payload + "." + segments[2]
            await expectRPCError(.unauthenticated, "invalid_access_token") { try await fixture.validate(tampered) }
            // A flipped signature bit, and a header with another kid, fail as well.
            var signature = try #require(Base64URL.decode(segments[2]))
            signature[10] ^= 0x01
            let flipped = segments[0] + "." + segments[1] + "." + Base64URL.encode(signature)
            await expectRPCError(.unauthenticated, "invalid_access_token") { try await fixture.validate(flipped) }
            await expectRPCError(.unauthenticated, "invalid_access_token") { try await fixture.validate("not.a.jwt") }
            await expectRPCError(.unauthenticated, "invalid_access_token") {
                try await fixture.validate(pair.accessToken + ".x")
            }
            await expectRPCError(.invalidArgument, "invalid_argument") { try await fixture.validate("") }
        }
    }

    @Test func wrongAudienceOrIssuerIsRejected() async throws {
        try await withSessionService { fixture in
            let key = try await currentKey(fixture)
            func signed(_ change: (inout [String: Any]) -> Void) throws -> String {
                var body = validClaims(fixture)
                change(&body)
                return try token(
                    header: ["alg": "ES256", "typ": "at+jwt", "kid": key.kid],
                    claims: body,
                    sign: { try key.privateKey.signature(for: $0) }
                )
            }
            for bad in [
                try signed { $0["aud"] = "another-api" },
                try signed { $0["aud"] = ["another-api", "third-api"] },
                try signed { $0["iss"] = "https://accounts.google.com" },
                try signed { $0.removeValue(forKey: "iss") },
                try signed { $0.removeValue(forKey: "aud") },
                try signed { $0.removeValue(forKey: "sid") },
                try signed { $0["exp"] = "tomorrow" },
                try signed { $0["iat"] = fixture.clock.now().unixSeconds + 3600 },
                try signed { $0["nbf"] = fixture.clock.now().unixSeconds + 3600 },
                // claims of the wrong shape
                try signed { $0["aud"] = 7 },
                try signed { $0["aud"] = [fixture.configuration.audience, 7] },
                try signed { $0["sub"] = NSNull() },
                try signed { $0["iat"] = 1.5 },
                try signed { $0["amr"] = ["otp_sms", 3] },
                try signed { $0["amr"] = [["method": "otp"]] },
            ] {
                await expectRPCError(.unauthenticated, "invalid_access_token") { try await fixture.validate(bad) }
            }
            // An audience list containing ours is fine (RFC 7519 §4.1.3).
            let listed = try signed { $0["aud"] = ["another-api", fixture.configuration.audience] }
            #expect(try await fixture.validate(listed).claims?.audience == fixture.configuration.audience)
            // A null optional claim is an absent one.
            let nullNotBefore = try signed { $0["nbf"] = NSNull() }
            #expect(try await fixture.validate(nullNotBefore).claims?.subject == "user-1")
        }
    }

    @Test func expiredTokenIsRejected() async throws {
        try await withSessionService { fixture in
            let pair = try await fixture.issue()
            // Within the tolerated clock skew after `exp` it still passes; after it, not.
            fixture.clock.advance(by: .seconds(900 + 29))
            _ = try await fixture.validate(pair.accessToken)
            fixture.clock.advance(by: .seconds(1))
            await expectRPCError(.unauthenticated, "access_token_expired") {
                try await fixture.validate(pair.accessToken)
            }
        }
    }

    /// RFC 8725 §3.11: an ID token or any other JWT signed with the same key is not an access token.
    @Test func wrongTypIsRejected() async throws {
        try await withSessionService { fixture in
            let key = try await currentKey(fixture)
            for header: [String: Any] in [
                ["alg": "ES256", "typ": "JWT", "kid": key.kid],
                ["alg": "ES256", "kid": key.kid],
                ["alg": "ES256", "typ": "id_token+jwt", "kid": key.kid],
            ] {
                let other = try token(
                    header: header,
                    claims: validClaims(fixture),
                    sign: { try key.privateKey.signature(for: $0) }
                )
                await expectRPCError(.unauthenticated, "invalid_access_token") { try await fixture.validate(other) }
            }
            // The media-type spelling is the same type (RFC 9068 §4).
            let mediaType = try token(
                header: ["alg": "ES256", "typ": "application/AT+JWT", "kid": key.kid],
                claims: validClaims(fixture),
                sign: { try key.privateKey.signature(for: $0) }
            )
            _ = try await fixture.validate(mediaType)
        }
    }

    @Test func localVerifierChecksTokensAgainstTheJWKS() async throws {
        try await withSessionService { fixture in
            let pair = try await fixture.issue()
            let local = try LocalAccessTokenVerifier(
                jwksJSON: try await fixture.client.getJWKS(.init()).jwksJson,
                issuer: fixture.configuration.issuer,
                audience: fixture.configuration.audience
            )
            #expect(try local.verify(pair.accessToken, now: fixture.clock.now()).sessionID == pair.sessionID)
            #expect(throws: AccessTokenError.self) {
                try local.verify(pair.accessToken, now: fixture.clock.now().addingTimeInterval(3600))
            }
            let wrongAudience = try LocalAccessTokenVerifier(
                jwksJSON: try await fixture.client.getJWKS(.init()).jwksJson,
                issuer: fixture.configuration.issuer,
                audience: "someone-else"
            )
            #expect(throws: AccessTokenError.self) {
                try wrongAudience.verify(pair.accessToken, now: fixture.clock.now())
            }
        }
    }

    @Test func payloadJSONEscapesEveryString() throws {
        let claims = AccessTokenClaims(
            issuer: "i\"ss",
            audience: "a\\ud",
            subject: "line\nbreak\u{1}",
            sessionID: "s",
            issuedAt: 1,
            expiresAt: 2,
            tokenID: "j",
            amr: ["pwd", "x\"y"]
        )
        let decoded = try #require(
            try JSONSerialization.jsonObject(with: Data(AccessTokenCodec.payload(claims))) as? [String: Any]
        )
        #expect(decoded["iss"] as? String == "i\"ss")
        #expect(decoded["aud"] as? String == "a\\ud")
        #expect(decoded["sub"] as? String == "line\nbreak\u{1}")
        #expect(decoded["amr"] as? [String] == ["pwd", "x\"y"])
    }
}
