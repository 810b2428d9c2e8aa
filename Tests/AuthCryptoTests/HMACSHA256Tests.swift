import Testing

@testable import AuthCrypto

/// RFC 4231 §4 test vectors for HMAC-SHA-256.
struct HMACVector: Sendable, CustomTestStringConvertible {
    var name: String
    var key: [UInt8]
    var data: [UInt8]
    /// The expected MAC; shorter than 32 bytes when the RFC truncates it (test case 5).
    var mac: String

    var testDescription: String { self.name }

    static let rfc4231: [HMACVector] = [
        HMACVector(
            name: "RFC 4231 §4.2 test case 1",
            key: [UInt8](repeating: 0x0b, count: 20),
            data: utf8("Hi There"),
            mac: "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"
        ),
        HMACVector(
            name: "RFC 4231 §4.3 test case 2 (key shorter than the length of the hash output)",
            key: utf8("Jefe"),
            data: utf8("what do ya want for nothing?"),
            mac: "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        ),
        HMACVector(
            name: "RFC 4231 §4.4 test case 3 (combined length of key and data larger than 64 bytes)",
            key: [UInt8](repeating: 0xaa, count: 20),
            data: [UInt8](repeating: 0xdd, count: 50),
            mac: "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe"
        ),
        HMACVector(
            name: "RFC 4231 §4.5 test case 4",
            key: hex("0102030405060708090a0b0c0d0e0f10111213141516171819"),
            data: [UInt8](repeating: 0xcd, count: 50),
            mac: "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b"
        ),
        HMACVector(
            name: "RFC 4231 §4.6 test case 5 (truncation to 128 bits)",
            key: [UInt8](repeating: 0x0c, count: 20),
            data: utf8("Test With Truncation"),
            mac: "a3b6167473100ee06e0c796c2955552b"
        ),
        HMACVector(
            name: "RFC 4231 §4.7 test case 6 (131-byte key, hashed first)",
            key: [UInt8](repeating: 0xaa, count: 131),
            data: utf8("Test Using Larger Than Block-Size Key - Hash Key First"),
            mac: "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"
        ),
        HMACVector(
            name: "RFC 4231 §4.8 test case 7 (131-byte key and data larger than a block)",
            key: [UInt8](repeating: 0xaa, count: 131),
            data: utf8(
                "This is a test using a larger than block-size key and a larger than block-size data. The key needs to be hashed before being used by the HMAC algorithm."
            ),
            mac: "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2"
        ),
    ]
}

@Suite struct HMACSHA256Tests {
    @Test(arguments: HMACVector.rfc4231)
    func rfc4231(_ vector: HMACVector) {
        let expected = hex(vector.mac)
        let keyed = HMACSHA256(key: vector.key).authenticationCode(for: vector.data)
        let oneShot = HMACSHA256.authenticationCode(for: vector.data, key: vector.key)
        #expect(keyed.count == 32)
        #expect(Array(keyed.prefix(expected.count)) == expected)
        #expect(oneShot == keyed)
    }

    @Test func sameKeyManyMessages() {
        let mac = HMACSHA256(key: utf8("Jefe"))
        for _ in 0..<3 {
            #expect(
                hexString(mac.authenticationCode(for: "what do ya want for nothing?"))
                    == "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
            )
        }
        // A different message in between must not disturb the template.
        #expect(mac.authenticationCode(for: [1, 2, 3]) != mac.authenticationCode(for: [1, 2, 4]))
    }

    @Test("reused contexts give the same MACs as fresh ones")
    func reuseMatchesOneShot() {
        // OpenSSL 3.0.3+ restarts HMAC on EVP_MAC_init with a null key, so contexts are pooled.
        #expect(HMACSHA256.reinitializationKeepsKey)
        let key = SecureRandom.bytes(count: 32)
        let mac = HMACSHA256(key: key)
        for length in [0, 1, 55, 56, 63, 64, 65, 200, 0, 3] {
            let message = SecureRandom.bytes(count: length)
            #expect(mac.authenticationCode(for: message) == HMACSHA256.authenticationCode(for: message, key: key))
        }
    }

    @Test func emptyKeyAndMessage() {
        // HMAC-SHA256(key: "", message: ""), as Python's hmac module computes it (a null key pointer
        // would make OpenSSL reuse a previous key instead: this checks AuthCrypto never passes one).
        #expect(
            hexString(HMACSHA256(key: []).authenticationCode(for: [UInt8]()))
                == "b613679a0814d9ec772f95d778c35fc5ff1697c493715653c6c712144292c5ad"
        )
    }

    @Test func isValid() {
        let mac = HMACSHA256(key: [UInt8](repeating: 0x0b, count: 20))
        let message = utf8("Hi There")
        let code = mac.authenticationCode(for: message)
        #expect(mac.isValid(code, for: message))
        #expect(!mac.isValid(flippingBit(code, at: 31), for: message))
        #expect(!mac.isValid(Array(code.prefix(16)), for: message), "truncated MACs are refused")
        #expect(!mac.isValid(code + [0], for: message))
        #expect(!mac.isValid([], for: message))
        #expect(!mac.isValid(code, for: utf8("Hi there")))
    }

    @Test func concurrentUseOfOneInstance() async {
        let mac = HMACSHA256(key: SecureRandom.bytes(count: 32))
        let messages = (0..<64).map { [UInt8]("message \($0)".utf8) }
        let expected = messages.map { mac.authenticationCode(for: $0) }
        await withTaskGroup(of: Bool.self) { group in
            for worker in 0..<8 {
                group.addTask {
                    var allMatch = true
                    for round in 0..<500 {
                        let index = (worker * 7 + round) % messages.count
                        allMatch = allMatch && mac.authenticationCode(for: messages[index]) == expected[index]
                    }
                    return allMatch
                }
            }
            for await result in group {
                #expect(result)
            }
        }
    }
}
