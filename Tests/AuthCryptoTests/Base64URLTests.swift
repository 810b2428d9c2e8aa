import AuthCrypto
import Testing

@Suite struct Base64URLTests {
    // RFC 4648 §10 test vectors (standard alphabet, padded).
    static let rfc4648: [(String, String)] = [
        ("", ""), ("f", "Zg=="), ("fo", "Zm8="), ("foo", "Zm9v"),
        ("foob", "Zm9vYg=="), ("fooba", "Zm9vYmE="), ("foobar", "Zm9vYmFy"),
    ]

    @Test func rfc4648Standard() {
        for (plain, encoded) in Self.rfc4648 {
            #expect(Base64.encode(utf8(plain)) == encoded)
            #expect(Base64.decode(encoded) == utf8(plain))
            let unpadded = String(encoded.filter { $0 != "=" })
            #expect(Base64.encode(utf8(plain), padded: false) == unpadded)
            #expect(Base64.decode(unpadded, padded: false) == utf8(plain))
            #expect(Base64URL.encode(utf8(plain)) == unpadded)
            #expect(Base64URL.decode(unpadded) == utf8(plain))
        }
    }

    @Test func urlAlphabet() {
        #expect(Base64URL.encode([0xfb, 0xff]) == "-_8")
        #expect(Base64.encode([0xfb, 0xff]) == "+/8=")
        #expect(Base64URL.decode("-_8") == [0xfb, 0xff])
        #expect(Base64URL.decode("+/8") == nil)
        #expect(Base64.decode("-_8=") == nil)
        // RFC 7515 §A.1: the JOSE header {"typ":"JWT",\r\n "alg":"HS256"}.
        #expect(
            Base64URL.encode(utf8("{\"typ\":\"JWT\",\r\n \"alg\":\"HS256\"}"))
                == "eyJ0eXAiOiJKV1QiLA0KICJhbGciOiJIUzI1NiJ9"
        )
    }

    @Test func roundTripAllLengths() {
        for length in 0..<70 {
            let bytes = SecureRandom.bytes(count: length)
            #expect(Base64URL.decode(Base64URL.encode(bytes)) == bytes)
            #expect(Base64.decode(Base64.encode(bytes)) == bytes)
            #expect(Base64.decode(Base64.encode(bytes, padded: false), padded: false) == bytes)
        }
    }

    @Test(arguments: [
        "Zg==",  // padding
        "Zg=",
        "Zm9v=",
        "Z",  // 4k+1 characters
        "Zm9vY",
        "Zh",  // non-zero unused bits (non-canonical form of "f")
        "Zm9",  // non-zero unused bits
        "Zm 9v",  // whitespace
        "Zm9v\n",
        "Zm9v.",
        "Zm+v",  // standard-alphabet characters
        "Zm/v",
        "é",
    ])
    func urlDecodeRejects(_ input: String) {
        #expect(Base64URL.decode(input) == nil)
    }

    @Test(arguments: ["Zg", "Zg=", "Zg===", "Z===", "Zm9v====", "=Zm9", "Zm=v", "Zh==", "Zm 9v", "Zm-v"])
    func paddedDecodeRejects(_ input: String) {
        #expect(Base64.decode(input) == nil)
    }

    @Test func unpaddedDecodeRejectsPadding() {
        #expect(Base64.decode("Zg==", padded: false) == nil)
        #expect(Base64.decode("Zg", padded: false) == [0x66])
    }
}
