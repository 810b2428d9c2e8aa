import AuthCrypto
import Foundation
import Testing

@Suite struct JWKTests {
    @Test("RFC 7515 §A.3 JWK decodes (private member ignored) and imports")
    func decodeRFCKey() throws {
        let jwk = try JSONDecoder().decode(JWK.self, from: Data(RFC7515.ecJWKJSON.utf8))
        #expect(jwk.kty == "EC" && jwk.crv == "P-256" && jwk.x == RFC7515.ecX && jwk.y == RFC7515.ecY)
        let key = try ES256PublicKey(jwk: jwk)
        #expect(Base64URL.encode(key.x) == RFC7515.ecX)
    }

    @Test func es256ExportAndImport() throws {
        let key = try ES256PrivateKey().publicKey
        let jwk = key.jwk(kid: "k1")
        #expect(
            jwk
                == JWK(
                    kty: "EC",
                    crv: "P-256",
                    x: Base64URL.encode(key.x),
                    y: Base64URL.encode(key.y),
                    kid: "k1",
                    alg: "ES256",
                    use: "sig"
                )
        )
        let encoded = try JSONEncoder().encode(JWKSet(keys: [jwk]))
        let decoded = try JSONDecoder().decode(JWKSet.self, from: encoded)
        #expect(decoded.keys == [jwk])
        #expect(try ES256PublicKey(jwk: decoded.keys[0]).x963Representation == key.x963Representation)
        // Absent members are omitted, not written as null.
        #expect(!String(decoding: try JSONEncoder().encode(key.jwk()), as: UTF8.self).contains("null"))
    }

    @Test func rs256ExportAndImport() throws {
        let jwk = JWK(kty: "RSA", n: RFC7515.rsaN, e: RFC7515.rsaE, kid: "2011-04-29")
        let key = try RS256PublicKey(jwk: jwk)
        #expect(key.modulusBits == 2048)
        let exported = try key.jwk(kid: "2011-04-29")
        #expect(exported.n == RFC7515.rsaN && exported.e == RFC7515.rsaE && exported.alg == "RS256")
        _ = try RS256PublicKey(jwk: exported)
    }

    static let ecJWK = JWK(kty: "EC", crv: "P-256", x: RFC7515.ecX, y: RFC7515.ecY)

    @Test func strictECImport() {
        var cases: [JWK] = []
        var jwk = Self.ecJWK
        jwk.kty = "RSA"
        cases.append(jwk)
        jwk = Self.ecJWK
        jwk.kty = nil
        cases.append(jwk)
        jwk = Self.ecJWK
        jwk.kty = "ec"
        cases.append(jwk)
        jwk = Self.ecJWK
        jwk.crv = "P-384"
        cases.append(jwk)
        jwk = Self.ecJWK
        jwk.crv = nil
        cases.append(jwk)
        jwk = Self.ecJWK
        jwk.alg = "ES384"
        cases.append(jwk)
        jwk = Self.ecJWK
        jwk.alg = "HS256"
        cases.append(jwk)
        jwk = Self.ecJWK
        jwk.alg = "none"
        cases.append(jwk)
        jwk = Self.ecJWK
        jwk.use = "enc"
        cases.append(jwk)
        jwk = Self.ecJWK
        jwk.x = nil
        cases.append(jwk)
        jwk = Self.ecJWK
        jwk.y = RFC7515.ecY + "="
        cases.append(jwk)
        jwk = Self.ecJWK
        jwk.x = Base64URL.encode([0] + Base64URL.decode(RFC7515.ecX)!)
        cases.append(jwk)
        jwk = Self.ecJWK
        jwk.n = RFC7515.rsaN
        cases.append(jwk)
        for bad in cases {
            #expect(throws: CryptoError.self, "\(bad)") { try ES256PublicKey(jwk: bad) }
        }
        var good = Self.ecJWK
        good.alg = "ES256"
        good.use = "sig"
        #expect(throws: Never.self) { try ES256PublicKey(jwk: good) }
    }

    @Test func strictRSAImport() {
        let base = JWK(kty: "RSA", n: RFC7515.rsaN, e: RFC7515.rsaE)
        var cases: [JWK] = []
        var jwk = base
        jwk.kty = "EC"
        cases.append(jwk)
        jwk = base
        jwk.alg = "RS512"
        cases.append(jwk)
        jwk = base
        jwk.alg = "PS256"
        cases.append(jwk)
        jwk = base
        jwk.use = "enc"
        cases.append(jwk)
        jwk = base
        jwk.crv = "P-256"
        cases.append(jwk)
        jwk = base
        jwk.e = nil
        cases.append(jwk)
        jwk = base
        jwk.n = "!!"
        cases.append(jwk)
        jwk = base
        jwk.n = Base64URL.encode(Array(Base64URL.decode(RFC7515.rsaN)!.prefix(128)))
        cases.append(jwk)
        for bad in cases {
            #expect(throws: CryptoError.self, "\(bad)") { try RS256PublicKey(jwk: bad) }
        }
    }

    @Test func jwkSetLookup() throws {
        let json = """
            {"keys":[
              {"kty":"EC","crv":"P-256","x":"\(RFC7515.ecX)","y":"\(RFC7515.ecY)","kid":"e1","alg":"ES256","use":"sig"},
              {"kty":"RSA","n":"\(RFC7515.rsaN)","e":"AQAB","kid":"r1","x5t":"ignored"}
            ]}
            """
        let set = try JSONDecoder().decode(JWKSet.self, from: Data(json.utf8))
        #expect(set.keys.count == 2)
        #expect(set.keys(withID: "r1").count == 1)
        #expect(set.keys(withID: "nope").isEmpty)
        _ = try ES256PublicKey(jwk: set.keys(withID: "e1")[0])
        _ = try RS256PublicKey(jwk: set.keys(withID: "r1")[0])
    }
}
