import AuthAPI
import AuthCrypto
import AuthProtobuf
import AuthRPC
import AuthTestSupport
import Foundation
import Synchronization
import Testing

@testable import IdentityService

/// Sign-in with Apple/Google/Facebook ID tokens, against a JWKS served over HTTP by the test with
/// keys made in the test.
@Suite struct IDTokenTests {
    @Test func appleSignInCreatesThenFindsTheUser() async throws {
        let provider = try TestProvider()
        let clock = ManualClock()
        try await withProviderService(provider, clock: clock) { fixture in
            let raw = "raw-nonce-1"
            let token = try provider.token(
                provider.claims(
                    nonce: appleNonce(raw),
                    email: "Asha@privaterelay.appleid.com",
                    emailVerified: "true",
                    now: clock.now()
                )
            )
            let first = try await fixture.signIn(.apple, token: token, rawNonce: raw, displayName: "Asha K")
            #expect(first.created)
            #expect(!first.linked)
            #expect(first.user?.email == "asha@privaterelay.appleid.com")
            #expect(first.user?.emailVerified == true)
            #expect(first.user?.displayName == "Asha K")
            #expect(first.user?.providers == ["apple"])
            #expect(first.user?.hasPassword == false)

            let second = try await fixture.signIn(
                .apple,
                token: try provider.token(provider.claims(nonce: appleNonce("raw-2"), now: clock.now())),
                rawNonce: "raw-2"
            )
            #expect(!second.created)
            #expect(second.user?.id == first.user?.id)
            #expect(provider.fetchCount == 1)  // cached
        }
    }

    @Test func googleAndFacebookNoncesAreRaw() async throws {
        let provider = try TestProvider()
        let clock = ManualClock()
        try await withProviderService(provider, clock: clock) { fixture in
            let google = try provider.token(provider.claims(subject: "g-1", nonce: "n-google", now: clock.now()))
            #expect(try await fixture.signIn(.google, token: google, rawNonce: "n-google").created)
            // Facebook without a nonce on either side is accepted; Google without one is not.
            let facebook = try provider.token(provider.claims(subject: "f-1", now: clock.now()))
            #expect(try await fixture.signIn(.facebook, token: facebook).created)
            let googleNoNonce = try provider.token(provider.claims(subject: "g-2", now: clock.now()))
            await expectRPCError(.unauthenticated, "invalid_nonce") {
                try await fixture.signIn(.google, token: googleNoNonce)
            }
            // The Apple rule (hashed) does not pass for Google.
            let hashed = try provider.token(provider.claims(subject: "g-3", nonce: appleNonce("n"), now: clock.now()))
            await expectRPCError(.unauthenticated, "invalid_nonce") {
                try await fixture.signIn(.google, token: hashed, rawNonce: "n")
            }
        }
    }

    /// `nonce_hashed` (the Supabase door): every provider's token carries hex SHA-256 of the raw
    /// nonce, Google's too; its raw nonce in the token is then refused.
    @Test func aHashedNonceRuleHoldsForEveryProvider() async throws {
        let provider = try TestProvider()
        let clock = ManualClock()
        try await withProviderService(provider, clock: clock) { fixture in
            let hashed = try provider.token(provider.claims(subject: "g-h1", nonce: appleNonce("n"), now: clock.now()))
            #expect(try await fixture.signIn(.google, token: hashed, rawNonce: "n", nonceHashed: true).created)
            let raw = try provider.token(provider.claims(subject: "g-h2", nonce: "n", now: clock.now()))
            await expectRPCError(.unauthenticated, "invalid_nonce") {
                try await fixture.signIn(.google, token: raw, rawNonce: "n", nonceHashed: true)
            }
        }
    }

