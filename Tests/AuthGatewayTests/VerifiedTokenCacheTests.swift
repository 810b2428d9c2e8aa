import AuthAccessToken
import AuthCrypto
import AuthTime
import Synchronization
import Testing

@testable import AuthGateway

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

@Suite struct VerifiedTokenCacheTests {
    static let issuer = "https://auth.example.test"
    static let audience = "example-app"

    /// A verified token for `subject` (the cache is filled by the verifier only).
    static func verified(_ subject: String) throws -> VerifiedAccessToken {
        let claims = AccessTokenClaims(
            issuer: issuer,
            audience: audience,
            subject: subject,
            sessionID: "s",
            issuedAt: 1,
            expiresAt: 2,
            tokenID: "j",
            amr: []
        )
        let set = try LocalAccessTokenVerifier.oneKeySet(signing: claims)
        return try set.verifier.verifyIgnoringTime(set.token)
    }

    @Test func aFullGenerationMakesRoomByDroppingTheOlderOne() throws {
        let cache = VerifiedTokenCache(capacityPerGeneration: 2)
        let a = try Self.verified("a")
        cache.store("a", a)
        cache.store("b", try Self.verified("b"))
        #expect(cache.count == 2)
        // "c" opens a new generation; "a" and "b" are still found, in the previous one.
        cache.store("c", try Self.verified("c"))
        #expect(cache.count == 3)
        // Found in the previous generation, "a" moves to the current one ("c", "a": full).
        #expect(cache.lookup("a") == a)
        // "d" opens another: "b", used least recently, is dropped; "c" and "a" remain.
        cache.store("d", try Self.verified("d"))
        #expect(cache.lookup("b") == nil)
        #expect(cache.lookup("a") == a)
        #expect(cache.lookup("c")?.claims.subject == "c")
        #expect(cache.lookup("d")?.claims.subject == "d")
        #expect(cache.count <= 4)
    }

    @Test func aStoredTokenIsNotVerifiedAgainAndARefusedOneIsNotStored() throws {
        struct Refused: Error {}
        let cache = VerifiedTokenCache()
        let a = try Self.verified("a")
        var verifications = 0
        for _ in 0..<3 {
            let found = try cache.verified("a") { () throws(Refused) in
                verifications += 1
                return a
            }
            #expect(found == a)
        }
        #expect(verifications == 1)
        #expect(throws: Refused.self) {
            try cache.verified("b") { () throws(Refused) -> VerifiedAccessToken in throw Refused() }
        }
        #expect(cache.count == 1)
        #expect(cache.lookup("b") == nil)
    }

    @Test func aTokenIsVerifiedOnceAndItsTimesOnEveryUse() throws {
        let now = Date().unixSeconds
        let live = AccessTokenClaims(
            issuer: Self.issuer,
            audience: Self.audience,
            subject: "user-1",
            sessionID: "8d1f4a36-3f5b-4d55-9d3c-1d2a3b4c5d6e",
            issuedAt: now - 60,
            expiresAt: now + 600,
            tokenID: "j1",
            amr: ["otp_sms"]
        )
        var expired = live
        expired.issuedAt = now - 7200
        expired.expiresAt = now - 3600
        let set = try LocalAccessTokenVerifier.oneKeySet(signing: live)
        let expiredToken = try AccessTokenCodec.sign(expired, key: set.key, kid: "k1")
        let keys = JWKSCache.Keys(
            json: set.json,
            verifier: set.verifier,
            fetchedAt: .now,
            verifiedTokens: VerifiedTokenCache()
        )

        #expect(try AccessTokenAuthenticator.verify(set.token, with: keys) == live)
        #expect(keys.verifiedTokens.count == 1)
        #expect(try AccessTokenAuthenticator.verify(set.token, with: keys) == live)
        #expect(keys.verifiedTokens.count == 1)

        // Its signature verifies, so it is kept; its exp is checked on each use all the same.
        for _ in 0..<2 {
            #expect(throws: AccessTokenError(.expired, "The access token has expired.")) {
                try AccessTokenAuthenticator.verify(expiredToken, with: keys)
            }
        }
        #expect(keys.verifiedTokens.count == 2)

        // A token whose signature fails is never kept.
        var forged = Array(set.token.utf8)
        forged[forged.count - 2] = forged[forged.count - 2] == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A")
        #expect(throws: AccessTokenError.self) {
            try AccessTokenAuthenticator.verify(String(decoding: forged, as: UTF8.self), with: keys)
        }
        #expect(keys.verifiedTokens.count == 2)
    }

    @Test func theCacheLastsWhileTheKeySetIsUnchanged() async throws {
        let first = try LocalAccessTokenVerifier.oneKeySet(signing: try Self.verified("x").claims)
        let second = try ES256PrivateKey()
        let published = Mutex(first.json)
        let jwks = JWKSCache(maxAge: .zero, refetchInterval: .zero, issuer: Self.issuer, audience: Self.audience) {
            published.withLock { $0 }
        }
        let before = try await jwks.keys()
        before.verifiedTokens.store("t", try Self.verified("x"))
        // Fetched again (maxAge zero), the same JSON: the same cache.
        let again = try await jwks.keys()
        #expect(again.fetchedAt != before.fetchedAt)
        #expect(again.verifiedTokens === before.verifiedTokens)
        #expect(again.verifiedTokens.lookup("t") != nil)
        // A key added (or retired): a new, empty cache.
        let rotated = try JSONEncoder().encode(
            JWKSet(keys: [first.key.publicKey.jwk(kid: "k1"), second.publicKey.jwk(kid: "k2")])
        )
        published.withLock { $0 = String(decoding: rotated, as: UTF8.self) }
        let after = try await jwks.keys()
        #expect(after.verifiedTokens !== before.verifiedTokens)
        #expect(after.verifiedTokens.lookup("t") == nil)
    }
}

extension LocalAccessTokenVerifier {
    /// A new key published as `k1` in a one-key set, the set's verifier, and `claims` signed with it.
    static func oneKeySet(
        signing claims: AccessTokenClaims
    ) throws -> (key: ES256PrivateKey, json: String, verifier: LocalAccessTokenVerifier, token: String) {
        let key = try ES256PrivateKey()
        let json = String(
            decoding: try JSONEncoder().encode(JWKSet(keys: [key.publicKey.jwk(kid: "k1")])),
            as: UTF8.self
        )
        let verifier = try LocalAccessTokenVerifier(
            jwksJSON: json,
            issuer: VerifiedTokenCacheTests.issuer,
            audience: VerifiedTokenCacheTests.audience
        )
        return (key, json, verifier, try AccessTokenCodec.sign(claims, key: key, kid: "k1"))
    }
}
