internal import COpenSSL

/// The one error type of AuthCrypto.
///
/// Match on ``code``; ``message`` is for logs and is free of secrets. When the failure came
/// from OpenSSL, ``openSSLErrors`` holds the text of OpenSSL's error queue at that moment (the
/// queue is cleared after it is read, so it cannot leak into an unrelated later call).
public struct CryptoError: Error, CustomStringConvertible, Sendable {
    /// What went wrong, as an opaque and extensible set of values.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Wrapped: Hashable, Sendable {
            case invalidArgument
            case invalidKey
            case malformedPasswordHash
            case unsupportedParameters
            case malformedToken
            case algorithmMismatch
            case invalidSignature
            case authenticationFailure
            case internalError
        }

        private let wrapped: Wrapped

        private init(_ wrapped: Wrapped) {
            self.wrapped = wrapped
        }

        /// An argument has the wrong size or value (a 31-byte AES key, a 13-byte nonce...).
        public static let invalidArgument = Code(.invalidArgument)
        /// Key material could not be imported: wrong size, not on the curve, wrong `kty`/`crv`/`alg`,
        /// modulus too short.
        public static let invalidKey = Code(.invalidKey)
        /// A stored password hash (PHC string) is not in the expected format.
        public static let malformedPasswordHash = Code(.malformedPasswordHash)
        /// Parameters are well-formed but outside the accepted bounds (for example a scrypt cost
        /// that would allocate too much memory).
        public static let unsupportedParameters = Code(.unsupportedParameters)
        /// A JWS is not three base64url segments with a JSON-object header.
        public static let malformedToken = Code(.malformedToken)
        /// A JWS names an algorithm other than the one the caller expects, or the key does not fit it.
        public static let algorithmMismatch = Code(.algorithmMismatch)
        /// A signature does not verify.
        public static let invalidSignature = Code(.invalidSignature)
        /// Authenticated decryption failed: ciphertext, tag, nonce, AAD or key is wrong.
        public static let authenticationFailure = Code(.authenticationFailure)
        /// OpenSSL failed where it should not (allocation failure, provider missing).
        public static let internalError = Code(.internalError)

        public var description: String {
            switch self.wrapped {
            case .invalidArgument: "invalidArgument"
            case .invalidKey: "invalidKey"
            case .malformedPasswordHash: "malformedPasswordHash"
            case .unsupportedParameters: "unsupportedParameters"
            case .malformedToken: "malformedToken"
            case .algorithmMismatch: "algorithmMismatch"
            case .invalidSignature: "invalidSignature"
            case .authenticationFailure: "authenticationFailure"
            case .internalError: "internalError"
            }
        }
    }

    /// What went wrong.
    public var code: Code
    /// A human-readable explanation, free of secrets.
    public var message: String
    /// OpenSSL's error queue as text (`ERR_error_string_n`), oldest first; empty when OpenSSL
    /// was not involved or reported nothing.
    public var openSSLErrors: [String]

    /// Creates an error.
    public init(code: Code, message: String, openSSLErrors: [String] = []) {
        self.code = code
        self.message = message
        self.openSSLErrors = openSSLErrors
    }

    public var description: String {
        if self.openSSLErrors.isEmpty {
            return "CryptoError(\(self.code)): \(self.message)"
        }
        return "CryptoError(\(self.code)): \(self.message) [OpenSSL: \(self.openSSLErrors.joined(separator: "; "))]"
    }

    /// An error carrying OpenSSL's current error queue, which is then cleared.
    static func openSSL(_ code: Code, _ message: String) -> CryptoError {
        CryptoError(code: code, message: message, openSSLErrors: OpenSSLErrorQueue.drain())
    }
}

/// OpenSSL's per-thread error queue.
enum OpenSSLErrorQueue {
    /// Reads (at most 16 entries) and clears the calling thread's error queue.
    static func drain() -> [String] {
        var messages: [String] = []
        while true {
            let code = ERR_get_error()
            if code == 0 { break }
            if messages.count < 16 {
                var buffer = [CChar](repeating: 0, count: 256)
                ERR_error_string_n(code, &buffer, buffer.count)
                messages.append(
                    String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
                )
            }
        }
        ERR_clear_error()
        return messages
    }

    /// Drops whatever a failed check left in the queue (a failed verification is an answer, not
    /// an error, but OpenSSL still queues entries that would confuse the next reader).
    static func clear() {
        ERR_clear_error()
    }
}
