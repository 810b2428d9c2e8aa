/// An IPv4 or IPv6 address as bytes (4 or 16). IPv4-mapped IPv6 addresses (`::ffff:a.b.c.d`)
/// are read as the IPv4 address, so one client has one key whichever way the kernel reports it.
public struct IPAddress: Hashable, Sendable, CustomStringConvertible {
    public let bytes: [UInt8]

    /// What a per-client limit counts this address under: an IPv4 address itself; for IPv6 its
    /// /64 (`2001:db8:1:2::/64`), the smallest block one subscriber is given (RFC 6177), so a
    /// client that rotates addresses inside its /64 is still one client (issue 19, item 2).
    public var rateLimitKey: String {
        guard bytes.count == 16 else { return description }
        return IPAddress(bytes: Array(bytes.prefix(8)) + Array(repeating: 0, count: 8)).description + "/64"
    }

    /// The rate-limit key of `text` when it is an address; `text` itself otherwise.
    public static func rateLimitKey(of text: String) -> String {
        IPAddress(text)?.rateLimitKey ?? text
    }

    private init(bytes: [UInt8]) {
        self.bytes = bytes
    }

    /// Reads an IPv4 address in dotted decimal (four parts of 1–3 digits, no leading zero) or an
    /// IPv6 address in RFC 4291 text form (one `::` at most, an IPv4 address as its last 32 bits
    /// allowed, a zone after `%` ignored), as `inet_pton` does; anything else is nil. One pass
    /// over the UTF-8 bytes, without intermediate strings.
    public init?(_ text: some StringProtocol) {
        let parsed =
            text.utf8.withContiguousStorageIfAvailable { Self.parse($0) }
            ?? Array(text.utf8).withUnsafeBufferPointer { Self.parse($0) }
        guard let parsed else { return nil }
        bytes = parsed
    }

    private static func parse(_ utf8: UnsafeBufferPointer<UInt8>) -> [UInt8]? {
        if let v4 = parseIPv4(utf8[...]) {
            return [UInt8(v4 >> 24), UInt8(v4 >> 16 & 0xFF), UInt8(v4 >> 8 & 0xFF), UInt8(v4 & 0xFF)]
        }
        guard utf8.count <= 45, utf8.contains(UInt8(ascii: ":")) else { return nil }
        // A zone (`fe80::1%eth0`) is not part of the address.
        let end = utf8.firstIndex(of: UInt8(ascii: "%")) ?? utf8.count
        guard let v6 = parseIPv6(utf8[..<end]) else { return nil }
        if v6.prefix(10).allSatisfy({ $0 == 0 }), v6[10] == 0xFF, v6[11] == 0xFF {
            return Array(v6.suffix(4))
        }
        return v6
    }

    public var description: String {
        if bytes.count == 4 {
            return String(unsafeUninitializedCapacity: 15) { out in
                var count = 0
                for (index, byte) in bytes.enumerated() {
                    if index > 0 {
                        out[count] = UInt8(ascii: ".")
                        count += 1
                    }
                    count += Self.writeDecimal(byte, into: out, at: count)
                }
                return count
            }
        }
        var groups: [UInt16] = []
        groups.reserveCapacity(8)
        for index in stride(from: 0, to: 16, by: 2) {
            groups.append(UInt16(bytes[index]) << 8 | UInt16(bytes[index + 1]))
        }
        // RFC 5952: the longest run (≥ 2, the first of equals) of zero groups becomes "::".
        var best = (start: -1, length: 0)
        var index = 0
        while index < 8 {
            guard groups[index] == 0 else {
                index += 1
                continue
            }
            var end = index
            while end < 8, groups[end] == 0 { end += 1 }
            if end - index > best.length { best = (index, end - index) }
            index = end
        }
        if best.length < 2 { best = (-1, 0) }
        return String(unsafeUninitializedCapacity: 39) { out in
            var count = 0
            var index = 0
            while index < 8 {
                if index == best.start {
                    out[count] = UInt8(ascii: ":")
                    out[count + 1] = UInt8(ascii: ":")
                    count += 2
                    index += best.length
                    continue
                }
                if index > 0, index != best.start + best.length || best.start < 0 {
                    out[count] = UInt8(ascii: ":")
                    count += 1
                }
                count += Self.writeHex(groups[index], into: out, at: count)
                index += 1
            }
            return count
        }
    }

    private static func writeDecimal(_ value: UInt8, into out: UnsafeMutableBufferPointer<UInt8>, at start: Int) -> Int
    {
        var count = 0
        if value >= 100 {
            out[start + count] = UInt8(ascii: "0") + value / 100
            count += 1
        }
        if value >= 10 {
            out[start + count] = UInt8(ascii: "0") + value / 10 % 10
            count += 1
        }
        out[start + count] = UInt8(ascii: "0") + value % 10
        return count + 1
    }

    private static func writeHex(_ value: UInt16, into out: UnsafeMutableBufferPointer<UInt8>, at start: Int) -> Int {
        var shift = 12
        while shift > 0, value >> UInt16(shift) == 0 { shift -= 4 }
        var count = 0
        while shift >= 0 {
            let digit = UInt8(value >> UInt16(shift) & 0xF)
            out[start + count] = digit < 10 ? UInt8(ascii: "0") + digit : UInt8(ascii: "a") + digit - 10
            count += 1
            shift -= 4
        }
        return count
    }

