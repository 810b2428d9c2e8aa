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

    public init?(_ text: some StringProtocol) {
        let text = String(text)
        if let v4 = Self.parseIPv4(text) {
            bytes = v4
        } else if let v6 = Self.parseIPv6(text) {
            if v6.prefix(10).allSatisfy({ $0 == 0 }), v6[10] == 0xFF, v6[11] == 0xFF {
                bytes = Array(v6.suffix(4))
            } else {
                bytes = v6
            }
        } else {
            return nil
        }
    }

    public var description: String {
        if bytes.count == 4 { return bytes.map(String.init).joined(separator: ".") }
        var groups: [String] = []
        for index in stride(from: 0, to: 16, by: 2) {
            groups.append(String(UInt16(bytes[index]) << 8 | UInt16(bytes[index + 1]), radix: 16))
        }
        // RFC 5952: the longest run (≥ 2) of zero groups becomes "::".
        var best = (start: -1, length: 0)
        var index = 0
        while index < 8 {
            guard groups[index] == "0" else {
                index += 1
                continue
            }
            var end = index
            while end < 8, groups[end] == "0" { end += 1 }
            if end - index > best.length { best = (index, end - index) }
            index = end
        }
        guard best.length >= 2 else { return groups.joined(separator: ":") }
        let head = groups[..<best.start].joined(separator: ":")
        let tail = groups[(best.start + best.length)...].joined(separator: ":")
        return head + "::" + tail
    }

    static func parseIPv4(_ text: String) -> [UInt8]? {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 4 else { return nil }
        var bytes: [UInt8] = []
        for part in parts {
            guard (1...3).contains(part.count), part.allSatisfy(\.isASCIIDigit),
                part.count == 1 || part.first != "0", let value = UInt8(part)
            else { return nil }
            bytes.append(value)
        }
        return bytes
    }

    static func parseIPv6(_ text: String) -> [UInt8]? {
        guard text.count <= 45, text.contains(":") else { return nil }
        // A zone (`fe80::1%eth0`) is not part of the address.
        let address = text.split(separator: "%", maxSplits: 1).first.map(String.init) ?? text
        var halves = [address]
        if let gap = address.firstRange(of: "::") {
            let tail = address[gap.upperBound...]
            guard tail.firstRange(of: "::") == nil else { return nil }
            halves = [String(address[..<gap.lowerBound]), String(tail)]
        }
        func groups(_ part: String) -> [UInt8]? {
            if part.isEmpty { return [] }
            var bytes: [UInt8] = []
            let pieces = part.split(separator: ":", omittingEmptySubsequences: false)
            for (index, piece) in pieces.enumerated() {
                if index == pieces.count - 1, piece.contains("."), let v4 = parseIPv4(String(piece)) {
                    bytes += v4
                    continue
                }
                guard (1...4).contains(piece.count), piece.allSatisfy(\.isHexDigit),
                    let value = UInt16(piece, radix: 16)
                else { return nil }
                bytes += [UInt8(value >> 8), UInt8(value & 0xFF)]
            }
            return bytes
        }
        guard let head = groups(halves[0]) else { return nil }
        if halves.count == 1 { return head.count == 16 ? head : nil }
        guard let tail = groups(halves[1]), head.count + tail.count <= 14 else { return nil }
        return head + Array(repeating: 0, count: 16 - head.count - tail.count) + tail
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
