internal import COpenSSL

/// Comparisons whose running time does not depend on the contents compared.
public enum ConstantTime {
    /// Whether `a` and `b` hold the same bytes, in time that depends only on their length
    /// (`CRYPTO_memcmp`). Arrays of different lengths are unequal; that answer reveals the
    /// lengths (which are public for MACs, tags and hashes) but not the contents.
    public static func equals(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        if a.isEmpty { return true }
        return a.withUnsafeBytes { left in
            b.withUnsafeBytes { right in
                CRYPTO_memcmp(left.baseAddress, right.baseAddress, left.count) == 0
            }
        }
    }
}
