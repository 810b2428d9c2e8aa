import AuthCrypto
import Testing

@Suite struct ES256PEMTests {
    /// An Apple key file's form: PEM PKCS #8, read back to the same key.
    @Test func aKeyRoundTripsThroughPEM() throws {
        let key = try ES256PrivateKey()
        let pem = try key.pemRepresentation
        #expect(pem.hasPrefix("-----BEGIN PRIVATE KEY-----\n"))
        #expect(pem.hasSuffix("-----END PRIVATE KEY-----\n"))
        let read = try ES256PrivateKey(pemRepresentation: pem)
        #expect(try read.rawRepresentation == key.rawRepresentation)
        // Windows line ends and surrounding text are fine.
        let crlf = "Apple key\r\n" + pem.split(separator: "\n").joined(separator: "\r\n") + "\r\n"
        #expect(try ES256PrivateKey(pemRepresentation: crlf).rawRepresentation == key.rawRepresentation)
    }

    @Test func textWithoutAPrivateKeyBlockIsRefused() {
        #expect(throws: CryptoError.self) { try ES256PrivateKey(pemRepresentation: "not a key") }
        #expect(throws: CryptoError.self) {
            try ES256PrivateKey(pemRepresentation: "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n")
        }
    }
}
