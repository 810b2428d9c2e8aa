internal import CAuthCryptoShims
internal import COpenSSL

#if canImport(FoundationEssentials)
internal import FoundationEssentials
#else
internal import Foundation
#endif

/// An ECDSA P-256 public key for ES256 (ECDSA with SHA-256, RFC 7518 §3.4).
///
/// Import validates the point (on the curve, not the point at infinity). Immutable and safe to
/// share between threads.
public final class ES256PublicKey: Sendable {
    let key: EVPPKey

    /// The uncompressed SEC 1 point: `0x04 ‖ X ‖ Y`, 65 bytes.
    public let x963Representation: [UInt8]

    /// The 32-byte big-endian X coordinate (the JWK `x`).
    public var x: [UInt8] { Array(self.x963Representation[1..<33]) }

    /// The 32-byte big-endian Y coordinate (the JWK `y`).
    public var y: [UInt8] { Array(self.x963Representation[33..<65]) }

    /// Imports an uncompressed point `0x04 ‖ X ‖ Y` (65 bytes).
    ///
    /// - Throws: ``CryptoError/Code/invalidKey`` when the bytes are not an uncompressed point on P-256.
    public init(x963Representation point: [UInt8]) throws(CryptoError) {
        guard point.count == 65, point[0] == 0x04 else {
            throw CryptoError(code: .invalidKey, message: "a P-256 public key is 65 bytes starting with 0x04")
        }
        let builder = try OSSLParamBuilder()
        try builder.pushUTF8String("group", "prime256v1")
        try builder.pushOctetString("pub", point)
        let key = try EVPPKey.fromData(
            algorithm: "EC",
            selection: auth_crypto_selection_public_key(),
            params: try builder.build(),
            failure: .invalidKey,
            message: "not a point on P-256"
        )
        // fromdata already decodes the point with EC_POINT_oct2point (which checks the curve
        // equation); the explicit check also covers the subgroup and states the intent.
        guard key.passesPublicCheck() else {
            throw CryptoError(code: .invalidKey, message: "not a valid P-256 public key")
        }
        self.key = key
        self.x963Representation = point
    }

    /// Imports the affine coordinates (32 bytes each, big-endian), as in a JWK's `x` and `y`.
    public convenience init(x: [UInt8], y: [UInt8]) throws(CryptoError) {
        guard x.count == 32, y.count == 32 else {
            throw CryptoError(code: .invalidKey, message: "P-256 coordinates are 32 bytes each")
        }
        try self.init(x963Representation: [0x04] + x + y)
    }

    /// Whether `signature` (raw `r ‖ s`, 64 bytes, as JWS carries it) is a valid ES256
    /// signature of `message` under this key. Anything that is not exactly 64 bytes is invalid.
    public func isValidSignature(_ signature: [UInt8], for message: [UInt8]) -> Bool {
        guard signature.count == 64 else { return false }
        var der = [UInt8](repeating: 0, count: 80)
        var derLength = der.count
        let converted = signature.withUnsafeBufferPointer { raw in
            auth_crypto_ecdsa_raw_to_der(raw.baseAddress, 32, &der, &derLength)
        }
        guard converted == 1 else {
            OpenSSLErrorQueue.clear()
            return false
        }
        return SignatureOperations.verify(key: self.key, signature: Array(der[0..<derLength]), message: message)
    }
}

/// An ECDSA P-256 private key for ES256.
///
/// Immutable and safe to share between threads: each signature uses its own OpenSSL context.
public final class ES256PrivateKey: Sendable {
    let key: EVPPKey

    /// The matching public key.
    public let publicKey: ES256PublicKey

    /// Generates a new random key.
    public convenience init() throws(CryptoError) {
        let context = try EVPPKeyContext(algorithm: "EC")
        var generated: OpaquePointer? = nil
        guard EVP_PKEY_keygen_init(context.pointer) == 1,
            EVP_PKEY_CTX_set_group_name(context.pointer, staticCString("prime256v1")) == 1,
            EVP_PKEY_generate(context.pointer, &generated) == 1,
            let generated
        else {
            throw CryptoError.openSSL(.internalError, "P-256 key generation failed")
        }
        try self.init(validated: EVPPKey(taking: generated))
    }

