import AuthCrypto
import Testing

/// HMAC-SHA-1 against RFC 2202's test cases (it only verifies what Twilio signs).
@Suite struct HMACSHA1Tests {
    @Test func rfc2202() {
        let cases: [(key: [UInt8], data: [UInt8], mac: String)] = [
            ([UInt8](repeating: 0x0b, count: 20), utf8("Hi There"), "b617318655057264e28bc0b6fb378c8ef146be00"),
            (utf8("Jefe"), utf8("what do ya want for nothing?"), "effcdf6ae5eb2fa2d27416d5f184df9c259a7c79"),
            (
                [UInt8](repeating: 0xaa, count: 20), [UInt8](repeating: 0xdd, count: 50),
                "125d7342b9ac11cd91a39af48aa17b4f63f175d3"
            ),
            // A key longer than the block size is hashed first.
            (
                [UInt8](repeating: 0xaa, count: 80), utf8("Test Using Larger Than Block-Size Key - Hash Key First"),
                "aa4ae5e15272d00e95705637ce8a3b55ed402112"
            ),
        ]
        for (key, data, mac) in cases {
            let computed = HMACSHA1.authenticationCode(for: data, key: key)
            #expect(computed.count == HMACSHA1.byteCount)
            #expect(computed == hex(mac))
        }
    }
}
