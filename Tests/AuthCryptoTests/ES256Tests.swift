import AuthCrypto
import Testing

@Suite struct ES256Tests {
    static func rfcPublicKey() throws -> ES256PublicKey {
        try ES256PublicKey(x: Base64URL.decode(RFC7515.ecX)!, y: Base64URL.decode(RFC7515.ecY)!)
    }

    @Test("RFC 7515 §A.3: the published ES256 signature verifies with the published key")
    func rfc7515Verify() throws {
        let key = try Self.rfcPublicKey()
        let parts = RFC7515.es256Token.split(separator: ".")
        let signingInput = utf8("\(parts[0]).\(parts[1])")
        let signature = try #require(Base64URL.decode(String(parts[2])))
        #expect(signature.count == 64)
        #expect(key.isValidSignature(signature, for: signingInput))
        #expect(!key.isValidSignature(signature, for: signingInput + [0x20]))
        #expect(!key.isValidSignature(flippingBit(signature, at: 63), for: signingInput))
        #expect(!key.isValidSignature(flippingBit(signature, at: 0), for: signingInput))
    }

    @Test("RFC 7515 §A.3: the published d yields the published public key; sign and verify round trip")
    func rfc7515PrivateKey() throws {
        let privateKey = try ES256PrivateKey(rawRepresentation: Base64URL.decode(RFC7515.ecD)!)
        #expect(Base64URL.encode(privateKey.publicKey.x) == RFC7515.ecX)
        #expect(Base64URL.encode(privateKey.publicKey.y) == RFC7515.ecY)
        #expect(try privateKey.rawRepresentation == Base64URL.decode(RFC7515.ecD)!)

        let message = utf8("eyJhbGciOiJFUzI1NiJ9.\(RFC7515.encodedPayload)")
        let first = try privateKey.signature(for: message)
        let second = try privateKey.signature(for: message)
        #expect(first.count == 64)
        #expect(first != second, "ECDSA signatures are randomised")
        let publicKey = try Self.rfcPublicKey()
        #expect(publicKey.isValidSignature(first, for: message))
        #expect(publicKey.isValidSignature(second, for: message))
    }

    @Test func generatedKeysSignAndVerify() throws {
        let key = try ES256PrivateKey()
        let other = try ES256PrivateKey()
        #expect(key.publicKey.x963Representation != other.publicKey.x963Representation)
        let message = SecureRandom.bytes(count: 100)
        let signature = try key.signature(for: message)
        #expect(key.publicKey.isValidSignature(signature, for: message))
        #expect(!other.publicKey.isValidSignature(signature, for: message))
        #expect(try key.signature(for: []).count == 64)
        #expect(key.publicKey.isValidSignature(try key.signature(for: []), for: []))
    }

    @Test func rawAndPKCS8RoundTrips() throws {
        let key = try ES256PrivateKey()
        let raw = try key.rawRepresentation
        #expect(raw.count == 32)
        let fromRaw = try ES256PrivateKey(rawRepresentation: raw)
        #expect(fromRaw.publicKey.x963Representation == key.publicKey.x963Representation)
        let withPoint = try ES256PrivateKey(rawRepresentation: raw, x963PublicKey: key.publicKey.x963Representation)
        #expect(withPoint.publicKey.x963Representation == key.publicKey.x963Representation)

        let der = try key.pkcs8DERRepresentation
        #expect(der.first == 0x30)
        let fromDER = try ES256PrivateKey(pkcs8DERRepresentation: der)
        #expect(try fromDER.rawRepresentation == raw)
        #expect(fromDER.publicKey.x963Representation == key.publicKey.x963Representation)
        let message = utf8("hello")
        #expect(key.publicKey.isValidSignature(try fromDER.signature(for: message), for: message))

        let publicCopy = try ES256PublicKey(x963Representation: key.publicKey.x963Representation)
        #expect(publicCopy.x == key.publicKey.x && publicCopy.y == key.publicKey.y)
    }

