internal import COpenSSL

/// AES-256-GCM authenticated encryption (NIST SP 800-38D) with 96-bit nonces and 128-bit tags.
///
/// ``seal(_:key:aad:)`` draws a random nonce and returns `nonce ‖ ciphertext ‖ tag`; with random
/// nonces, encrypt at most 2^32 messages under one key (SP 800-38D §8.3), then rotate the key.
public enum AESGCM {
    /// Key length in bytes (32: AES-256).
    public static let keyByteCount = 32
    /// Nonce length in bytes (12).
    public static let nonceByteCount = 12
    /// Tag length in bytes (16).
    public static let tagByteCount = 16

    /// Encrypts `plaintext` under `key` with a fresh random nonce, authenticating `aad` too.
    ///
    /// - Returns: `nonce (12) ‖ ciphertext (plaintext.count) ‖ tag (16)`.
    /// - Throws: ``CryptoError/Code/invalidArgument`` when `key` is not 32 bytes.
    public static func seal(_ plaintext: [UInt8], key: [UInt8], aad: [UInt8] = []) throws(CryptoError) -> [UInt8] {
        let nonce = SecureRandom.bytes(count: self.nonceByteCount)
        let (ciphertext, tag) = try self.seal(plaintext, key: key, nonce: nonce, aad: aad)
        return nonce + ciphertext + tag
    }

    /// Decrypts the output of ``seal(_:key:aad:)``.
    ///
    /// - Throws: ``CryptoError/Code/authenticationFailure`` when anything (nonce, ciphertext, tag,
    ///   `aad`, key) was altered, or the input is shorter than nonce plus tag;
    ///   ``CryptoError/Code/invalidArgument`` when `key` is not 32 bytes.
    public static func open(_ sealed: [UInt8], key: [UInt8], aad: [UInt8] = []) throws(CryptoError) -> [UInt8] {
        guard sealed.count >= self.nonceByteCount + self.tagByteCount else {
            throw CryptoError(code: .authenticationFailure, message: "sealed box shorter than nonce and tag")
        }
        let nonce = Array(sealed[0..<self.nonceByteCount])
        let ciphertext = Array(sealed[self.nonceByteCount..<(sealed.count - self.tagByteCount)])
        let tag = Array(sealed[(sealed.count - self.tagByteCount)...])
        return try self.open(ciphertext: ciphertext, tag: tag, key: key, nonce: nonce, aad: aad)
    }

    /// Encrypts with a caller-chosen nonce. **A nonce must never repeat under one key**: reuse
    /// reveals the XOR of plaintexts and lets an attacker forge tags. Meant for test vectors and
    /// protocols with counter nonces; prefer ``seal(_:key:aad:)``.
    ///
    /// - Throws: ``CryptoError/Code/invalidArgument`` when `key` is not 32 bytes or `nonce` not 12.
    public static func seal(
        _ plaintext: [UInt8],
        key: [UInt8],
        nonce: [UInt8],
        aad: [UInt8] = []
    ) throws(CryptoError) -> (ciphertext: [UInt8], tag: [UInt8]) {
        try self.checkSizes(key: key, nonce: nonce)
        let context = try EVPCipherContext()
        guard Self.initialize(context, encrypt: true, key: key, nonce: nonce) else {
            throw CryptoError.openSSL(.internalError, "EVP_CipherInit_ex2(AES-256-GCM, encrypt) failed")
        }
        var tag = [UInt8](repeating: 0, count: self.tagByteCount)
        var ciphertext = [UInt8](repeating: 0, count: plaintext.count)
        var ok = Self.authenticate(context, aad: aad) && Self.transform(context, plaintext, into: &ciphertext)
        if ok {
            var finalLength: Int32 = 0
            var scratch = [UInt8](repeating: 0, count: 16)
            ok = EVP_CipherFinal_ex(context.pointer, &scratch, &finalLength) == 1 && finalLength == 0
        }
        if ok {
            ok = EVP_CIPHER_CTX_ctrl(context.pointer, EVP_CTRL_AEAD_GET_TAG, Int32(self.tagByteCount), &tag) == 1
        }
        guard ok else {
            throw CryptoError.openSSL(.internalError, "AES-256-GCM encryption failed")
        }
        return (ciphertext, tag)
    }

