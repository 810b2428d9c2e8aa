#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif

extension SecureRandom {
    /// A random (version 4, RFC 9562 §5.4) UUID from OpenSSL's CSPRNG.
    ///
    /// Use it instead of `UUID()` on request paths: on Linux, Foundation's `UUID()` opens,
    /// reads and closes `/dev/urandom` for every UUID (three system calls and a file
    /// descriptor), about 1.5 % of a service's CPU under a sign-in load (docs/benchmarks.md).
    public static func uuid() -> UUID {
        var bytes: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        withUnsafeMutableBytes(of: &bytes) { raw in
            fill(raw)
            raw[6] = (raw[6] & 0x0F) | 0x40  // version 4
            raw[8] = (raw[8] & 0x3F) | 0x80  // variant 10 (RFC 9562)
        }
        return UUID(uuid: bytes)
    }
}
