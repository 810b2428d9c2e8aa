/// Lower-case hexadecimal text of bytes (digests, HMACs, trace ids), without Foundation's
/// per-byte `String(format:)`.
public enum Hex {
    private static let digits = Array("0123456789abcdef".utf8)

    public static func lowercase(_ bytes: some Sequence<UInt8>) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.underestimatedCount * 2)
        for byte in bytes {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}
