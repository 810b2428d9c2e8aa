internal import CAuthCryptoShims
internal import COpenSSL

// One `final class` per OpenSSL pointer type, each freeing its pointer in `deinit`. They are
// internal: the public API exposes only Swift values. OpenSSL hands every one of these out as the
// same `OpaquePointer` type, so the wrappers are also what keeps an `EVP_PKEY*` from being passed
// where an `EVP_MD_CTX*` is expected.

// MARK: - Fetched algorithms (immutable, shared)

/// A fetched `EVP_MD`.
///
/// `@unchecked Sendable`: a fetched algorithm object is never modified after the fetch returns
/// (it is only passed as a `const` argument) and its reference count is updated atomically;
/// openssl-threads(7): "Objects are thread-safe as long as the API's being invoked don't modify
/// the object".
final class EVPDigest: @unchecked Sendable {
    let pointer: OpaquePointer

    private init(name: String) {
        guard let pointer = EVP_MD_fetch(nil, name, nil) else {
            fatalError("OpenSSL cannot fetch digest \(name): \(OpenSSLErrorQueue.drain())")
        }
        self.pointer = pointer
    }

    deinit { EVP_MD_free(self.pointer) }

    /// SHA-256, fetched once: fetching per call costs more than hashing a short message.
    static let sha256 = EVPDigest(name: "SHA256")
}

/// A fetched `EVP_MAC`. `@unchecked Sendable` for the same reason as ``EVPDigest``.
final class EVPMACAlgorithm: @unchecked Sendable {
    let pointer: OpaquePointer

    private init(name: String) {
        guard let pointer = EVP_MAC_fetch(nil, name, nil) else {
            fatalError("OpenSSL cannot fetch MAC \(name): \(OpenSSLErrorQueue.drain())")
        }
        self.pointer = pointer
    }

    deinit { EVP_MAC_free(self.pointer) }

    static let hmac = EVPMACAlgorithm(name: "HMAC")
}

/// A fetched `EVP_CIPHER`. `@unchecked Sendable` for the same reason as ``EVPDigest``.
final class EVPCipher: @unchecked Sendable {
    let pointer: OpaquePointer

    private init(name: String) {
        guard let pointer = EVP_CIPHER_fetch(nil, name, nil) else {
            fatalError("OpenSSL cannot fetch cipher \(name): \(OpenSSLErrorQueue.drain())")
        }
        self.pointer = pointer
    }

    deinit { EVP_CIPHER_free(self.pointer) }

    static let aes256GCM = EVPCipher(name: "AES-256-GCM")
}

// MARK: - Keys (immutable, shared)

/// An `EVP_PKEY`, never modified after construction.
///
/// `@unchecked Sendable`: the key is fully built before this wrapper exists and nothing mutates it
/// afterwards; openssl-threads(7) only forbids mutating a key (setting its elements) while another
/// thread uses it, and every operation here uses its own per-call `EVP_PKEY_CTX`/`EVP_MD_CTX`.
final class EVPPKey: @unchecked Sendable {
    let pointer: OpaquePointer

    /// Takes ownership of `pointer`.
    init(taking pointer: OpaquePointer) {
        self.pointer = pointer
    }

    deinit { EVP_PKEY_free(self.pointer) }

    /// Builds a key with `EVP_PKEY_fromdata`.
    static func fromData(
        algorithm: StaticString,
        selection: Int32,
        params: OSSLParams,
        failure: CryptoError.Code,
        message: String
    ) throws(CryptoError) -> EVPPKey {
        let context = try EVPPKeyContext(algorithm: algorithm)
        var key: OpaquePointer? = nil
        guard EVP_PKEY_fromdata_init(context.pointer) == 1,
            EVP_PKEY_fromdata(context.pointer, &key, selection, params.pointer) == 1,
            let key
        else {
            throw CryptoError.openSSL(failure, message)
        }
        return EVPPKey(taking: key)
    }

    /// A BIGNUM parameter of the key (`EVP_PKEY_get_bn_param`).
    func bigNumberParameter(_ name: String) throws(CryptoError) -> BigNumber {
        var bn: OpaquePointer? = nil
        guard EVP_PKEY_get_bn_param(self.pointer, name, &bn) == 1, let bn else {
            throw CryptoError.openSSL(.internalError, "cannot read key parameter \(name)")
        }
        return BigNumber(taking: bn)
    }

