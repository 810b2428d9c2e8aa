import AuthAccessToken
import Testing

@testable import AuthGateway

@Suite struct AccessTokenAuthenticatorTests {
    @Test(arguments: [
        ("Bearer abc.def.ghi", "abc.def.ghi"),
        ("bearer abc", "abc"),
        ("BEARER abc", "abc"),
        ("Bearer    abc  ", "abc"),
        (" Bearer abc\t", "abc"),
        ("Bearer a b", "a b"),  // not a token, but refused by the verifier, not here
    ])
    func bearerTokensAreRead(header: String, token: String) {
        #expect(AccessTokenAuthenticator.bearerToken(header) == token)
    }

    @Test(arguments: [
        "", "Bearer", "Bearer ", "Bearer    ", "Bearerabc", "Basic abc", "Bearer\tabc", "Bear abc", "Bearer\u{00A0}abc",
    ])
    func otherAuthorizationValuesAreRefused(header: String) {
        #expect(AccessTokenAuthenticator.bearerToken(header) == nil)
    }

    @Test func aTokenLongerThanAnyAccessTokenIsRefused() {
        let longest = String(repeating: "a", count: AccessTokenCodec.maximumLength)
        #expect(AccessTokenAuthenticator.bearerToken("Bearer " + longest) == longest)
        #expect(AccessTokenAuthenticator.bearerToken("Bearer " + longest + "a") == nil)
    }
}
