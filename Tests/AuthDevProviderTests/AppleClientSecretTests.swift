import AuthCrypto
import Testing

@testable import AuthDevProvider

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

@Suite struct AppleClientSecretTests {
    let key: ES256PrivateKey
    let configuration: DevOAuthProvider.Configuration
    let now: Int64 = 1_750_000_000

    init() throws {
        key = try ES256PrivateKey()
        var configuration = DevOAuthProvider.Configuration()
        configuration.appleClientSecretKey = key.publicKey
        self.configuration = configuration
    }

    func secret(
        iss: String = "DEVTEAM001",
        sub: String = "dev.apple.services",
        aud: String = "https://appleid.apple.com",
        iat: Int64? = nil,
        exp: Int64? = nil,
        kid: String = "DEVKEY0001"
    ) throws -> String {
        let claims = AppleSecretClaims(iss: iss, iat: iat ?? now, exp: exp ?? now + 3600, aud: aud, sub: sub)
        return try AppleSecretClaims.sign(claims, key: key, kid: kid)
    }

    func problem(_ secret: String, _ configuration: DevOAuthProvider.Configuration? = nil) -> String? {
        AppleClientSecret.problem(with: secret, configuration: configuration ?? self.configuration, now: Double(now))
    }

    @Test func aSecretAsTheBackendWritesItIsAccepted() throws {
        #expect(problem(try secret()) == nil)
        // Six months exactly, and a minute of skew either way.
        #expect(problem(try secret(iat: now - 15_777_000 + 30, exp: now + 30)) == nil)
        #expect(problem(try secret(iat: now + 59)) == nil)
    }

    @Test func eachClaimIsChecked() throws {
        #expect(problem(try secret(iss: "OTHERTEAM")) != nil)
        #expect(problem(try secret(sub: "other.services")) != nil)
        #expect(problem(try secret(aud: "https://example.com")) != nil)
        #expect(problem(try secret(kid: "OTHERKEY")) != nil)
        #expect(problem(try secret(iat: now - 7200, exp: now - 61)) != nil)
        #expect(problem(try secret(iat: now + 61, exp: now + 3600)) != nil)
        #expect(problem(try secret(iat: now, exp: now + 15_777_001)) != nil)
        #expect(problem("not.a.jwt") != nil)
    }

    @Test func withoutAConfiguredKeyEverySecretIsRefused() throws {
        #expect(problem(try secret(), DevOAuthProvider.Configuration()) != nil)
    }
}
