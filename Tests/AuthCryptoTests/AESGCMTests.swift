import AuthCrypto
import Testing

/// The 256-bit-key test cases of McGrew and Viega, "The Galois/Counter Mode of Operation (GCM)"
/// (revised 2005 submission to NIST), Appendix B, test cases 13–16.
struct GCMVector: Sendable, CustomTestStringConvertible {
    var name: String
    var key: String
    var plaintext: String
    var aad: String
    var nonce: String
    var ciphertext: String
    var tag: String

    var testDescription: String { self.name }

    static let key15 = "feffe9928665731c6d6a8f9467308308feffe9928665731c6d6a8f9467308308"
    static let plaintext15 = """
        d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a72
        1c3c0c95956809532fcf0e2449a6b525b16aedf5aa0de657ba637b391aafd255
        """
    static let ciphertext15 = """
        522dc1f099567d07f47f37a32a84427d643a8cdcbfe5c0c97598a2bd2555d1aa
        8cb08e48590dbb3da7b08b1056828838c5f61e6393ba7a0abcc9f662898015ad
        """

    static let mcGrewViega: [GCMVector] = [
        GCMVector(
            name: "test case 13 (empty plaintext, zero key)",
            key: String(repeating: "00", count: 32),
            plaintext: "",
            aad: "",
            nonce: String(repeating: "00", count: 12),
            ciphertext: "",
            tag: "530f8afbc74536b9a963b4f1c4cb738b"
        ),
        GCMVector(
            name: "test case 14 (one zero block)",
            key: String(repeating: "00", count: 32),
            plaintext: String(repeating: "00", count: 16),
            aad: "",
            nonce: String(repeating: "00", count: 12),
            ciphertext: "cea7403d4d606b6e074ec5d3baf39d18",
            tag: "d0d1c8a799996bf0265b98b5d48ab919"
        ),
        GCMVector(
            name: "test case 15 (four blocks, no AAD)",
            key: key15,
            plaintext: plaintext15,
            aad: "",
            nonce: "cafebabefacedbaddecaf888",
            ciphertext: ciphertext15,
            tag: "b094dac5d93471bdec1a502270e3cc6c"
        ),
        GCMVector(
            name: "test case 16 (60-byte plaintext, 20-byte AAD)",
            key: key15,
            plaintext: String(plaintext15.filter { !$0.isWhitespace }.prefix(120)),
            aad: "feedfacedeadbeeffeedfacedeadbeefabaddad2",
            nonce: "cafebabefacedbaddecaf888",
            ciphertext: String(ciphertext15.filter { !$0.isWhitespace }.prefix(120)),
            tag: "76fc6ece0f4e1768cddf8853bb2d551b"
        ),
    ]
}

@Suite struct AESGCMTests {
    @Test(arguments: GCMVector.mcGrewViega)
    func knownAnswers(_ vector: GCMVector) throws {
        let (ciphertext, tag) = try AESGCM.seal(
            hex(vector.plaintext),
            key: hex(vector.key),
            nonce: hex(vector.nonce),
            aad: hex(vector.aad)
        )
        #expect(ciphertext == hex(vector.ciphertext))
        #expect(tag == hex(vector.tag))
        let opened = try AESGCM.open(
            ciphertext: hex(vector.ciphertext),
            tag: hex(vector.tag),
            key: hex(vector.key),
            nonce: hex(vector.nonce),
            aad: hex(vector.aad)
        )
        #expect(opened == hex(vector.plaintext))
        // The combined format is nonce ‖ ciphertext ‖ tag.
        let sealed = hex(vector.nonce) + hex(vector.ciphertext) + hex(vector.tag)
        #expect(try AESGCM.open(sealed, key: hex(vector.key), aad: hex(vector.aad)) == hex(vector.plaintext))
    }

    @Test func roundTripWithRandomNonce() throws {
        let key = SecureRandom.bytes(count: 32)
        for length in [0, 1, 15, 16, 17, 1000] {
            let plaintext = SecureRandom.bytes(count: length)
            let sealed = try AESGCM.seal(plaintext, key: key, aad: utf8("user:42"))
            #expect(sealed.count == 12 + length + 16)
            #expect(try AESGCM.open(sealed, key: key, aad: utf8("user:42")) == plaintext)
            let again = try AESGCM.seal(plaintext, key: key, aad: utf8("user:42"))
            #expect(Array(again.prefix(12)) != Array(sealed.prefix(12)), "fresh nonce each time")
        }
    }

    @Test("flipping any single bit of nonce, ciphertext, tag or AAD makes open fail")
    func tampering() throws {
        let key = SecureRandom.bytes(count: 32)
        let aad = utf8("associated")
        let sealed = try AESGCM.seal(utf8("attack at dawn"), key: key, aad: aad)
        for index in sealed.indices {
            for bit in [0, 7] {
                Self.expectAuthenticationFailure {
                    try AESGCM.open(flippingBit(sealed, at: index, bit: bit), key: key, aad: aad)
                }
            }
        }
        for index in aad.indices {
            Self.expectAuthenticationFailure { try AESGCM.open(sealed, key: key, aad: flippingBit(aad, at: index)) }
        }
        Self.expectAuthenticationFailure { try AESGCM.open(sealed, key: key, aad: []) }
        Self.expectAuthenticationFailure { try AESGCM.open(sealed, key: key, aad: aad + [0]) }
        Self.expectAuthenticationFailure { try AESGCM.open(sealed, key: flippingBit(key, at: 0), aad: aad) }
        Self.expectAuthenticationFailure { try AESGCM.open(Array(sealed.dropLast()), key: key, aad: aad) }
        Self.expectAuthenticationFailure { try AESGCM.open(sealed + [0], key: key, aad: aad) }
        Self.expectAuthenticationFailure { try AESGCM.open(Array(sealed.prefix(27)), key: key, aad: aad) }
        Self.expectAuthenticationFailure { try AESGCM.open([], key: key, aad: aad) }
        // Known-answer tag of test case 16 with one bit flipped.
        let vector = GCMVector.mcGrewViega[3]
        Self.expectAuthenticationFailure {
            try AESGCM.open(
                ciphertext: hex(vector.ciphertext),
                tag: flippingBit(hex(vector.tag), at: 15),
                key: hex(vector.key),
                nonce: hex(vector.nonce),
                aad: hex(vector.aad)
            )
        }
        Self.expectAuthenticationFailure {
            try AESGCM.open(
                ciphertext: hex(vector.ciphertext),
                tag: Array(hex(vector.tag).prefix(12)),
                key: hex(vector.key),
                nonce: hex(vector.nonce),
                aad: hex(vector.aad)
            )
        }
    }

    @Test func invalidSizes() {
        for key in [
            [UInt8](), [UInt8](repeating: 0, count: 16), [UInt8](repeating: 0, count: 31),
            [UInt8](repeating: 0, count: 33),
        ] {
            #expect(throws: CryptoError.self) { try AESGCM.seal([1], key: key) }
            #expect(throws: CryptoError.self) { try AESGCM.open([UInt8](repeating: 0, count: 40), key: key) }
        }
        #expect(throws: CryptoError.self) {
            try AESGCM.seal([1], key: [UInt8](repeating: 0, count: 32), nonce: [UInt8](repeating: 0, count: 16))
        }
        #expect(throws: CryptoError.self) { try AESGCM.seal([1], key: [UInt8](repeating: 0, count: 32), nonce: []) }
    }

    static func expectAuthenticationFailure(
        _ body: () throws -> [UInt8],
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        expectCryptoError(.authenticationFailure, sourceLocation: sourceLocation, body)
    }
}