    /// Imports the raw private scalar `d` (32 bytes, big-endian, as in a JWK's `d`); the public
    /// key is computed from it.
    ///
    /// - Throws: ``CryptoError/Code/invalidKey`` when `d` is not 32 bytes or not in 1..<n.
    public convenience init(rawRepresentation d: [UInt8]) throws(CryptoError) {
        guard d.count == 32 else {
            throw CryptoError(code: .invalidKey, message: "a P-256 private key is 32 bytes")
        }
        var point = [UInt8](repeating: 0, count: 65)
        let derived = d.withUnsafeBufferPointer { scalar in
            auth_crypto_p256_public_from_private(scalar.baseAddress, &point)
        }
        guard derived == 1 else {
            throw CryptoError.openSSL(.invalidKey, "P-256 private scalar must be in 1..<n")
        }
        try self.init(d: d, point: point)
    }

    /// Imports the raw private scalar `d` with its public point (`0x04 ‖ X ‖ Y`), checking that
    /// they belong together.
    ///
    /// - Throws: ``CryptoError/Code/invalidKey`` when either is malformed or they do not match.
    public convenience init(rawRepresentation d: [UInt8], x963PublicKey point: [UInt8]) throws(CryptoError) {
        guard d.count == 32 else {
            throw CryptoError(code: .invalidKey, message: "a P-256 private key is 32 bytes")
        }
        var derivedPoint = [UInt8](repeating: 0, count: 65)
        let derived = d.withUnsafeBufferPointer { scalar in
            auth_crypto_p256_public_from_private(scalar.baseAddress, &derivedPoint)
        }
        guard derived == 1 else {
            throw CryptoError.openSSL(.invalidKey, "P-256 private scalar must be in 1..<n")
        }
        guard ConstantTime.equals(derivedPoint, point) else {
            throw CryptoError(code: .invalidKey, message: "the public key does not match the private key")
        }
        try self.init(d: d, point: point)
    }

    /// Imports an unencrypted PKCS #8 `PrivateKeyInfo` (DER) holding a P-256 key.
    ///
    /// - Throws: ``CryptoError/Code/invalidKey`` when the DER is malformed, not EC, not P-256, or
    ///   fails OpenSSL's key-pair check.
    public convenience init(pkcs8DERRepresentation der: [UInt8]) throws(CryptoError) {
        let decoder = try OSSLDecoderContext(
            inputType: "DER",
            inputStructure: "PrivateKeyInfo",
            keyType: "EC",
            selection: auth_crypto_selection_keypair()
        )
        let key = try decoder.decode(der, failure: .invalidKey, message: "not a PKCS #8 EC private key")
        guard key.stringParameter("group") == "prime256v1" else {
            throw CryptoError(code: .invalidKey, message: "the PKCS #8 key is not on P-256")
        }
        let context = try EVPPKeyContext(key: key)
        guard EVP_PKEY_check(context.pointer) == 1 else {
            throw CryptoError.openSSL(.invalidKey, "the PKCS #8 key fails the key-pair check")
        }
        try self.init(validated: key)
    }

    /// Imports a PEM `-----BEGIN PRIVATE KEY-----` block (unencrypted PKCS #8) holding a P-256
    /// key: the form of an Apple Sign in with Apple key file (`AuthKey_<KEYID>.p8`).
    ///
    /// - Throws: ``CryptoError/Code/invalidKey`` when the text holds no such block or its key is
    ///   not a valid P-256 key.
    public convenience init(pemRepresentation pem: String) throws(CryptoError) {
        let lines = pem.split(whereSeparator: \.isNewline).map { String($0.filter { !$0.isWhitespace }) }
        guard let begin = lines.firstIndex(of: "-----BEGINPRIVATEKEY-----"),
            let end = lines[begin...].firstIndex(of: "-----ENDPRIVATEKEY-----"),
            let der = Data(base64Encoded: lines[(begin + 1)..<end].joined())
        else {
            throw CryptoError(code: .invalidKey, message: "not a PEM PKCS #8 private key")
        }
        try self.init(pkcs8DERRepresentation: Array(der))
    }

    private convenience init(d: [UInt8], point: [UInt8]) throws(CryptoError) {
        let builder = try OSSLParamBuilder()
        try builder.pushUTF8String("group", "prime256v1")
        try builder.pushBigNumber("priv", try BigNumber(bigEndian: d))
        try builder.pushOctetString("pub", point)
        let key = try EVPPKey.fromData(
            algorithm: "EC",
            selection: auth_crypto_selection_keypair(),
            params: try builder.build(),
            failure: .invalidKey,
            message: "cannot import the P-256 key pair"
        )
        self.init(key: key, publicKey: try ES256PublicKey(x963Representation: point))
    }

