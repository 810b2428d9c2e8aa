import Foundation
import Testing

@testable import AuthCrypto

@Suite struct JWSTests {
    static func rfcECKey() throws -> ES256PublicKey {
        try ES256PublicKey(x: Base64URL.decode(RFC7515.ecX)!, y: Base64URL.decode(RFC7515.ecY)!)
    }

    static func rfcRSAKey() throws -> RS256PublicKey {
        try RS256PublicKey(jwk: JWK(kty: "RSA", n: RFC7515.rsaN, e: RFC7515.rsaE))
    }

    static func expectFailure(
        _ code: CryptoError.Code,
        sourceLocation: SourceLocation = #_sourceLocation,
        _ body: () throws -> [UInt8]
    ) {
        expectCryptoError(code, sourceLocation: sourceLocation, body)
    }

    @Test("RFC 7515 §A.3: the published ES256 token verifies with the published JWK")
    func rfc7515ES256() throws {
        let key = try ES256PublicKey(jwk: JWK(kty: "EC", crv: "P-256", x: RFC7515.ecX, y: RFC7515.ecY))
        #expect(try JWS.verify(RFC7515.es256Token, expectedAlgorithm: .es256, key: key) == RFC7515.payload)
        let parts = try JWS.parse(RFC7515.es256Token)
        #expect(parts.header == JOSEHeader(alg: "ES256"))
        #expect(parts.headerJSON == utf8("{\"alg\":\"ES256\"}"))
        #expect(parts.payload == RFC7515.payload)
        #expect(parts.signingInput == utf8("eyJhbGciOiJFUzI1NiJ9.\(RFC7515.encodedPayload)"))
        #expect(parts.signature.count == 64)
    }

    @Test("RFC 7515 §A.2: the published RS256 token verifies with the published key")
    func rfc7515RS256() throws {
        #expect(try JWS.verify(RFC7515.rs256Token, expectedAlgorithm: .rs256, key: Self.rfcRSAKey()) == RFC7515.payload)
    }

