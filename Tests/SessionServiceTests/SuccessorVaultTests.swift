import AuthCrypto
import Foundation
import Testing

@testable import SessionService

@Suite struct SuccessorVaultTests {
    let vault = SuccessorVault(masterKey: .random())
    let tokens = IssuedTokens(
        refreshToken: .generate(),
        accessToken: "header.payload.signature",
        accessTokenExpiresAt: 1_780_272_900,
        refreshTokenExpiresAt: Date(timeIntervalSince1970: 1_780_876_800.123456)
    )

    @Test func opensWithThePresentedToken() throws {
        let presented = RefreshToken.generate()
        let session = UUID()
        let sealed = try vault.seal(tokens, presented: presented, sessionID: session, generation: 4)
        #expect(try vault.open(sealed, presented: presented, sessionID: session, generation: 4) == tokens)
        // The box never contains the successor token in the clear.
        #expect(!Data(sealed).contains(Data(tokens.refreshToken.bytes)))
    }

    @Test func refusesAnotherTokenSessionGenerationOrMasterKey() throws {
        let presented = RefreshToken.generate()
        let session = UUID()
        let sealed = try vault.seal(tokens, presented: presented, sessionID: session, generation: 4)
        #expect(throws: CryptoError.self) {
            try vault.open(sealed, presented: .generate(), sessionID: session, generation: 4)
        }
        #expect(throws: CryptoError.self) {
            try vault.open(sealed, presented: presented, sessionID: UUID(), generation: 4)
        }
        #expect(throws: CryptoError.self) {
            try vault.open(sealed, presented: presented, sessionID: session, generation: 5)
        }
        let other = SuccessorVault(masterKey: .random())
        #expect(throws: CryptoError.self) {
            try other.open(sealed, presented: presented, sessionID: session, generation: 4)
        }
    }

    @Test func refreshTokenFormat() throws {
        let token = RefreshToken.generate()
        #expect(token.string.count == 43)
        #expect(RefreshToken(string: token.string) == token)
        #expect(RefreshToken(string: token.string + "=") == nil)
        #expect(RefreshToken(string: String(token.string.dropLast())) == nil)
        #expect(RefreshToken(string: "") == nil)
        #expect(RefreshToken(string: String(repeating: "!", count: 43)) == nil)
        #expect(token.hash == SHA256.hash(token.bytes))
    }
}