    /// Four parts of 1–3 ASCII digits, no leading zero, each at most 255; the address as a
    /// 32-bit number.
    static func parseIPv4(_ utf8: Slice<UnsafeBufferPointer<UInt8>>) -> UInt32? {
        var address: UInt32 = 0
        var parts = 0
        var value: UInt32 = 0
        var digits = 0
        var leadingZero = false
        for byte in utf8 {
            if byte == UInt8(ascii: ".") {
                guard digits > 0, parts < 3 else { return nil }
                address = address << 8 | value
                parts += 1
                value = 0
                digits = 0
                continue
            }
            guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9"), digits < 3, !(digits == 1 && leadingZero)
            else { return nil }
            if digits == 0 { leadingZero = byte == UInt8(ascii: "0") }
            value = value * 10 + UInt32(byte - UInt8(ascii: "0"))
            guard value <= 255 else { return nil }
            digits += 1
        }
        guard digits > 0, parts == 3 else { return nil }
        return address << 8 | value
    }

    /// RFC 4291 §2.2 text form, as glibc's `inet_pton6` reads it: groups of 1–4 hex digits, one
    /// `::` at most, an IPv4 address allowed as the last 32 bits.
    static func parseIPv6(_ utf8: Slice<UnsafeBufferPointer<UInt8>>) -> [UInt8]? {
        var out = [UInt8](repeating: 0, count: 16)
        var written = 0
        var gap = -1
        var index = utf8.startIndex
        let end = utf8.endIndex
        guard index < end else { return nil }
        if utf8[index] == UInt8(ascii: ":") {
            guard index + 1 < end, utf8[index + 1] == UInt8(ascii: ":") else { return nil }
            index += 1
        }
        var tokenStart = index
        var value: UInt16 = 0
        var digits = 0
        while index < end {
            let byte = utf8[index]
            index += 1
            if let digit = hexValue(byte) {
                guard digits < 4 else { return nil }
                value = value << 4 | UInt16(digit)
                digits += 1
                continue
            }
            if byte == UInt8(ascii: ":") {
                tokenStart = index
                if digits == 0 {
                    guard gap < 0 else { return nil }
                    gap = written
                    continue
                }
                guard index < end, written + 2 <= 16 else { return nil }
                out[written] = UInt8(value >> 8)
                out[written + 1] = UInt8(value & 0xFF)
                written += 2
                value = 0
                digits = 0
                continue
            }
            guard byte == UInt8(ascii: "."), written + 4 <= 16, let v4 = parseIPv4(utf8[tokenStart..<end]) else {
                return nil
            }
            out[written] = UInt8(v4 >> 24)
            out[written + 1] = UInt8(v4 >> 16 & 0xFF)
            out[written + 2] = UInt8(v4 >> 8 & 0xFF)
            out[written + 3] = UInt8(v4 & 0xFF)
            written += 4
            digits = 0
            index = end
        }
        if digits > 0 {
            guard written + 2 <= 16 else { return nil }
            out[written] = UInt8(value >> 8)
            out[written + 1] = UInt8(value & 0xFF)
            written += 2
        }
        if gap >= 0 {
            guard written < 16 else { return nil }
            let moved = written - gap
            for offset in stride(from: moved - 1, through: 0, by: -1) {
                out[16 - moved + offset] = out[gap + offset]
                out[gap + offset] = 0
            }
            written = 16
        }
        return written == 16 ? out : nil
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}

/// An address or a CIDR range (`10.0.0.0/8`, `fd00::/8`, `192.0.2.7`).
public struct IPAddressRange: Hashable, Sendable, CustomStringConvertible {
    public let network: IPAddress
    public let prefixLength: Int

    public init?(_ text: String) {
        let parts = text.split(separator: "/", omittingEmptySubsequences: false)
        guard (1...2).contains(parts.count), let address = IPAddress(parts[0]) else { return nil }
        let bits = address.bytes.count * 8
        if parts.count == 2 {
            guard parts[1].allSatisfy(\.isASCIIDigit), let length = Int(parts[1]), (0...bits).contains(length) else {
                return nil
            }
            prefixLength = length
        } else {
            prefixLength = bits
        }
        network = address
    }

    public func contains(_ address: IPAddress) -> Bool {
        guard address.bytes.count == network.bytes.count else { return false }
        var remaining = prefixLength
        for (lhs, rhs) in zip(address.bytes, network.bytes) where remaining > 0 {
            let mask: UInt8 = remaining >= 8 ? 0xFF : ~(0xFF >> UInt8(remaining))
            if lhs & mask != rhs & mask { return false }
            remaining -= 8
        }
        return true
    }

    public var description: String { "\(network)/\(prefixLength)" }
}

extension Character {
    fileprivate var isASCIIDigit: Bool { isASCII && isNumber }
}
extension IPAddress {
    /// Whether `text` is an IPv4 or IPv6 address (the one test of the services' `client_ip`
    /// fields): at most 45 bytes, the longest text form, and no zone (`%eth0`, which names an
    /// interface of the machine that saw it and means nothing to another).
    public static func isAddress(_ text: some StringProtocol) -> Bool {
        text.utf8.count <= 45 && !text.contains("%") && IPAddress(text) != nil
    }
}
