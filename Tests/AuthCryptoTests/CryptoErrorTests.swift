import AuthCrypto
import Testing

@Suite struct CryptoErrorTests {
    @Test func description() {
        let error = CryptoError(code: .invalidKey, message: "bad key", openSSLErrors: ["error:1", "error:2"])
        #expect(error.description == "CryptoError(invalidKey): bad key [OpenSSL: error:1; error:2]")
        #expect(CryptoError(code: .internalError, message: "x").description == "CryptoError(internalError): x")
        #expect(CryptoError.Code.invalidKey != .invalidArgument)
    }

    @Test("OpenSSL's error queue is reported and then cleared")
    func openSSLQueue() throws {
        let y = try #require(Base64URL.decode(RFC7515.ecY))
        let x = try #require(Base64URL.decode(RFC7515.ecX))
        do {
            _ = try ES256PublicKey(x: x, y: flippingBit(y, at: 31))
            Issue.record("accepted a point off the curve")
        } catch {
            #expect(error.code == .invalidKey)
            #expect(!error.openSSLErrors.isEmpty, "\(error)")
        }
        // The next failure on this thread reports only its own errors, not the stale ones.
        do {
            _ = try ES256PublicKey(x963Representation: [0x05])
        } catch {
            #expect(error.openSSLErrors.isEmpty, "\(error)")
        }
    }
}
