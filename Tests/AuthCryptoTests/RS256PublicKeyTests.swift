import AuthCrypto
import Testing

@Suite struct RS256PublicKeyTests {
    static func rfcKey() throws -> RS256PublicKey {
        try RS256PublicKey(modulus: Base64URL.decode(RFC7515.rsaN)!, exponent: Base64URL.decode(RFC7515.rsaE)!)
    }

    @Test("RFC 7515 §A.2: the published RS256 signature verifies with the published key")
    func rfc7515Verify() throws {
        let key = try Self.rfcKey()
        #expect(key.modulusBits == 2048)
        let parts = RFC7515.rs256Token.split(separator: ".")
        let signingInput = utf8("\(parts[0]).\(parts[1])")
        let signature = try #require(Base64URL.decode(String(parts[2])))
        #expect(signature.count == 256)
        #expect(key.isValidSignature(signature, for: signingInput))
        #expect(!key.isValidSignature(signature, for: signingInput + [0x20]))
        #expect(!key.isValidSignature(flippingBit(signature, at: 100), for: signingInput))
        #expect(!key.isValidSignature(Array(signature.dropFirst()), for: signingInput))
        #expect(!key.isValidSignature([0] + signature, for: signingInput))
        #expect(!key.isValidSignature([], for: signingInput))
    }

    @Test func exportRoundTrip() throws {
        let key = try Self.rfcKey()
        #expect(Base64URL.encode(try key.modulus) == RFC7515.rsaN)
        #expect(Base64URL.encode(try key.exponent) == RFC7515.rsaE)
        // A leading zero octet (which some encoders add) is tolerated.
        let padded = try RS256PublicKey(modulus: [0] + Base64URL.decode(RFC7515.rsaN)!, exponent: [0, 1, 0, 1])
        #expect(padded.modulusBits == 2048)
    }

    @Test("moduli under 2048 bits and bad exponents are rejected")
    func weakKeys() throws {
        let n = try #require(Base64URL.decode(RFC7515.rsaN))
        // 1024 bits (made odd).
        var short = Array(n.prefix(128))
        short[127] |= 1
        for (modulus, exponent) in [
            (short, [UInt8]([1, 0, 1])),
            (Array(n.dropLast()) + [n.last! & 0xfe], [1, 0, 1]),  // even modulus
            (n, [1, 0, 0]),  // even exponent
            (n, [1]),  // e = 1
            (n, []),  // e = 0
            (n, [UInt8](repeating: 0xff, count: 9)),  // 72-bit exponent
            ([UInt8](repeating: 0xff, count: 2049), [1, 0, 1]),  // over 16384 bits
        ] {
            do {
                _ = try RS256PublicKey(modulus: modulus, exponent: exponent)
                Issue.record("accepted a weak or malformed key")
            } catch {
                #expect(error.code == .invalidKey)
            }
        }
    }
}