    /// A UTF-8 string parameter of the key (`EVP_PKEY_get_utf8_string_param`).
    func stringParameter(_ name: String) -> String? {
        var buffer = [CChar](repeating: 0, count: 80)
        var length = 0
        guard EVP_PKEY_get_utf8_string_param(self.pointer, name, &buffer, buffer.count, &length) == 1 else {
            OpenSSLErrorQueue.clear()
            return nil
        }
        return String(decoding: buffer.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// `EVP_PKEY_public_check`: the full public-key validation (on the curve, right subgroup).
    func passesPublicCheck() -> Bool {
        guard let context = try? EVPPKeyContext(key: self) else { return false }
        let ok = EVP_PKEY_public_check(context.pointer) == 1
        if !ok { OpenSSLErrorQueue.clear() }
        return ok
    }
}

// MARK: - Per-call contexts (single owner, not Sendable)

/// An `EVP_PKEY_CTX`.
final class EVPPKeyContext {
    let pointer: OpaquePointer

    /// `algorithm` is a literal because OpenSSL 3.0 keeps the pointer (as the context's key type)
    /// instead of copying the string.
    init(algorithm: StaticString) throws(CryptoError) {
        guard let pointer = EVP_PKEY_CTX_new_from_name(nil, staticCString(algorithm), nil) else {
            throw CryptoError.openSSL(.internalError, "EVP_PKEY_CTX_new_from_name(\(algorithm)) failed")
        }
        self.pointer = pointer
    }

    init(key: EVPPKey) throws(CryptoError) {
        guard let pointer = EVP_PKEY_CTX_new_from_pkey(nil, key.pointer, nil) else {
            throw CryptoError.openSSL(.internalError, "EVP_PKEY_CTX_new_from_pkey failed")
        }
        self.pointer = pointer
    }

    deinit { EVP_PKEY_CTX_free(self.pointer) }
}

/// An `EVP_MD_CTX`.
final class EVPMDContext {
    let pointer: OpaquePointer

    init() throws(CryptoError) {
        guard let pointer = EVP_MD_CTX_new() else {
            throw CryptoError.openSSL(.internalError, "EVP_MD_CTX_new failed")
        }
        self.pointer = pointer
    }

    deinit { EVP_MD_CTX_free(self.pointer) }
}

/// An `EVP_MAC_CTX`.
///
/// `@unchecked Sendable` so that ``HMACSHA256`` can park contexts in its `Mutex` and hand them
/// out. Invariant, kept by every user: a context is never used by two threads at once. It is
/// either owned by a single call, or held inside `HMACSHA256`'s mutex (pooled, or the template
/// that is only duplicated under that lock).
final class EVPMACContext: @unchecked Sendable {
    let pointer: OpaquePointer

    init(algorithm: EVPMACAlgorithm) throws(CryptoError) {
        guard let pointer = EVP_MAC_CTX_new(algorithm.pointer) else {
            throw CryptoError.openSSL(.internalError, "EVP_MAC_CTX_new failed")
        }
        self.pointer = pointer
    }

    /// Takes ownership of `pointer`.
    init(taking pointer: OpaquePointer) {
        self.pointer = pointer
    }

    deinit { EVP_MAC_CTX_free(self.pointer) }
}

/// An `EVP_CIPHER_CTX`.
final class EVPCipherContext {
    let pointer: OpaquePointer

    init() throws(CryptoError) {
        guard let pointer = EVP_CIPHER_CTX_new() else {
            throw CryptoError.openSSL(.internalError, "EVP_CIPHER_CTX_new failed")
        }
        self.pointer = pointer
    }

    deinit { EVP_CIPHER_CTX_free(self.pointer) }
}

/// An `OSSL_ENCODER_CTX`.
final class OSSLEncoderContext {
    let pointer: OpaquePointer

    /// `outputType` and `outputStructure` are literals because the context keeps pointers to
    /// them (not copies) and reads them again while encoding.
    init(key: EVPPKey, selection: Int32, outputType: StaticString, outputStructure: StaticString) throws(CryptoError) {
        guard
            let pointer = OSSL_ENCODER_CTX_new_for_pkey(
                key.pointer,
                selection,
                staticCString(outputType),
                staticCString(outputStructure),
                nil
            ),
            OSSL_ENCODER_CTX_get_num_encoders(pointer) > 0
        else {
            throw CryptoError.openSSL(.internalError, "no OpenSSL encoder for \(outputType)/\(outputStructure)")
        }
        self.pointer = pointer
    }

    deinit { OSSL_ENCODER_CTX_free(self.pointer) }

    /// Encodes the key; the OpenSSL buffer is wiped before it is freed (it may hold a private key).
    func encode() throws(CryptoError) -> [UInt8] {
        var data: UnsafeMutablePointer<UInt8>? = nil
        var length = 0
        guard OSSL_ENCODER_to_data(self.pointer, &data, &length) == 1, let data else {
            throw CryptoError.openSSL(.internalError, "OSSL_ENCODER_to_data failed")
        }
        defer { auth_crypto_clear_free(data, length) }
        return Array(UnsafeBufferPointer(start: data, count: length))
    }
}

/// An `OSSL_DECODER_CTX` that decodes one key.
final class OSSLDecoderContext {
    private let pointer: OpaquePointer
    /// Where the decoder stores the key it makes. The context keeps this address, so it must be a
    /// stable heap slot (an `&property` argument is only valid during the call).
    private let keySlot: UnsafeMutablePointer<OpaquePointer?>

    /// The names are literals because the context keeps pointers to them (not copies) and reads
    /// them again while decoding.
    init(
        inputType: StaticString,
        inputStructure: StaticString,
        keyType: StaticString,
        selection: Int32
    ) throws(CryptoError) {
        let keySlot = UnsafeMutablePointer<OpaquePointer?>.allocate(capacity: 1)
        keySlot.initialize(to: nil)
        guard
            let pointer = OSSL_DECODER_CTX_new_for_pkey(
                keySlot,
                staticCString(inputType),
                staticCString(inputStructure),
                staticCString(keyType),
                selection,
                nil,
                nil
            )
        else {
            keySlot.deallocate()
            throw CryptoError.openSSL(
                .internalError,
                "OSSL_DECODER_CTX_new_for_pkey(\(inputType)/\(inputStructure)/\(keyType)) failed"
            )
        }
        self.pointer = pointer
        self.keySlot = keySlot
        guard OSSL_DECODER_CTX_get_num_decoders(pointer) > 0 else {
            throw CryptoError.openSSL(
                .internalError,
                "no OpenSSL decoder for \(inputType)/\(inputStructure)/\(keyType)"
            )
        }
    }

    deinit {
        OSSL_DECODER_CTX_free(self.pointer)
        if let key = self.keySlot.pointee { EVP_PKEY_free(key) }
        self.keySlot.deallocate()
    }

    /// Decodes `bytes`, which must be consumed entirely.
    func decode(_ bytes: [UInt8], failure: CryptoError.Code, message: String) throws(CryptoError) -> EVPPKey {
        let decoded = bytes.withNonNullBytes { base, count in
            var cursor: UnsafePointer<UInt8>? = base
            var remaining = count
            let ok = OSSL_DECODER_from_data(self.pointer, &cursor, &remaining)
            return ok == 1 && remaining == 0
        }
        guard decoded, let key = self.keySlot.pointee else {
            throw CryptoError.openSSL(failure, message)
        }
        self.keySlot.pointee = nil
        return EVPPKey(taking: key)
    }
}

// MARK: - Values

/// A `BIGNUM`, cleared before it is freed (it may hold a private scalar).
final class BigNumber {
    let pointer: OpaquePointer

    /// Takes ownership of `pointer`.
    init(taking pointer: OpaquePointer) {
        self.pointer = pointer
    }

    /// Parses big-endian unsigned bytes.
    init(bigEndian bytes: [UInt8]) throws(CryptoError) {
        let pointer = bytes.withNonNullBytes { base, count in BN_bin2bn(base, Int32(count), nil) }
        guard let pointer else {
            throw CryptoError.openSSL(.internalError, "BN_bin2bn failed")
        }
        self.pointer = pointer
    }

    deinit { BN_clear_free(self.pointer) }

    var bitCount: Int { Int(BN_num_bits(self.pointer)) }

    var isOdd: Bool { BN_is_odd(self.pointer) == 1 }

    /// Big-endian bytes, left-padded with zeros to `width`.
    func bigEndianBytes(width: Int) throws(CryptoError) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: width)
        guard BN_bn2binpad(self.pointer, &out, Int32(width)) == Int32(width) else {
            throw CryptoError.openSSL(.internalError, "BN_bn2binpad: value wider than \(width) bytes")
        }
        return out
    }

