import AuthText
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The one rule for phone numbers and email addresses (gateway, identity, otp-dispatch).
@Suite struct ContactsTests {
    @Test func phoneNumbersAreE164() {
        for (text, e164) in [
            ("+14155550123", "+14155550123"), ("+447911123456", "+447911123456"), ("+919876543210", "+919876543210"),
            ("+61412345678", "+61412345678"), ("+12345678", "+12345678"),
        ] {
            #expect(PhoneNumber(text)?.e164 == e164, "\(text)")
        }
        for invalid in [
            "", "14155550123", "+0123456789", "+1234567", "+1234567890123456", "+1415555012a", "++14155550123",
            "+", "+ ", "+１4155550123",
            // One spelling per number: otp-dispatch's copy ignored separators and white space (issue 20).
            "+91 (987) 65-43.210", " +14155550123", "+14155550123\n", "+1 415 555 0123",
            // +91: ten national digits, the first 6-9 (seed 002 §2.3). otp-dispatch's copy of the rule
            // accepted +911234567890 where identity refused it (issue 20).
            "+915876543210", "+91987654321", "+9198765432101", "+911234567890",
        ] {
            #expect(PhoneNumber(invalid) == nil, "\(invalid)")
        }
    }

    @Test func phoneNumbersKnowTheirCallingCodeAndMask() throws {
        let indian = try #require(PhoneNumber("+919999999999"))
        #expect(indian.callingCode == "91")
        #expect(indian.masked == "+91******9999")
        #expect(PhoneNumber("+15550100001")?.callingCode == "1")
        #expect(PhoneNumber("+15550100001")?.masked == "+1******0001")
        #expect(PhoneNumber("+2348000000001")?.callingCode == "234")
        #expect(PhoneNumber("+447700900123")?.callingCode == "44")
        #expect(PhoneNumber(stored: "+919999999999") == indian)
    }

    @Test func emailsFollowTheSeedRegexWithinWhatMailCarries() {
        for (text, normalized) in [
            ("a@b.co", "a@b.co"), ("first.last+tag@example.com", "first.last+tag@example.com"),
            ("x_y%z-1@sub.domain.org", "x_y%z-1@sub.domain.org"), ("A@EXAMPLE.COM", "a@example.com"),
        ] {
            #expect(EmailAddress(text)?.normalized == normalized, "\(text)")
        }
        for invalid in [
            "", "plain", "@example.com", "a@", "a@b", "a@b.c", "a@b.c1", "a b@example.com", "a@exa mple.com",
            "a@@example.com", "ä@example.com", "a@example.co.m", " a@example.com", "a@example.com ",
            // otp-dispatch's copy accepted these printable characters, which the apps' rule refuses (issue 20).
            "a!b@example.com", "a#b@example.com", "a'b@example.com",
            // identity's copy accepted these, which no mail system delivers.
            ".a@example.com", "a.@example.com", "a..b@example.com", "a@-example.com", "a@example-.com",
            "a@example..com", "a@" + String(repeating: "x", count: 64) + ".com",
            String(repeating: "a", count: 65) + "@example.com",
        ] {
            #expect(EmailAddress(invalid) == nil, "\(invalid)")
        }
    }

    @Test func emailsHaveAtMost254Bytes() {
        let domain =
            "@" + String(repeating: "d", count: 60) + "." + String(repeating: "e", count: 60) + "."
            + String(repeating: "f", count: 60) + ".com"  // 1 + 60 + 1 + 60 + 1 + 60 + 4 = 187 bytes
        let local = String(repeating: "a", count: 64)
        #expect(EmailAddress(local + String(domain.dropLast(4)) + ".co") != nil)  // 250
        let at254 =
            local + "@" + String(repeating: "d", count: 60) + "." + String(repeating: "e", count: 60) + "."
            + String(repeating: "f", count: 60) + "." + "ghijkl"
        #expect(at254.utf8.count == 254)
        #expect(EmailAddress(at254) != nil)
        #expect(EmailAddress(at254 + "n") == nil)
        #expect(EmailAddress("a@example.com")?.masked == "a***@example.com")
    }

    @Test func ipAddresses() {
        for address in ["127.0.0.1", "::1", "2001:db8::1", "::ffff:10.0.0.1"] {
            #expect(IPAddress.isAddress(address), "\(address)")
        }
        for text in ["", "localhost", "1.2.3", "1.2.3.4.5", "256.1.1.1", "fe80::1%eth0", ":::", "1.2.3.4 "] {
            #expect(!IPAddress.isAddress(text), "\(text)")
        }
    }
}

/// The one locale rule: the gateway's copy accepted any run of letters, digits and dashes
/// (`en--IN`, `-`, a 9-letter subtag), which otp-dispatch then refused (issue 20).
@Suite struct LanguageTagTests {
    @Test func subtagsOfOneToEightLettersOrDigits() {
        for valid in ["en", "en-IN", "hi-IN", "zh-Hant-TW", "es-419", "x-abcdefgh"] {
            #expect(LanguageTag.isValid(valid), "\(valid)")
        }
        for invalid in [
            "", "en_IN", "en--IN", "-", "en-", "-en", "abcdefghi", "en IN", "ένα",
            String(repeating: "a-", count: 17) + "ab",
        ] {
            #expect(!LanguageTag.isValid(invalid), "\(invalid)")
        }
    }
}

