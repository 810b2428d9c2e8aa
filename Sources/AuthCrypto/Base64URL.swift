/// base64url without padding (RFC 4648 §5, as JOSE uses it: RFC 7515 §2).
///
/// Decoding is strict: only `A–Z a–z 0–9 - _`, no `=`, no whitespace, no length of the form
/// 4k+1, and the unused low bits of the last character must be zero, so every byte string has
/// exactly one accepted encoding (no malleable tokens).
public enum Base64URL {
    /// The unpadded base64url encoding of `bytes`.
    public static func encode(_ bytes: [UInt8]) -> String {
        Base64Codec.url.encode(bytes, padded: false)
    }

    /// The bytes encoded by `string`, or `nil` if it is not strict unpadded base64url.
    public static func decode(_ string: String) -> [UInt8]? {
        Base64Codec.url.decode(Array(string.utf8), padded: false)
    }

    /// The bytes encoded by the ASCII bytes `encoded`, or `nil` if they are not strict unpadded
    /// base64url.
    public static func decode(_ encoded: some Collection<UInt8>) -> [UInt8]? {
        Base64Codec.url.decode(Array(encoded), padded: false)
    }
}

/// Standard base64 (RFC 4648 §4), strict, with or without `=` padding.
public enum Base64 {
    /// The base64 encoding of `bytes`, `=`-padded to a multiple of 4 unless `padded` is false
    /// (the PHC string format uses the unpadded form).
    public static func encode(_ bytes: [UInt8], padded: Bool = true) -> String {
        Base64Codec.standard.encode(bytes, padded: padded)
    }

    /// The bytes encoded by `string`, or `nil` if it is not strict base64 in the requested form:
    /// with `padded`, the length is a multiple of 4 and exactly the needed `=` end it; without,
    /// no `=` at all. Unused low bits must be zero; whitespace is rejected.
    public static func decode(_ string: String, padded: Bool = true) -> [UInt8]? {
        Base64Codec.standard.decode(Array(string.utf8), padded: padded)
    }
}

/// The shared encoder and strict decoder behind ``Base64`` and ``Base64URL``.
struct Base64Codec: Sendable {
    private let alphabet: [UInt8]
    private let reverse: [UInt8]

    private static let invalid: UInt8 = 0xFF

    static let standard = Base64Codec(
        alphabet: Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
    )
    static let url = Base64Codec(
        alphabet: Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
    )

    private init(alphabet: [UInt8]) {
        precondition(alphabet.count == 64)
        self.alphabet = alphabet
        var reverse = [UInt8](repeating: Self.invalid, count: 256)
        for (index, character) in alphabet.enumerated() {
            reverse[Int(character)] = UInt8(index)
        }
        self.reverse = reverse
    }

    func encode(_ bytes: [UInt8], padded: Bool) -> String {
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count + 2) / 3 * 4)
        var index = 0
        while index + 3 <= bytes.count {
            let value = UInt32(bytes[index]) << 16 | UInt32(bytes[index + 1]) << 8 | UInt32(bytes[index + 2])
            out.append(self.alphabet[Int(value >> 18 & 0x3F)])
            out.append(self.alphabet[Int(value >> 12 & 0x3F)])
            out.append(self.alphabet[Int(value >> 6 & 0x3F)])
            out.append(self.alphabet[Int(value & 0x3F)])
            index += 3
        }
        switch bytes.count - index {
        case 1:
            let value = UInt32(bytes[index]) << 16
            out.append(self.alphabet[Int(value >> 18 & 0x3F)])
            out.append(self.alphabet[Int(value >> 12 & 0x3F)])
            if padded { out.append(contentsOf: [UInt8(ascii: "="), UInt8(ascii: "=")]) }
        case 2:
            let value = UInt32(bytes[index]) << 16 | UInt32(bytes[index + 1]) << 8
            out.append(self.alphabet[Int(value >> 18 & 0x3F)])
            out.append(self.alphabet[Int(value >> 12 & 0x3F)])
            out.append(self.alphabet[Int(value >> 6 & 0x3F)])
            if padded { out.append(UInt8(ascii: "=")) }
        default:
            break
        }
        return String(decoding: out, as: UTF8.self)
    }

    func decode(_ input: [UInt8], padded: Bool) -> [UInt8]? {
        var characters = input[...]
        if padded {
            guard characters.count % 4 == 0 else { return nil }
            // At most two '=' and only at the very end.
            var padding = 0
            while padding < 2, characters.last == UInt8(ascii: "=") {
                characters = characters.dropLast()
                padding += 1
            }
        }
        let remainder = characters.count % 4
        guard remainder != 1 else { return nil }
        if padded, characters.count % 4 != 0, (characters.count + (4 - remainder)) != input.count {
            return nil
        }

        var out: [UInt8] = []
        out.reserveCapacity(characters.count / 4 * 3 + 2)
        var accumulator: UInt32 = 0
        var pending = 0
        for character in characters {
            let value = self.reverse[Int(character)]
            guard value != Self.invalid else { return nil }
            accumulator = accumulator << 6 | UInt32(value)
            pending += 1
            if pending == 4 {
                out.append(UInt8(truncatingIfNeeded: accumulator >> 16))
                out.append(UInt8(truncatingIfNeeded: accumulator >> 8))
                out.append(UInt8(truncatingIfNeeded: accumulator))
                accumulator = 0
                pending = 0
            }
        }
        switch pending {
        case 2:
            // 12 bits: one byte and 4 unused bits that must be zero.
            guard accumulator & 0xF == 0 else { return nil }
            out.append(UInt8(truncatingIfNeeded: accumulator >> 4))
        case 3:
            // 18 bits: two bytes and 2 unused bits that must be zero.
            guard accumulator & 0x3 == 0 else { return nil }
            out.append(UInt8(truncatingIfNeeded: accumulator >> 10))
            out.append(UInt8(truncatingIfNeeded: accumulator >> 2))
        default:
            break
        }
        return out
    }
}