    /// Wraps a P-256 key whose public point is read back from the key itself.
    private convenience init(validated key: EVPPKey) throws(CryptoError) {
        let x = try key.bigNumberParameter("qx").bigEndianBytes(width: 32)
        let y = try key.bigNumberParameter("qy").bigEndianBytes(width: 32)
        self.init(key: key, publicKey: try ES256PublicKey(x: x, y: y))
    }

    private init(key: EVPPKey, publicKey: ES256PublicKey) {
        self.key = key
        self.publicKey = publicKey
    }

    /// The raw private scalar `d`, 32 bytes big-endian. Secret: never log it.
    public var rawRepresentation: [UInt8] {
        get throws(CryptoError) {
            try self.key.bigNumberParameter("priv").bigEndianBytes(width: 32)
        }
    }

    /// The key as an unencrypted PKCS #8 `PrivateKeyInfo`, DER. Secret: never log it.
    public var pkcs8DERRepresentation: [UInt8] {
        get throws(CryptoError) {
            try OSSLEncoderContext(
                key: self.key,
                selection: auth_crypto_selection_keypair(),
                outputType: "DER",
                outputStructure: "PrivateKeyInfo"
            ).encode()
        }
    }

    /// The key as a PEM `PRIVATE KEY` block (PKCS #8), lines of 64 characters. Secret.
    public var pemRepresentation: String {
        get throws(CryptoError) {
            let base64 = Data(try pkcs8DERRepresentation).base64EncodedString()
            var lines = ["-----BEGIN PRIVATE KEY-----"]
            var rest = Substring(base64)
            while !rest.isEmpty {
                lines.append(String(rest.prefix(64)))
                rest = rest.dropFirst(64)
            }
            lines.append("-----END PRIVATE KEY-----")
            return lines.joined(separator: "\n") + "\n"
        }
    }

    /// An ES256 signature of `message`: raw `r ‖ s`, 64 bytes, as JWS wants (not DER).
    /// ECDSA is randomised: two signatures of one message differ, both verify.
    public func signature(for message: [UInt8]) throws(CryptoError) -> [UInt8] {
        let der = try SignatureOperations.sign(key: self.key, message: message, capacity: 80)
        var raw = [UInt8](repeating: 0, count: 64)
        let converted = der.withUnsafeBufferPointer { derBytes in
            auth_crypto_ecdsa_der_to_raw(derBytes.baseAddress, derBytes.count, 32, &raw)
        }
        guard converted == 1 else {
            throw CryptoError.openSSL(.internalError, "cannot convert the ECDSA signature from DER")
        }
        return raw
    }
}

/// EVP_DigestSign / EVP_DigestVerify with SHA-256, shared by the ES256 and RS256 keys.
enum SignatureOperations {
    static func sign(key: EVPPKey, message: [UInt8], capacity: Int) throws(CryptoError) -> [UInt8] {
        let context = try EVPMDContext()
        guard EVP_DigestSignInit_ex(context.pointer, nil, staticCString("SHA256"), nil, nil, key.pointer, nil) == 1
        else {
            throw CryptoError.openSSL(.internalError, "EVP_DigestSignInit_ex failed")
        }
        var signature = [UInt8](repeating: 0, count: capacity)
        var length = signature.count
        let ok = message.withNonNullBytes { bytes, count in
            EVP_DigestSign(context.pointer, &signature, &length, bytes, count)
        }
        guard ok == 1 else {
            throw CryptoError.openSSL(.internalError, "EVP_DigestSign failed")
        }
        return Array(signature[0..<length])
    }

    /// Whether `signature` (in the form OpenSSL expects: DER for ECDSA, raw for RSA) verifies.
    /// A failed verification leaves nothing in OpenSSL's error queue.
    static func verify(key: EVPPKey, signature: [UInt8], message: [UInt8]) -> Bool {
        guard let context = try? EVPMDContext() else { return false }
        guard EVP_DigestVerifyInit_ex(context.pointer, nil, staticCString("SHA256"), nil, nil, key.pointer, nil) == 1
        else {
            OpenSSLErrorQueue.clear()
            return false
        }
        let result = signature.withNonNullBytes { signatureBytes, signatureCount in
            message.withNonNullBytes { bytes, count in
                EVP_DigestVerify(context.pointer, signatureBytes, signatureCount, bytes, count)
            }
        }
        if result != 1 { OpenSSLErrorQueue.clear() }
        return result == 1
    }
}