    @Test func malformedPrivateKeysAreRejected() throws {
        let order = hex("ffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551")  // n of P-256
        for bad in [
            [UInt8](repeating: 0, count: 32), order, [UInt8](repeating: 0xff, count: 32), [1],
            [UInt8](repeating: 1, count: 33),
        ] {
            #expect(throws: CryptoError.self) { try ES256PrivateKey(rawRepresentation: bad) }
        }
        let key = try ES256PrivateKey()
        let other = try ES256PrivateKey()
        #expect(throws: CryptoError.self) {
            try ES256PrivateKey(
                rawRepresentation: key.rawRepresentation,
                x963PublicKey: other.publicKey.x963Representation
            )
        }
        #expect(throws: CryptoError.self) { try ES256PrivateKey(pkcs8DERRepresentation: []) }
        #expect(throws: CryptoError.self) {
            try ES256PrivateKey(pkcs8DERRepresentation: [0x30, 0x03, 0x02, 0x01, 0x00])
        }
        let der = try key.pkcs8DERRepresentation
        #expect(throws: CryptoError.self) { try ES256PrivateKey(pkcs8DERRepresentation: der + [0]) }
        #expect(throws: CryptoError.self) { try ES256PrivateKey(pkcs8DERRepresentation: Array(der.dropLast())) }
    }

    @Test("points not on the curve are rejected at import")
    func pointsOffTheCurve() throws {
        let x = try #require(Base64URL.decode(RFC7515.ecX))
        let y = try #require(Base64URL.decode(RFC7515.ecY))
        do {
            _ = try ES256PublicKey(x: x, y: flippingBit(y, at: 31))
            Issue.record("accepted a point off the curve")
        } catch {
            #expect(error.code == .invalidKey)
        }
        #expect(throws: CryptoError.self) {
            try ES256PublicKey(x: [UInt8](repeating: 0, count: 32), y: [UInt8](repeating: 0, count: 32))
        }
        #expect(throws: CryptoError.self) { try ES256PublicKey(x: x, y: Array(y.dropLast())) }
        // Compressed and hybrid encodings, and a wrong prefix, are refused.
        #expect(throws: CryptoError.self) { try ES256PublicKey(x963Representation: [0x02] + x) }
        #expect(throws: CryptoError.self) { try ES256PublicKey(x963Representation: [0x06] + x + y) }
        #expect(throws: CryptoError.self) { try ES256PublicKey(x963Representation: [0x04] + x + y + [0]) }
        // Coordinates not below p: x = p is not a field element.
        let p = hex("ffffffff00000001000000000000000000000000ffffffffffffffffffffffff")
        #expect(throws: CryptoError.self) { try ES256PublicKey(x: p, y: y) }
    }

    @Test("only exactly-64-byte r‖s signatures are accepted")
    func signatureShape() throws {
        let key = try ES256PrivateKey()
        let message = utf8("m")
        let signature = try key.signature(for: message)
        #expect(!key.publicKey.isValidSignature(Array(signature.dropLast()), for: message))
        #expect(!key.publicKey.isValidSignature(signature + [0], for: message))
        #expect(!key.publicKey.isValidSignature([0] + signature, for: message))
        #expect(!key.publicKey.isValidSignature([], for: message))
        #expect(!key.publicKey.isValidSignature([UInt8](repeating: 0, count: 64), for: message))
        #expect(!key.publicKey.isValidSignature([UInt8](repeating: 0xff, count: 64), for: message))
        // r = 0 or s = 0.
        #expect(!key.publicKey.isValidSignature([UInt8](repeating: 0, count: 32) + signature[32...], for: message))
        #expect(
            !key.publicKey.isValidSignature(Array(signature[..<32]) + [UInt8](repeating: 0, count: 32), for: message)
        )
    }

    @Test func concurrentSigningWithOneKey() async throws {
        let key = try ES256PrivateKey()
        let publicKey = key.publicKey
        try await withThrowingTaskGroup(of: Bool.self) { group in
            for worker in 0..<4 {
                group.addTask {
                    var ok = true
                    for round in 0..<50 {
                        let message = utf8("\(worker)-\(round)")
                        let signature = try key.signature(for: message)
                        ok = ok && publicKey.isValidSignature(signature, for: message)
                    }
                    return ok
                }
            }
            for try await result in group {
                #expect(result)
            }
        }
    }
}
