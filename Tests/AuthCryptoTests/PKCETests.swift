import Testing

@testable import AuthCrypto

@Suite struct PKCETests {
    @Test func verifiersAndChallengesAreCheckedByRFC7636() {
        #expect(PKCE.isVerifier(String(repeating: "a", count: 43)))
        #expect(PKCE.isVerifier(String(repeating: "a", count: 128)))
        #expect(!PKCE.isVerifier(String(repeating: "a", count: 42)))
        #expect(!PKCE.isVerifier(String(repeating: "a", count: 129)))
        #expect(!PKCE.isVerifier(String(repeating: "a", count: 42) + "+"))
        #expect(PKCE.isChallenge(PKCE.challenge(of: PKCE.randomToken())))
        #expect(!PKCE.isChallenge(String(repeating: "a", count: 42) + "."))
        #expect(!PKCE.isChallenge(String(repeating: "a", count: 44)))
        // RFC 7636 appendix B.
        #expect(
            PKCE.challenge(of: "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk")
                == "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
        )
    }
}
