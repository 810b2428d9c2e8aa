import AuthCrypto
import Testing

@Suite struct SHA256Tests {
    // FIPS 180-2 Appendix B / NIST CSRC "SHA256.pdf" example values.
    @Test("NIST one-block message \"abc\"")
    func abc() {
        #expect(
            hexString(SHA256.hash(utf8("abc"))) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        )
    }

    @Test("empty message")
    func empty() {
        #expect(hexString(SHA256.hash([UInt8]())) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
    }

    @Test("NIST two-block 448-bit message")
    func twoBlock() {
        let message = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"
        #expect(
            hexString(SHA256.hash(utf8(message))) == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"
        )
    }

    @Test("NIST long message: one million 'a'")
    func millionA() {
        let message = [UInt8](repeating: UInt8(ascii: "a"), count: 1_000_000)
        #expect(hexString(SHA256.hash(message)) == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
    }

    @Test("String and non-contiguous collections hash like their bytes")
    func overloads() {
        let expected = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        #expect(hexString(SHA256.hash("abc")) == expected)
        #expect(hexString(SHA256.hash(utf8("abc").lazy.map { $0 })) == expected)
        #expect(hexString(SHA256.hash(utf8("xabcx")[1..<4])) == expected)
    }
}