    /// Minimal big-endian bytes (no leading zero; one zero byte for the value zero).
    func bigEndianBytes() throws(CryptoError) -> [UInt8] {
        let width = max(1, (self.bitCount + 7) / 8)
        return try self.bigEndianBytes(width: width)
    }
}

/// An `OSSL_PARAM_BLD`, turned into ``OSSLParams`` with ``build()``.
///
/// Keys are `StaticString`s because the built `OSSL_PARAM` array keeps pointing at the key
/// strings (they are not copied); a static literal lives forever. Values are copied by
/// `OSSL_PARAM_BLD_to_param`, so they only have to live until ``build()`` returns: this class
/// keeps them alive until then and wipes its copies afterwards (they may be private scalars).
final class OSSLParamBuilder {
    private let pointer: OpaquePointer
    private var retainedNumbers: [BigNumber] = []
    private var retainedBuffers: [UnsafeMutableBufferPointer<UInt8>] = []

    init() throws(CryptoError) {
        guard let pointer = OSSL_PARAM_BLD_new() else {
            throw CryptoError.openSSL(.internalError, "OSSL_PARAM_BLD_new failed")
        }
        self.pointer = pointer
    }

    deinit {
        self.releaseBuffers()
        OSSL_PARAM_BLD_free(self.pointer)
    }

