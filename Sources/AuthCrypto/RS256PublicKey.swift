internal import CAuthCryptoShims
internal import COpenSSL

/// An RSA public key for verifying RS256 (RSASSA-PKCS1-v1_5 with SHA-256, RFC 7518 §3.3)
/// signatures, such as ID tokens from external identity providers. Verification only.
///
/// Immutable and safe to share between threads.
public final class RS256PublicKey: Sendable {
    let key: EVPPKey

    /// The smallest accepted modulus, in bits (RFC 7518 §3.3 requires 2048 or more).
    public static let minimumModulusBits = 2048
    /// The largest accepted modulus, in bits (OpenSSL's own verification limit).
    public static let maximumModulusBits = 16384

    /// The modulus size in bits.
    public let modulusBits: Int

    /// Imports a key from the big-endian modulus `n` and public exponent `e` (a JWK's `n` and
    /// `e`, base64url-decoded). Leading zero bytes are ignored.
    ///
    /// - Throws: ``CryptoError/Code/invalidKey`` when the modulus is shorter than 2048 bits or
    ///   longer than 16384, even, or the exponent is even, below 3 or wider than 64 bits.
    public init(modulus n: [UInt8], exponent e: [UInt8]) throws(CryptoError) {
        let modulus = try BigNumber(bigEndian: n)
        let exponent = try BigNumber(bigEndian: e)
        let bits = modulus.bitCount
        guard (Self.minimumModulusBits...Self.maximumModulusBits).contains(bits) else {
            throw CryptoError(
                code: .invalidKey,
                message: "RSA modulus of \(bits) bits outside \(Self.minimumModulusBits)...\(Self.maximumModulusBits)"
            )
        }
        guard modulus.isOdd else {
            throw CryptoError(code: .invalidKey, message: "RSA modulus must be odd")
        }
        guard exponent.isOdd, (2...64).contains(exponent.bitCount) else {
            throw CryptoError(code: .invalidKey, message: "RSA exponent must be odd, at least 3 and at most 64 bits")
        }
        let builder = try OSSLParamBuilder()
        try builder.pushBigNumber("n", modulus)
        try builder.pushBigNumber("e", exponent)
        self.key = try EVPPKey.fromData(
            algorithm: "RSA",
            selection: auth_crypto_selection_public_key(),
            params: try builder.build(),
            failure: .invalidKey,
            message: "cannot import the RSA public key"
        )
        self.modulusBits = bits
    }

    /// The big-endian modulus, without leading zeros (the JWK `n`).
    public var modulus: [UInt8] {
        get throws(CryptoError) { try self.key.bigNumberParameter("n").bigEndianBytes() }
    }

    /// The big-endian public exponent, without leading zeros (the JWK `e`).
    public var exponent: [UInt8] {
        get throws(CryptoError) { try self.key.bigNumberParameter("e").bigEndianBytes() }
    }

    /// Whether `signature` is a valid RS256 signature of `message` under this key. The signature
    /// must be exactly the modulus length (RFC 8017 §8.2.2 step 1).
    public func isValidSignature(_ signature: [UInt8], for message: [UInt8]) -> Bool {
        guard signature.count == (self.modulusBits + 7) / 8 else { return false }
        return SignatureOperations.verify(key: self.key, signature: signature, message: message)
    }
}
