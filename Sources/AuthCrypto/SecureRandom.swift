internal import COpenSSL

/// Cryptographically secure random values from OpenSSL's CSPRNG (`RAND_bytes`).
///
/// A CSPRNG failure is unrecoverable (the process can no longer make keys, salts or codes
/// safely), so these functions trap instead of throwing.
public enum SecureRandom {
    /// `count` random bytes.
    public static func bytes(count: Int) -> [UInt8] {
        precondition(count >= 0, "count must not be negative")
        var out = [UInt8](repeating: 0, count: count)
        out.withUnsafeMutableBytes { fill($0) }
        return out
    }

    /// A uniformly distributed integer in `0..<upperBound`, by rejection sampling (no modulo bias).
    ///
    /// - Precondition: `upperBound > 0`.
    public static func uniform(below upperBound: UInt32) -> UInt32 {
        precondition(upperBound > 0, "upperBound must be positive")
        // Values below `2^32 mod upperBound` would make the low residues more likely: reject them.
        // The rejected range is smaller than upperBound, so fewer than half the draws are
        // rejected even in the worst case.
        let threshold = (0 &- upperBound) % upperBound
        while true {
            let value = self.randomUInt32()
            if value >= threshold {
                return value % upperBound
            }
        }
    }

    /// A uniformly distributed integer in `0..<upperBound`, by rejection sampling. (Not public:
    /// a second public overload would make `uniform(below: 10)` ambiguous.)
    static func uniform64(below upperBound: UInt64) -> UInt64 {
        precondition(upperBound > 0, "upperBound must be positive")
        let threshold = (0 &- upperBound) % upperBound
        while true {
            let value = self.randomUInt64()
            if value >= threshold {
                return value % upperBound
            }
        }
    }

    /// A decimal one-time code of exactly `digits` digits (leading zeros kept), uniform over
    /// `0..<10^digits`.
    ///
    /// - Precondition: `1 <= digits <= 19`.
    public static func numericCode(digits: Int = 6) -> String {
        precondition((1...19).contains(digits), "digits must be in 1...19")
        var bound: UInt64 = 1
        for _ in 0..<digits { bound *= 10 }
        let value = self.uniform64(below: bound)
        let text = String(value)
        return String(repeating: "0", count: digits - text.count) + text
    }

    /// Fills `buffer` with random bytes (in chunks of at most `Int32.max`, `RAND_bytes`'s limit).
    static func fill(_ buffer: UnsafeMutableRawBufferPointer) {
        var offset = 0
        while offset < buffer.count {
            let chunk = min(buffer.count - offset, Int(Int32.max))
            let start = (buffer.baseAddress! + offset).assumingMemoryBound(to: UInt8.self)
            guard RAND_bytes(start, Int32(chunk)) == 1 else {
                fatalError("RAND_bytes failed: \(OpenSSLErrorQueue.drain())")
            }
            offset += chunk
        }
    }

    private static func randomUInt32() -> UInt32 {
        var value: UInt32 = 0
        withUnsafeMutableBytes(of: &value) { fill($0) }
        return value
    }

    private static func randomUInt64() -> UInt64 {
        var value: UInt64 = 0
        withUnsafeMutableBytes(of: &value) { fill($0) }
        return value
    }
}