    func pushUTF8String(_ key: StaticString, _ value: String) throws(CryptoError) {
        let buffer = self.keepAlive(Array(value.utf8) + [0])
        let ok = buffer.withMemoryRebound(to: CChar.self) { chars in
            OSSL_PARAM_BLD_push_utf8_string(self.pointer, Self.cString(key), chars.baseAddress, chars.count - 1)
        }
        guard ok == 1 else { throw CryptoError.openSSL(.internalError, "OSSL_PARAM_BLD_push_utf8_string failed") }
    }

    func pushOctetString(_ key: StaticString, _ value: [UInt8]) throws(CryptoError) {
        let buffer = self.keepAlive(value.isEmpty ? [0] : value)
        let ok = OSSL_PARAM_BLD_push_octet_string(self.pointer, Self.cString(key), buffer.baseAddress, value.count)
        guard ok == 1 else { throw CryptoError.openSSL(.internalError, "OSSL_PARAM_BLD_push_octet_string failed") }
    }

    func pushBigNumber(_ key: StaticString, _ value: BigNumber) throws(CryptoError) {
        self.retainedNumbers.append(value)
        guard OSSL_PARAM_BLD_push_BN(self.pointer, Self.cString(key), value.pointer) == 1 else {
            throw CryptoError.openSSL(.internalError, "OSSL_PARAM_BLD_push_BN failed")
        }
    }

    func build() throws(CryptoError) -> OSSLParams {
        defer {
            self.releaseBuffers()
            self.retainedNumbers.removeAll()
        }
        guard let params = OSSL_PARAM_BLD_to_param(self.pointer) else {
            throw CryptoError.openSSL(.internalError, "OSSL_PARAM_BLD_to_param failed")
        }
        return OSSLParams(taking: params)
    }

    private func keepAlive(_ bytes: [UInt8]) -> UnsafeMutableBufferPointer<UInt8> {
        let buffer = UnsafeMutableBufferPointer<UInt8>.allocate(capacity: bytes.count)
        _ = buffer.initialize(from: bytes)
        self.retainedBuffers.append(buffer)
        return buffer
    }

    private func releaseBuffers() {
        for buffer in self.retainedBuffers {
            OPENSSL_cleanse(buffer.baseAddress, buffer.count)
            buffer.deallocate()
        }
        self.retainedBuffers.removeAll()
    }

    private static func cString(_ key: StaticString) -> UnsafePointer<CChar> {
        staticCString(key)
    }
}

/// An `OSSL_PARAM` array made by ``OSSLParamBuilder``.
final class OSSLParams {
    let pointer: UnsafeMutablePointer<OSSL_PARAM>

    init(taking pointer: UnsafeMutablePointer<OSSL_PARAM>) {
        self.pointer = pointer
    }

    deinit { OSSL_PARAM_free(self.pointer) }
}

// MARK: - Byte helpers

extension Array where Element == UInt8 {
    /// Calls `body` with a pointer that is never null, even for an empty array: several OpenSSL
    /// functions give a null pointer a special meaning ("keep the previous key", "check the
    /// parameters only") that an empty input must not trigger.
    @inline(__always)
    func withNonNullBytes<R, E: Error>(_ body: (UnsafePointer<UInt8>, Int) throws(E) -> R) throws(E) -> R {
        if self.isEmpty {
            var zero: UInt8 = 0
            return try withUnsafePointer(to: &zero) { (pointer) throws(E) -> R in try body(pointer, 0) }
        }
        return try self.withUnsafeBufferPointer { (buffer) throws(E) -> R in try body(buffer.baseAddress!, buffer.count)
        }
    }
}

/// A pointer to the NUL-terminated bytes of a string literal, valid for the life of the process.
///
/// `OSSL_PARAM`s keep pointers to their key names; a Swift `String` passed to a `const char *`
/// parameter is a temporary that dies when the call returns, a literal does not.
func staticCString(_ literal: StaticString) -> UnsafePointer<CChar> {
    precondition(literal.hasPointerRepresentation, "OpenSSL parameter names are ASCII literals")
    return UnsafeRawPointer(literal.utf8Start).assumingMemoryBound(to: CChar.self)
}

/// Overwrites `bytes` with zeros in a way the optimiser keeps (`OPENSSL_cleanse`).
func secureZero(_ bytes: inout [UInt8]) {
    bytes.withUnsafeMutableBytes { raw in
        if let base = raw.baseAddress { OPENSSL_cleanse(base, raw.count) }
    }
}