    /// GetUser with `with_identities` (the Supabase door's user) answers what ListIdentities
    /// answers, in one statement.
    @Test func getUserWithIdentitiesAnswersAsListIdentities() async throws {
        let provider = try TestProvider()
        let clock = ManualClock()
        try await withProviderService(provider, clock: clock) { fixture in
            let token = try provider.token(
                provider.claims(
                    subject: "g-ids",
                    nonce: "n",
                    email: "ids@example.com",
                    emailVerified: true,
                    now: clock.now()
                )
            )
            let user = try #require(try await fixture.signIn(.google, token: token, rawNonce: "n").user)
            let listed = try await fixture.client.listIdentities(
                Auth_Identity_V1_ListIdentitiesRequest(userID: user.id)
            )
            let got = try await fixture.client.getUser(
                Auth_Identity_V1_GetUserRequest(userID: user.id, withIdentities: true)
            )
            #expect(got.user == user)
            #expect(got.identities == listed.identities)
            #expect(got.identities.map(\.provider) == ["email", "google"])
            #expect(got.identities.last?.id == "g-ids")
            // Without the flag, no identities.
            let plain = try await fixture.client.getUser(Auth_Identity_V1_GetUserRequest(userID: user.id))
            #expect(plain.identities.isEmpty)
        }
    }