    /// Decrypts and authenticates `ciphertext` with an explicit nonce and tag.
    ///
    /// - Throws: ``CryptoError/Code/authenticationFailure`` when the tag does not verify (no
    ///   plaintext is returned); ``CryptoError/Code/invalidArgument`` for a key other than 32
    ///   bytes or a nonce other than 12.
    public static func open(
        ciphertext: [UInt8],
        tag: [UInt8],
        key: [UInt8],
        nonce: [UInt8],
        aad: [UInt8] = []
    ) throws(CryptoError) -> [UInt8] {
        try self.checkSizes(key: key, nonce: nonce)
        guard tag.count == self.tagByteCount else {
            throw CryptoError(code: .authenticationFailure, message: "GCM tag must be 16 bytes")
        }
        let context = try EVPCipherContext()
        guard Self.initialize(context, encrypt: false, key: key, nonce: nonce) else {
            throw CryptoError.openSSL(.internalError, "EVP_CipherInit_ex2(AES-256-GCM, decrypt) failed")
        }
        var plaintext = [UInt8](repeating: 0, count: ciphertext.count)
        let ok = Self.authenticate(context, aad: aad) && Self.transform(context, ciphertext, into: &plaintext)
        guard ok else {
            secureZero(&plaintext)
            throw CryptoError.openSSL(.internalError, "AES-256-GCM decryption failed")
        }
        var expectedTag = tag
        var finalLength: Int32 = 0
        var scratch = [UInt8](repeating: 0, count: 16)
        guard EVP_CIPHER_CTX_ctrl(context.pointer, EVP_CTRL_AEAD_SET_TAG, Int32(self.tagByteCount), &expectedTag) == 1,
            EVP_CipherFinal_ex(context.pointer, &scratch, &finalLength) == 1
        else {
            // Unauthenticated plaintext must not escape, not even in memory we free.
            secureZero(&plaintext)
            OpenSSLErrorQueue.clear()
            throw CryptoError(code: .authenticationFailure, message: "AES-256-GCM authentication failed")
        }
        return plaintext
    }

    private static func checkSizes(key: [UInt8], nonce: [UInt8]) throws(CryptoError) {
        guard key.count == self.keyByteCount else {
            throw CryptoError(code: .invalidArgument, message: "AES-256-GCM key must be 32 bytes, got \(key.count)")
        }
        guard nonce.count == self.nonceByteCount else {
            throw CryptoError(code: .invalidArgument, message: "AES-256-GCM nonce must be 12 bytes, got \(nonce.count)")
        }
    }

    /// Inputs are passed to OpenSSL as `int` lengths.
    private static func checkedLength(_ count: Int) -> Bool {
        count <= Int(Int32.max) - 32
    }

    /// Sets up AES-256-GCM in one direction: the `EVP_Cipher*` calls that follow encrypt or
    /// decrypt as chosen here.
    private static func initialize(_ context: EVPCipherContext, encrypt: Bool, key: [UInt8], nonce: [UInt8]) -> Bool {
        // 12 bytes is OpenSSL's default GCM IV length, so no IV-length parameter is needed.
        key.withUnsafeBufferPointer { keyBytes in
            nonce.withUnsafeBufferPointer { nonceBytes in
                EVP_CipherInit_ex2(
                    context.pointer,
                    EVPCipher.aes256GCM.pointer,
                    keyBytes.baseAddress,
                    nonceBytes.baseAddress,
                    encrypt ? 1 : 0,
                    nil
                ) == 1
            }
        }
    }

    /// Feeds the additional authenticated data (nothing comes out for it).
    private static func authenticate(_ context: EVPCipherContext, aad: [UInt8]) -> Bool {
        guard !aad.isEmpty else { return true }
        guard self.checkedLength(aad.count) else { return false }
        var outLength: Int32 = 0
        return aad.withUnsafeBufferPointer { bytes in
            EVP_CipherUpdate(context.pointer, nil, &outLength, bytes.baseAddress, Int32(bytes.count)) == 1
        }
    }

    /// Encrypts or decrypts (as the context was initialized) all of `input` into `output`, which
    /// has `input`'s size: GCM is a stream mode, so every byte comes out of the update.
    private static func transform(_ context: EVPCipherContext, _ input: [UInt8], into output: inout [UInt8]) -> Bool {
        guard !input.isEmpty else { return true }
        guard self.checkedLength(input.count) else { return false }
        var outLength: Int32 = 0
        let result = input.withUnsafeBufferPointer { inputBytes in
            output.withUnsafeMutableBufferPointer { outputBytes in
                EVP_CipherUpdate(
                    context.pointer,
                    outputBytes.baseAddress,
                    &outLength,
                    inputBytes.baseAddress,
                    Int32(inputBytes.count)
                )
            }
        }
        return result == 1 && Int(outLength) == input.count
    }
}