    @Test(
        "the JOSE header written by hand is what JSONEncoder wrote (sorted, slashes as they are)",
        arguments: [
            JOSEHeader(alg: "ES256"),
            JOSEHeader(alg: "ES256", kid: "2026-11-28T00:00:00Z/ab+c", typ: "at+jwt"),
            JOSEHeader(
                alg: "ES256",
                kid: "k\"q\\u\u{1}\n\t\r\u{8}\u{C}\u{1F}é/ü😀",
                typ: "application/at+jwt",
                cty: "JWT"
            ),
            JOSEHeader(alg: "RS256", typ: "JWT", crit: ["b64", "exp"]),
            JOSEHeader(alg: "ES256", crit: []),
        ]
    )
    func headerJSONMatchesJSONEncoder(_ header: JOSEHeader) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let expected = try encoder.encode(header)
        #expect(header.json == String(decoding: expected, as: UTF8.self))
        #expect(try JSONDecoder().decode(JOSEHeader.self, from: Data(header.json.utf8)) == header)
    }

    @Test func signAndVerifyRoundTrip() throws {
        let key = try ES256PrivateKey(rawRepresentation: Base64URL.decode(RFC7515.ecD)!)
        let payload = utf8("{\"sub\":\"user-1\"}")
        let token = try JWS.signES256(payload: payload, key: key, kid: "k1", typ: "JWT")
        let parts = try JWS.parse(token)
        #expect(parts.header == JOSEHeader(alg: "ES256", kid: "k1", typ: "JWT"))
        #expect(parts.headerJSON == utf8("{\"alg\":\"ES256\",\"kid\":\"k1\",\"typ\":\"JWT\"}"))
        #expect(try JWS.verify(token, expectedAlgorithm: .es256, key: key.publicKey) == payload)
        // The RFC's published public key verifies our signature too.
        #expect(try JWS.verify(token, expectedAlgorithm: .es256, key: Self.rfcECKey()) == payload)
        #expect(try JWS.verify(parts, expectedAlgorithm: .es256, key: key.publicKey) == payload)
        // Empty payload.
        let empty = try JWS.signES256(payload: [], key: key)
        #expect(try JWS.verify(empty, expectedAlgorithm: .es256, key: key.publicKey) == [])
    }

    @Test func signRefusesOtherAlgorithms() throws {
        let key = try ES256PrivateKey()
        do {
            _ = try JWS.signES256(header: JOSEHeader(alg: "none"), payload: [], key: key)
            Issue.record("signed with alg none")
        } catch {
            #expect(error.code == .algorithmMismatch)
        }
    }

    @Test("alg none is rejected")
    func algNone() throws {
        let key = try Self.rfcECKey()
        let header = Base64URL.encode(utf8("{\"alg\":\"none\"}"))
        Self.expectFailure(.algorithmMismatch) {
            try JWS.verify("\(header).\(RFC7515.encodedPayload).", expectedAlgorithm: .es256, key: key)
        }
        // ... even with the signature of a valid token glued on.
        let signature = RFC7515.es256Token.split(separator: ".")[2]
        Self.expectFailure(.algorithmMismatch) {
            try JWS.verify("\(header).\(RFC7515.encodedPayload).\(signature)", expectedAlgorithm: .es256, key: key)
        }
        for variant in ["None", "NONE", "nOnE", "ES256 "] {
            let header = Base64URL.encode(utf8("{\"alg\":\"\(variant)\"}"))
            Self.expectFailure(.algorithmMismatch) {
                try JWS.verify("\(header).\(RFC7515.encodedPayload).\(signature)", expectedAlgorithm: .es256, key: key)
            }
        }
    }

    @Test("HS256 tokens are rejected when ES256 is expected, including ones MACed with the public key")
    func hs256Confusion() throws {
        let key = try Self.rfcECKey()
        Self.expectFailure(.algorithmMismatch) {
            try JWS.verify(RFC7515.hs256Token, expectedAlgorithm: .es256, key: key)
        }
        // The classic attack: HMAC the token with the verifier's public key as the secret.
        for secret in [key.x963Representation, utf8(RFC7515.ecX)] {
            let signingInput = "\(Base64URL.encode(utf8("{\"alg\":\"HS256\"}"))).\(RFC7515.encodedPayload)"
            let mac = HMACSHA256.authenticationCode(for: utf8(signingInput), key: secret)
            Self.expectFailure(.algorithmMismatch) {
                try JWS.verify("\(signingInput).\(Base64URL.encode(mac))", expectedAlgorithm: .es256, key: key)
            }
        }
    }

    @Test("a key of another algorithm cannot stand in for the expected one")
    func keyAlgorithmMismatch() throws {
        Self.expectFailure(.algorithmMismatch) {
            try JWS.verify(RFC7515.es256Token, expectedAlgorithm: .es256, key: Self.rfcRSAKey())
        }
        Self.expectFailure(.algorithmMismatch) {
            try JWS.verify(RFC7515.es256Token, expectedAlgorithm: .rs256, key: Self.rfcRSAKey())
        }
        Self.expectFailure(.algorithmMismatch) {
            try JWS.verify(RFC7515.rs256Token, expectedAlgorithm: .es256, key: Self.rfcECKey())
        }
    }

    @Test func tamperedTokensAreRejected() throws {
        let key = try Self.rfcECKey()
        let parts = RFC7515.es256Token.split(separator: ".").map(String.init)
        // Payload changed ("joe" -> "job").
        var payload = RFC7515.payload
        payload[9] = UInt8(ascii: "b")
        Self.expectFailure(.invalidSignature) {
            try JWS.verify("\(parts[0]).\(Base64URL.encode(payload)).\(parts[2])", expectedAlgorithm: .es256, key: key)
        }
        // Header changed but still ES256 (extra member).
        let header = Base64URL.encode(utf8("{\"alg\":\"ES256\",\"kid\":\"x\"}"))
        Self.expectFailure(.invalidSignature) {
            try JWS.verify("\(header).\(parts[1]).\(parts[2])", expectedAlgorithm: .es256, key: key)
        }
        // Signature bit flipped, truncated, extended.
        let signature = Base64URL.decode(parts[2])!
        for bad in [flippingBit(signature, at: 10), Array(signature.dropLast()), signature + [0], []] {
            Self.expectFailure(.invalidSignature) {
                try JWS.verify("\(parts[0]).\(parts[1]).\(Base64URL.encode(bad))", expectedAlgorithm: .es256, key: key)
            }
        }
    }

    @Test func wrongKeyIsRejected() throws {
        let other = try ES256PrivateKey().publicKey
        Self.expectFailure(.invalidSignature) {
            try JWS.verify(RFC7515.es256Token, expectedAlgorithm: .es256, key: other)
        }
    }

    @Test(arguments: [
        "",
        ".",
        "..",
        "a.b",
        "eyJhbGciOiJFUzI1NiJ9.e30",  // two segments
        "eyJhbGciOiJFUzI1NiJ9.e30.AAAA.AAAA",  // four segments (JWE has five)
        "eyJhbGciOiJFUzI1NiJ9.e30.AAAA.",
        ".e30.AAAA",  // empty header
        "eyJhbGciOiJFUzI1NiJ9=.e30.AAAA",  // padding
        "eyJhbGciOiJFUzI1NiJ9.e30=.AAAA",
        "eyJhbGciOiJFUzI1NiJ9.e30.AAAA=",
        "eyJhbGciOiJFUzI1NiJ9.e3+.AAAA",  // standard alphabet
        "eyJhbGciOiJFUzI1NiJ9 .e30.AAAA",  // whitespace
        "eyJhbGciOiJFUzI1NiJ9.e30.A",  // 4k+1 characters
    ])
    func malformedTokens(_ token: String) throws {
        let key = try Self.rfcECKey()
        Self.expectFailure(.malformedToken) {
            try JWS.verify(token, expectedAlgorithm: .es256, key: key)
        }
        #expect(throws: CryptoError.self) { try JWS.parse(token) }
    }

    @Test("extra segment after a valid token is rejected")
    func extraSegment() throws {
        let key = try Self.rfcECKey()
        Self.expectFailure(.malformedToken) {
            try JWS.verify(RFC7515.es256Token + ".", expectedAlgorithm: .es256, key: key)
        }
        Self.expectFailure(.malformedToken) {
            try JWS.verify(RFC7515.es256Token + ".e30", expectedAlgorithm: .es256, key: key)
        }
    }

    @Test(arguments: [
        "[\"ES256\"]",
        "\"ES256\"",
        "42",
        "null",
        "{}",
        "{\"alg\":256}",
        "{\"alg\":null}",
        "{\"alg\":\"ES256\"",
        "{\"alg\":\"ES256\",\"crit\":[\"exp\"],\"exp\":1}",
        "not json",
        "{\"alg\":\"ES256\",\"alg\":\"none\"}",  // duplicate member (RFC 7515 §4)
        "{\"alg\":\"none\",\"alg\":\"ES256\"}",
        "{\"alg\":\"ES256\",\"al\\u0067\":\"ES256\"}",
        "{\"alg\":\"ES256\"} x",
        "\u{FEFF}{\"alg\":\"ES256\"}",
        "{\"alg\":\"ES256\",}",  // a trailing comma
        "{\"alg\":\"ES256\",\"kid\":5}",
        "{\"alg\":\"ES256\",\"typ\":[\"JWT\"]}",
        "{\"alg\":\"ES256\",\"crit\":[\"exp\",1]}",
        "{\"alg\":\"ES256\",\"jwk\":{\"x\":1,\"x\":2}}",  // a repeated member below the top too
        "{\"alg\":\"ES256\",\"x\":" + String(repeating: "[", count: 20) + String(repeating: "]", count: 20) + "}",
    ])
    func headerMustBeAJSONObjectWithAlg(_ json: String) throws {
        let key = try Self.rfcECKey()
        let signature = RFC7515.es256Token.split(separator: ".")[2]
        let token = "\(Base64URL.encode(utf8(json))).\(RFC7515.encodedPayload).\(signature)"
        Self.expectFailure(.malformedToken) {
            try JWS.verify(token, expectedAlgorithm: .es256, key: key)
        }
    }

    @Test func headerReadsOptionalMembersAndIgnoresOthers() throws {
        let header = #"{"alg":"ES256","kid":null,"typ":"at+jwt","x5u":"https://example.com/k","n":[1,{"a":2}]}"#
        let token = "\(Base64URL.encode(utf8(header))).\(RFC7515.encodedPayload).AAAA"
        let parts = try JWS.parse(token)
        #expect(parts.header == JOSEHeader(alg: "ES256", typ: "at+jwt"))
        let invalidUTF8: [UInt8] = [0x7B, 0x22, 0x61, 0x6C, 0x67, 0x22, 0x3A, 0x22, 0xFF, 0x22, 0x7D]
        #expect(throws: CryptoError.self) {
            try JWS.parse("\(Base64URL.encode(invalidUTF8)).\(RFC7515.encodedPayload).AAAA")
        }
    }

    @Test func oversizedTokensAreRejectedBeforeDecoding() throws {
        let key = try Self.rfcECKey()
        let token = "eyJhbGciOiJFUzI1NiJ9.\(String(repeating: "A", count: JWS.maximumTokenLength)).AAAA"
        Self.expectFailure(.malformedToken) {
            try JWS.verify(token, expectedAlgorithm: .es256, key: key)
        }
    }
}
