internal import COpenSSL
import Synchronization

/// HMAC-SHA-256 (RFC 2104) with a fixed key, through OpenSSL 3's `EVP_MAC`.
///
/// Creating the value keys an `EVP_MAC_CTX` once (hashing the key into the inner and outer
/// pads); every ``authenticationCode(for:)`` duplicates that pre-keyed template instead of
/// re-keying, which is about 2.5 times faster for short messages. Build one per key and share
/// it: it is safe to call from many threads at once.
public final class HMACSHA256: @unchecked Sendable {
    // @unchecked Sendable: `template` is keyed in `init` and never modified afterwards; the only
    // thing done with it is `EVP_MAC_CTX_dup`, and that happens under `lock` because OpenSSL does
    // not document concurrent reads of one context as safe. Each call then works on its own
    // duplicate, which no other thread sees. `deinit` runs when no other reference exists.
    private let template: EVPMACContext
    private let lock = Mutex<Void>(())

    /// The MAC length in bytes (32).
    public static let byteCount = 32

    /// Creates an HMAC-SHA-256 instance keyed with `key` (any length; RFC 2104 hashes keys
    /// longer than 64 bytes, and keys should be at least 32 random bytes).
    public init(key: [UInt8]) {
        do {
            self.template = try Self.keyedContext(key: key)
        } catch {
            // Keying HMAC with a valid digest only fails when allocation fails.
            fatalError("HMAC-SHA-256 keying failed: \(error)")
        }
    }

    /// The 32-byte HMAC-SHA-256 of `message`.
    public func authenticationCode(for message: [UInt8]) -> [UInt8] {
        let duplicate: OpaquePointer? = self.lock.withLock { _ in EVP_MAC_CTX_dup(self.template.pointer) }
        guard let duplicate else {
            fatalError("EVP_MAC_CTX_dup failed: \(OpenSSLErrorQueue.drain())")
        }
        let context = EVPMACContext(taking: duplicate)
        return Self.finish(context, message)
    }

    /// The 32-byte HMAC-SHA-256 of the UTF-8 encoding of `message`.
    public func authenticationCode(for message: String) -> [UInt8] {
        self.authenticationCode(for: Array(message.utf8))
    }

    /// Whether `mac` is the HMAC-SHA-256 of `message`, compared in constant time. A `mac` of
    /// any length other than 32 bytes is rejected (truncated MACs are not accepted).
    public func isValid(_ mac: [UInt8], for message: [UInt8]) -> Bool {
        ConstantTime.equals(self.authenticationCode(for: message), mac)
    }

    /// One-shot HMAC-SHA-256 of `message` under `key`. Prefer an ``HMACSHA256`` instance when
    /// the same key is used more than once.
    public static func authenticationCode(for message: [UInt8], key: [UInt8]) -> [UInt8] {
        do {
            return Self.finish(try Self.keyedContext(key: key), message)
        } catch {
            fatalError("HMAC-SHA-256 keying failed: \(error)")
        }
    }

    private static func keyedContext(key: [UInt8]) throws(CryptoError) -> EVPMACContext {
        let context = try EVPMACContext(algorithm: EVPMACAlgorithm.hmac)
        // OSSL_PARAM_construct_utf8_string keeps a pointer to the value (and the key name): both
        // must outlive EVP_MAC_init, so the whole call happens inside this scope.
        var digestName: [CChar] = Array("SHA256".utf8CString)
        let ok = digestName.withUnsafeMutableBufferPointer { name in
            var params = [
                OSSL_PARAM_construct_utf8_string(staticCString("digest"), name.baseAddress, 0),
                OSSL_PARAM_construct_end(),
            ]
            return key.withNonNullBytes { keyBytes, keyCount in
                params.withUnsafeMutableBufferPointer { EVP_MAC_init(context.pointer, keyBytes, keyCount, $0.baseAddress) }
            }
        }
        guard ok == 1 else {
            throw CryptoError.openSSL(.internalError, "EVP_MAC_init(HMAC-SHA256) failed")
        }
        return context
    }

    private static func finish(_ context: EVPMACContext, _ message: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: Self.byteCount)
        var length = 0
        let ok = message.withNonNullBytes { bytes, count in
            out.withUnsafeMutableBufferPointer { mac in
                EVP_MAC_update(context.pointer, bytes, count) == 1
                    && EVP_MAC_final(context.pointer, mac.baseAddress, &length, mac.count) == 1
            }
        }
        guard ok, length == Self.byteCount else {
            fatalError("HMAC-SHA-256 failed: \(OpenSSLErrorQueue.drain())")
        }
        return out
    }
}
