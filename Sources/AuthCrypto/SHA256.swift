internal import COpenSSL

/// SHA-256 (FIPS 180-4), one-shot, through OpenSSL's `EVP_Digest`.
public enum SHA256 {
    /// The digest length in bytes (32).
    public static let byteCount = 32

    /// The SHA-256 digest of `bytes`.
    public static func hash(_ bytes: some Collection<UInt8>) -> [UInt8] {
        if let digest = bytes.withContiguousStorageIfAvailable({ buffer in
            self.hash(UnsafeRawBufferPointer(buffer))
        }) {
            return digest
        }
        return Array(bytes).withUnsafeBytes { self.hash($0) }
    }

    /// The SHA-256 digest of the UTF-8 encoding of `string`.
    public static func hash(_ string: String) -> [UInt8] {
        self.hash(Array(string.utf8))
    }

    private static func hash(_ buffer: UnsafeRawBufferPointer) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: self.byteCount)
        var length: UInt32 = 0
        let ok = out.withUnsafeMutableBufferPointer { digest in
            EVP_Digest(buffer.baseAddress, buffer.count, digest.baseAddress, &length, EVPDigest.sha256.pointer, nil)
        }
        // SHA-256 cannot fail on valid memory; a failure here is an allocation failure.
        guard ok == 1, length == UInt32(self.byteCount) else {
            fatalError("EVP_Digest(SHA256) failed: \(OpenSSLErrorQueue.drain())")
        }
        return out
    }
}