/// `IPAddress` reads what glibc's `inet_pton` reads (a zone aside), and prints what
/// `inet_ntop` prints (RFC 5952), on hand-picked and on random text.
@Suite struct IPAddressAgainstLibcTests {
    /// The address `inet_pton` reads from `text` (IPv4-mapped IPv6 as IPv4), or nil.
    static func libcBytes(_ text: String) -> [UInt8]? {
        var v4 = in_addr()
        if inet_pton(AF_INET, text, &v4) == 1 {
            return withUnsafeBytes(of: &v4) { Array($0) }
        }
        var v6 = in6_addr()
        guard inet_pton(AF_INET6, text, &v6) == 1 else { return nil }
        let bytes = withUnsafeBytes(of: &v6) { Array($0) }
        if bytes.prefix(10).allSatisfy({ $0 == 0 }), bytes[10] == 0xFF, bytes[11] == 0xFF {
            return Array(bytes.suffix(4))
        }
        return bytes
    }

    /// What `inet_ntop` prints for `bytes`.
    static func libcText(_ bytes: [UInt8]) -> String {
        var buffer = [CChar](repeating: 0, count: 64)
        let family = bytes.count == 4 ? AF_INET : AF_INET6
        let printed = bytes.withUnsafeBytes { inet_ntop(family, $0.baseAddress, &buffer, 64) }
        return printed.map { String(cString: $0) } ?? "?"
    }

    @Test func handPickedTextIsReadAsLibcReadsIt() {
        let texts = [
            "0.0.0.0", "255.255.255.255", "1.2.3.4", "01.2.3.4", "1.2.3.04", "1.2.3.256", "1.2.3", "1.2.3.4.5",
            "1..2.3", ".1.2.3", "1.2.3.", "1.2.3.4 ", " 1.2.3.4", "1.2.3.4:80", "::", "::1", "1::", ":", ":::",
            "1:::2", "1::2::3", "1:2:3:4:5:6:7:8", "1:2:3:4:5:6:7:8:9", "1:2:3:4:5:6:7::", "::2:3:4:5:6:7:8",
            "1:2:3:4:5:6:7:8::", "::1:2:3:4:5:6:7:8", "1::2:3:4:5:6:7", ":1::", "1:", "1::2:", "12345::",
            "abcd:EF01::", "g::1", "::ffff:1.2.3.4", "::ffff:01.2.3.4", "::1.2.3.4", "1.2.3.4::",
            "1:2:3:4:5:6:1.2.3.4", "1:2:3:4:5:6:7:1.2.3.4", "::1.2.3.4:5", "::ffff:1.2.3", "2001:db8::8:800:200C:417A",
            "0:0:0:0:0:0:0:0", "fe80:0000:0000:0000:0000:0000:0000:0001", "::0:0:1", "1.2.3.4/8", "", "٣.1.1.1",
            "１::", "::ａ",
        ]
        for text in texts {
            #expect(IPAddress(text)?.bytes == Self.libcBytes(text), "\(text)")
        }
    }

    @Test func randomTextIsReadAsLibcReadsIt() {
        var generator = SystemRandomNumberGenerator()
        // Pieces of addresses and of near-misses, so that many texts are addresses.
        let pieces = [
            "0", "1", "9", "01", "255", "256", "ff", "FFFF", "abcd", "12345", "g", ":", ":", ":", "::", ".", ".", ".",
            "",
        ]
        var addresses = 0
        for _ in 0..<100_000 {
            let count = Int(generator.next() % 16)
            let text = (0..<count).map { _ in pieces[Int(generator.next() % UInt64(pieces.count))] }.joined()
            let ours = IPAddress(text)?.bytes
            #expect(ours == Self.libcBytes(text), "\(text)")
            if ours != nil { addresses += 1 }
        }
        // The random texts must not all be refusals, or the comparison would prove little.
        #expect(addresses > 1_000, "only \(addresses) addresses among the random texts")
    }

    @Test func everyAddressPrintsAsLibcPrintsIt() {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<20_000 {
            // Few distinct groups, so runs of zero groups of every length occur.
            var bytes: [UInt8] = []
            for _ in 0..<8 {
                let group: UInt16 = [0, 0, 0, 1, 0xFFFF, 0xABC, UInt16(truncatingIfNeeded: generator.next())][
                    Int(generator.next() % 7)
                ]
                bytes += [UInt8(group >> 8), UInt8(group & 0xFF)]
            }
            guard let address = IPAddress(Self.libcText(bytes)) else {
                Issue.record("inet_ntop's \(Self.libcText(bytes)) not read")
                continue
            }
            // glibc prints an "IPv4-compatible" address (96 zero bits first, deprecated by RFC
            // 4291) in dotted form; RFC 5952 §5 keeps that for IPv4-mapped ones, which read as IPv4.
            if address.bytes.count == 16, address.bytes.prefix(12).allSatisfy({ $0 == 0 }) {
                #expect(address.description.hasPrefix("::"))
            } else {
                #expect(address.description == Self.libcText(address.bytes), "\(bytes)")
            }
            let v4 = (0..<4).map { _ in UInt8(truncatingIfNeeded: generator.next()) }
            #expect(IPAddress(Self.libcText(v4))?.description == Self.libcText(v4))
        }
    }
}
