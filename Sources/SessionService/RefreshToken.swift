import AuthCrypto

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// An opaque refresh token: 32 random bytes, sent as unpadded base64url (43 characters).
/// The database stores only ``hash`` (SHA-256 of the 32 bytes).
struct RefreshToken: Sendable, Equatable {
    static let byteCount = 32
    static let encodedLength = 43

    let bytes: [UInt8]

    private init(bytes: [UInt8]) {
        self.bytes = bytes
    }

    static func generate() -> RefreshToken {
        RefreshToken(bytes: SecureRandom.bytes(count: byteCount))
    }

    /// Reads a token as a client sends it; `nil` unless it is exactly the canonical base64url
    /// of 32 bytes (strict decoding: one spelling per token).
    init?(string: String) {
        guard string.utf8.count == Self.encodedLength, let bytes = Base64URL.decode(string),
            bytes.count == Self.byteCount
        else {
            return nil
        }
        self.bytes = bytes
    }

    init?(rawBytes: [UInt8]) {
        guard rawBytes.count == Self.byteCount else { return nil }
        self.bytes = rawBytes
    }

    var string: String { Base64URL.encode(bytes) }

    /// What the database stores and looks tokens up by.
    var hash: [UInt8] { SHA256.hash(bytes) }
}

/// A token pair as issued: what Issue and Refresh return, and what the successor vault keeps.
struct IssuedTokens: Sendable, Equatable {
    var refreshToken: RefreshToken
    var accessToken: String
    /// The access token's `exp`.
    var accessTokenExpiresAt: Int64
    /// When the refresh token stops working (Unix microseconds, as stored).
    var refreshTokenExpiresAt: Date
}

/// Keeps the successor of a used refresh token so that a second presentation of the used token
/// inside the grace window gets the *same* pair back (a racing tab, a lost response and a retry)
/// instead of a second branch of the session.
///
/// The pair is sealed with AES-256-GCM under `HMAC-SHA256(vaultKey, presentedToken)`: only
/// someone holding both the master key (the service) and the used token (its rightful
/// client) can open it; the database alone does not give a usable token, because it stores
/// only `SHA-256(token)`. The additional data binds the box to its session and generation.
struct SuccessorVault: Sendable {
    private let keyDerivation: HMACSHA256
    /// The previous master key's derivation, during a master-key rotation: boxes sealed by a
    /// replica that still ran with only the old key open with it. Nothing is sealed with it.
    private let previousKeyDerivation: HMACSHA256?
    private static let formatVersion: UInt8 = 1

    init(masterKey: MasterKey, previousMasterKey: MasterKey? = nil) {
        self.keyDerivation = HMACSHA256(key: masterKey.successorVaultKey)
        self.previousKeyDerivation = previousMasterKey.map { HMACSHA256(key: $0.successorVaultKey) }
    }

    func seal(
        _ tokens: IssuedTokens,
        presented: RefreshToken,
        sessionID: UUID,
        generation: Int64
    ) throws(CryptoError) -> [UInt8] {
        var plaintext: [UInt8] = [Self.formatVersion]
        plaintext.reserveCapacity(1 + 32 + 16 + tokens.accessToken.utf8.count)
        plaintext += tokens.refreshToken.bytes
        appendBigEndian(tokens.accessTokenExpiresAt, to: &plaintext)
        appendBigEndian(
            Int64((tokens.refreshTokenExpiresAt.timeIntervalSince1970 * 1_000_000).rounded()),
            to: &plaintext
        )
        plaintext += Array(tokens.accessToken.utf8)
        return try AESGCM.seal(
            plaintext,
            key: keyDerivation.authenticationCode(for: presented.bytes),
            aad: Self.additionalData(sessionID: sessionID, generation: generation)
        )
    }

    func open(
        _ sealed: [UInt8],
        presented: RefreshToken,
        sessionID: UUID,
        generation: Int64
    ) throws(CryptoError) -> IssuedTokens {
        let aad = Self.additionalData(sessionID: sessionID, generation: generation)
        let plaintext: [UInt8]
        do {
            plaintext = try AESGCM.open(sealed, key: keyDerivation.authenticationCode(for: presented.bytes), aad: aad)
        } catch  where error.code == .authenticationFailure && previousKeyDerivation != nil {
            plaintext = try AESGCM.open(
                sealed,
                key: previousKeyDerivation!.authenticationCode(for: presented.bytes),
                aad: aad
            )
        }
        guard plaintext.count > 1 + 32 + 16, plaintext[0] == Self.formatVersion,
            let refresh = RefreshToken(rawBytes: Array(plaintext[1..<33]))
        else {
            throw CryptoError(code: .invalidArgument, message: "unknown successor box format")
        }
        let accessExpiresAt = readBigEndian(plaintext, at: 33)
        let refreshExpiresMicros = readBigEndian(plaintext, at: 41)
        return IssuedTokens(
            refreshToken: refresh,
            accessToken: String(decoding: plaintext[49...], as: UTF8.self),
            accessTokenExpiresAt: accessExpiresAt,
            refreshTokenExpiresAt: Date(timeIntervalSince1970: Double(refreshExpiresMicros) / 1_000_000)
        )
    }

    private static func additionalData(sessionID: UUID, generation: Int64) -> [UInt8] {
        var aad = Array("auth.session.v1 successor".utf8) + [0]
        withUnsafeBytes(of: sessionID.uuid) { aad += $0 }
        appendBigEndian(generation, to: &aad)
        return aad
    }
}

private func appendBigEndian(_ value: Int64, to bytes: inout [UInt8]) {
    withUnsafeBytes(of: value.bigEndian) { bytes += $0 }
}

private func readBigEndian(_ bytes: [UInt8], at offset: Int) -> Int64 {
    var value: Int64 = 0
    for byte in bytes[offset..<(offset + 8)] {
        value = value << 8 | Int64(byte)
    }
    return value
}
