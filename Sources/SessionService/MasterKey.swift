import AuthCrypto
import AuthText

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The service's master key (`AUTH_MASTER_KEY`, 32 random bytes). It is never used directly:
/// each purpose gets its own key, `HMAC-SHA256(master, label)` (HKDF-Expand with one block;
/// no extract step is needed because the master key is uniformly random), so a key used for
/// AES-GCM is never also an HMAC key.
///
/// - `auth.session.v1 signing-key-wrap`: AES-256-GCM key wrapping the signing keys' private
///   scalars in the database.
/// - `auth.session.v1 successor-vault`: HMAC key from which each refresh token's successor
///   key is derived (see ``SuccessorVault``).
public struct MasterKey: Sendable, CustomStringConvertible {
    /// The length of the master key in bytes.
    public static let byteCount = 32

    let signingKeyWrapKey: [UInt8]
    let successorVaultKey: [UInt8]

    /// A master key from its 32 bytes.
    public init?(bytes: [UInt8]) {
        guard bytes.count == Self.byteCount else { return nil }
        self.signingKeyWrapKey = HMACSHA256.authenticationCode(
            for: Array("auth.session.v1 signing-key-wrap".utf8),
            key: bytes
        )
        self.successorVaultKey = HMACSHA256.authenticationCode(
            for: Array("auth.session.v1 successor-vault".utf8),
            key: bytes
        )
    }

    /// A master key from standard base64 (padded, strict: no stray characters or non-zero
    /// unused bits) of exactly 32 bytes, as `AUTH_MASTER_KEY` holds it. Surrounding whitespace
    /// (a trailing newline from a mounted file) is ignored.
    public init?(base64: String) {
        guard let bytes = Base64.decode(base64.trimmingWhitespace()) else { return nil }
        self.init(bytes: bytes)
    }

    /// A fresh random master key (tests, benchmarks).
    public static func random() -> MasterKey {
        MasterKey(bytes: SecureRandom.bytes(count: byteCount))!
    }

    /// Never shows the key.
    public var description: String { "MasterKey(redacted)" }
}