    @Test func badTokensAreRefused() async throws {
        let provider = try TestProvider()
        let clock = ManualClock()
        try await withProviderService(provider, clock: clock) { fixture in
            let now = clock.now()
            let raw = "nonce-x"
            let nonce = appleNonce(raw)
            func claims(_ change: (inout [String: Any?]) -> Void) -> [String: Any?] {
                var claims = provider.claims(nonce: nonce, now: now)
                change(&claims)
                return claims
            }
            // Wrong key (same kid, another key).
            let otherKey = try ES256PrivateKey()
            let wrongKey = try provider.token(claims { _ in }, key: otherKey)
            await expectRPCError(.unauthenticated, "invalid_id_token") {
                try await fixture.signIn(.apple, token: wrongKey, rawNonce: raw)
            }
            // Unknown kid.
            let unknownKid = try provider.token(claims { _ in }, key: otherKey, kid: "unknown")
            await expectRPCError(.unauthenticated, "invalid_id_token") {
                try await fixture.signIn(.apple, token: unknownKid, rawNonce: raw)
            }
            // Wrong audience, wrong issuer, missing exp, missing iat, issued in the future.
            for change: (inout [String: Any?]) -> Void in [
                { $0["aud"] = "com.evil.app" },
                { $0["aud"] = ["com.evil.app", "another"] },
                // Several audiences, ours among them: `azp` must be ours (issue 19).
                { $0["aud"] = ["com.laten.app", "com.evil.app"] },
                {
                    $0["aud"] = ["com.laten.app", "com.evil.app"]
                    $0["azp"] = "com.evil.app"
                },
                { $0["iss"] = "https://evil.test" },
                { $0["exp"] = nil },
                { $0["iat"] = nil },
                { $0["iat"] = Int(now.timeIntervalSince1970) + 61 },
                { $0["sub"] = "" },
            ] {
                let token = try provider.token(claims(change))
                await expectRPCError(.unauthenticated, "invalid_id_token") {
                    try await fixture.signIn(.apple, token: token, rawNonce: raw)
                }
            }
            // Expired (more than 60 s ago); within the skew it passes.
            let expired = try provider.token(claims { $0["exp"] = Int(now.timeIntervalSince1970) - 61 })
            await expectRPCError(.unauthenticated, "id_token_expired") {
                try await fixture.signIn(.apple, token: expired, rawNonce: raw)
            }
            let justExpired = try provider.token(claims { $0["exp"] = Int(now.timeIntervalSince1970) - 30 })
            _ = try await fixture.signIn(.apple, token: justExpired, rawNonce: raw)
            // Wrong nonce, missing nonce.
            let token = try provider.token(claims { $0["jti"] = "fresh-1" })
            await expectRPCError(.unauthenticated, "invalid_nonce") {
                try await fixture.signIn(.apple, token: token, rawNonce: "another-nonce")
            }
            await expectRPCError(.unauthenticated, "invalid_nonce") {
                try await fixture.signIn(.apple, token: token)
            }
            // alg none, and HS256 "signed" with the public key.
            let parts = token.split(separator: ".").map(String.init)
            let noneHeader = Base64URL.encode(Array(#"{"alg":"none","kid":"\#(provider.kid)"}"#.utf8))
            await expectRPCError(.unauthenticated, "invalid_id_token") {
                try await fixture.signIn(.apple, token: "\(noneHeader).\(parts[1]).", rawNonce: raw)
            }
            let hsHeader = Base64URL.encode(Array(#"{"alg":"HS256","kid":"\#(provider.kid)"}"#.utf8))
            let hsInput = Array("\(hsHeader).\(parts[1])".utf8)
            let mac = HMACSHA256.authenticationCode(for: hsInput, key: provider.key.publicKey.x963Representation)
            await expectRPCError(.unauthenticated, "invalid_id_token") {
                try await fixture.signIn(
                    .apple,
                    token: "\(hsHeader).\(parts[1]).\(Base64URL.encode(mac))",
                    rawNonce: raw
                )
            }
            // Garbage.
            await expectRPCError(.unauthenticated, "invalid_id_token") {
                try await fixture.signIn(.apple, token: "not.a.token", rawNonce: raw)
            }
            // None of these made a user.
            #expect(try await fixture.query("SELECT count(*) FROM @users")[0][0].int == 1)
        }
    }

    @Test func aReplayedTokenIsRefused() async throws {
        let provider = try TestProvider()
        let clock = ManualClock()
        try await withProviderService(provider, clock: clock) { fixture in
            let token = try provider.token(provider.claims(nonce: appleNonce("n1"), now: clock.now()))
            _ = try await fixture.signIn(.apple, token: token, rawNonce: "n1")
            await expectRPCError(.unauthenticated, "id_token_replayed") {
                try await fixture.signIn(.apple, token: token, rawNonce: "n1")
            }
            // Without a jti, the token's hash is remembered.
            var claims = provider.claims(subject: "s-2", nonce: appleNonce("n2"), now: clock.now())
            claims["jti"] = nil
            let noJTI = try provider.token(claims)
            _ = try await fixture.signIn(.apple, token: noJTI, rawNonce: "n2")
            await expectRPCError(.unauthenticated, "id_token_replayed") {
                try await fixture.signIn(.apple, token: noJTI, rawNonce: "n2")
            }
        }
    }

    @Test func aProviderNotConfiguredIsNotEnabled() async throws {
        let provider = try TestProvider()
        let clock = ManualClock()
        try await withProviderService(provider, clock: clock, enabled: [.apple]) { fixture in
            let token = try provider.token(provider.claims(nonce: "n", now: clock.now()))
            let error = await expectRPCError(.failedPrecondition, "provider_not_enabled") {
                try await fixture.signIn(.google, token: token, rawNonce: "n")
            }
            #expect(error?.message.contains(token) == false)
            await expectRPCError(.invalidArgument, "invalid_argument") {
                try await fixture.signIn(.unspecified, token: token, rawNonce: "n")
            }
        }
    }

    @Test func twoConcurrentFirstSignInsWithOneIdentityMakeOneUser() async throws {
        let provider = try TestProvider()
        let clock = ManualClock()
        try await withProviderService(provider, clock: clock) { fixture in
            for round in 0..<5 {
                let subject = "concurrent-\(round)"
                let tokens = try (0..<2).map { i in
                    try provider.token(provider.claims(subject: subject, nonce: "n\(i)", now: clock.now()))
                }
                let results = try await withThrowingTaskGroup(of: Auth_Identity_V1_SignInWithIDTokenResponse.self) {
                    group in
                    for (i, token) in tokens.enumerated() {
                        group.addTask { try await fixture.signIn(.google, token: token, rawNonce: "n\(i)") }
                    }
                    return try await group.reduce(into: []) { $0.append($1) }
                }
                #expect(Set(results.compactMap { $0.user?.id }).count == 1)
                #expect(results.filter(\.created).count == 1)
                let rows = try await fixture.query(
                    "SELECT count(DISTINCT user_id) FROM @provider_identities WHERE subject = $1",
                    [.text(subject)]
                )
                #expect(try rows[0][0].int == 1)
            }
            #expect(try await fixture.query("SELECT count(*) FROM @users")[0][0].int == 5)
        }
    }

    @Test func linkingOnlyWhenBothSidesVerifiedTheEmail() async throws {
        let provider = try TestProvider()
        let clock = ManualClock()
        try await withProviderService(provider, clock: clock) { fixture in
            let user = try await fixture.signUp(email: "asha@example.com")
            // The account's email is not verified yet: a separate user, without the email.
            let first = try await fixture.signIn(
                .google,
                token: try provider.token(
                    provider.claims(
                        subject: "g-a",
                        nonce: "n",
                        email: "asha@example.com",
                        emailVerified: true,
                        now: clock.now()
                    )
                ),
                rawNonce: "n"
            )
            #expect(first.created)
            #expect(!first.linked)
            #expect(first.user?.id != user.id)
            #expect(first.user?.email == "")

            // The account proves its email with a code; a verified Google identity now links.
            _ = try await fixture.client.findOrCreateByContact(.init(email: "asha@example.com"))
            let linked = try await fixture.signIn(
                .apple,
                token: try provider.token(
                    provider.claims(
                        subject: "a-a",
                        nonce: appleNonce("n"),
                        email: "asha@example.com",
                        emailVerified: "true",
                        now: clock.now()
                    )
                ),
                rawNonce: "n"
            )
            #expect(!linked.created)
            #expect(linked.linked)
            #expect(linked.user?.id == user.id)
            #expect(linked.user?.providers == ["apple"])

            // A provider that does not assert email_verified never links.
            let facebook = try await fixture.signIn(
                .facebook,
                token: try provider.token(provider.claims(subject: "f-a", email: "asha@example.com", now: clock.now()))
            )
            #expect(facebook.created)
            #expect(facebook.user?.id != user.id)
            #expect(facebook.user?.email == "")
            let audit = try await fixture.operatorClient.listAuditEvents(.init(userID: user.id)).events
            #expect(audit.map(\.kind).contains("provider_linked"))
        }
    }

    @Test func theJWKSIsRefetchedForAnUnknownKidAtMostOncePerMinute() async throws {
        let provider = try TestProvider()
        let clock = ManualClock()
        try await withProviderService(provider, clock: clock) { fixture in
            _ = try await fixture.signIn(
                .google,
                token: try provider.token(provider.claims(subject: "a", nonce: "n", now: clock.now())),
                rawNonce: "n"
            )
            #expect(provider.fetchCount == 1)
            // The provider rotates to a new key.
            let newKey = try ES256PrivateKey()
            provider.publish([provider.key.publicKey.jwk(kid: provider.kid), newKey.publicKey.jwk(kid: "rotated")])
            clock.advance(seconds: 61)
            let rotated = try provider.token(
                provider.claims(subject: "b", nonce: "n", now: clock.now()),
                key: newKey,
                kid: "rotated"
            )
            _ = try await fixture.signIn(.google, token: rotated, rawNonce: "n")
            #expect(provider.fetchCount == 2)
            // Unknown kids within the minute: refused without fetching again.
            for i in 0..<5 {
                let bogus = try provider.token(
                    provider.claims(subject: "c\(i)", nonce: "n", now: clock.now()),
                    key: newKey,
                    kid: "bogus-\(i)"
                )
                await expectRPCError(.unauthenticated, "invalid_id_token") {
                    try await fixture.signIn(.google, token: bogus, rawNonce: "n")
                }
            }
            #expect(provider.fetchCount == 2)
            clock.advance(seconds: 60)
            let bogus = try provider.token(
                provider.claims(subject: "d", nonce: "n", now: clock.now()),
                key: newKey,
                kid: "bogus-x"
            )
            await expectRPCError(.unauthenticated, "invalid_id_token") {
                try await fixture.signIn(.google, token: bogus, rawNonce: "n")
            }
            #expect(provider.fetchCount == 3)
        }
    }

    @Test func anUnreachableJWKSIsProviderUnavailable() async throws {
        let clock = ManualClock()
        try await withIdentityService(
            clock: clock,
            configure: { configuration in
                configuration.providers[.google] = OIDCProviderConfiguration(
                    provider: .google,
                    clientIDs: ["c"],
                    // Port 1 on loopback: nothing listens there.
                    jwksURL: URL(string: "http://127.0.0.1:1/jwks")
                )
            }
        ) { fixture in
            let provider = try TestProvider(issuer: "https://accounts.google.com", clientID: "c")
            let token = try provider.token(provider.claims(nonce: "n", now: clock.now()))
            await expectRPCError(.unavailable, "provider_unavailable") {
                try await fixture.signIn(.google, token: token, rawNonce: "n")
            }
        }
    }

    /// Issue 19: with no keys held, every sign-in fetched the provider's JWKS again; now at most
    /// once per 10 s, and the sign-ins between answer `provider_unavailable` at once.
    @Test func anUnreachableJWKSIsFetchedAgainAtMostOncePer10Seconds() async throws {
        let clock = ManualClock()
        let fetcher = FailingJWKSFetcher()
        try await withIdentityService(
            clock: clock,
            fetcher: fetcher,
            configure: { configuration in
                configuration.providers[.google] = OIDCProviderConfiguration(
                    provider: .google,
                    clientIDs: ["c"],
                    jwksURL: URL(string: "https://keys.invalid/jwks")
                )
            }
        ) { fixture in
            let provider = try TestProvider(issuer: "https://accounts.google.com", clientID: "c")
            for _ in 0..<5 {
                let token = try provider.token(provider.claims(nonce: "n", now: clock.now()))
                await expectRPCError(.unavailable, "provider_unavailable") {
                    try await fixture.signIn(.google, token: token, rawNonce: "n")
                }
                clock.advance(seconds: 1)
            }
            #expect(fetcher.count == 1)
            clock.advance(seconds: 5)
            let token = try provider.token(provider.claims(nonce: "n", now: clock.now()))
            await expectRPCError(.unavailable, "provider_unavailable") {
                try await fixture.signIn(.google, token: token, rawNonce: "n")
            }
            #expect(fetcher.count == 2)
        }
    }

    /// OIDC Core: with several audiences, `azp` names the one it was issued to.
    @Test func severalAudiencesWithOurAzpAreAccepted() async throws {
        let provider = try TestProvider()
        let clock = ManualClock()
        try await withProviderService(provider, clock: clock) { fixture in
            let raw = "nonce-azp"
            var claims = provider.claims(nonce: appleNonce(raw), now: clock.now())
            claims["aud"] = ["com.laten.app", "com.laten.watch"]
            claims["azp"] = "com.laten.app"
            _ = try await fixture.signIn(.apple, token: try provider.token(claims), rawNonce: raw)
        }
    }
}

/// A JWKS endpoint that never answers, counting the attempts.
final class FailingJWKSFetcher: JWKSFetching {
    private let attempts = Atomic<Int>(0)
    var count: Int { attempts.load(ordering: .relaxed) }

    func fetch(_ url: URL) async throws -> [UInt8] {
        attempts.add(1, ordering: .relaxed)
        throw IdentityError(.providerUnavailable, "the test's provider is down")
    }
}

@Suite struct ProviderDeletionTests {
    @Test func aDeletedProviderUserIsGoneAndTheIdentityStartsAfresh() async throws {
        let provider = try TestProvider()
        let clock = ManualClock()
        try await withProviderService(provider, clock: clock) { fixture in
            let first = try await fixture.signIn(
                .google,
                token: try provider.token(
                    provider.claims(
                        subject: "g-del",
                        nonce: "n",
                        email: "del@example.com",
                        emailVerified: true,
                        now: clock.now()
                    )
                ),
                rawNonce: "n"
            )
            let id = try #require(first.user?.id)
            #expect(try await fixture.client.deleteUser(.init(userID: id)).deleted)
            let rows = try await fixture.query("SELECT count(*) FROM @provider_identities")
            #expect(try rows[0][0].int == 0)
            let again = try await fixture.signIn(
                .google,
                token: try provider.token(provider.claims(subject: "g-del", nonce: "n", now: clock.now())),
                rawNonce: "n"
            )
            #expect(again.created)
            #expect(again.user?.id != id)
        }
    }
}
