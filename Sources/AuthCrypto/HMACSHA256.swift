internal import COpenSSL
import Synchronization

/// HMAC-SHA-256 (RFC 2104) with a fixed key, through OpenSSL 3's `EVP_MAC`.
///
/// Creating the value keys an `EVP_MAC_CTX` once (hashing the key into the inner and outer pads).
/// Calls never re-key: each takes an idle pre-keyed context from a small pool (or duplicates the
/// keyed template with `EVP_MAC_CTX_dup` when the pool is empty), and after use resets it to the
/// keyed state (`EVP_MAC_init` with no key, which OpenSSL defines as "same key again") and parks
/// it for the next call. Build one instance per key and share it: it is safe to call from many
/// threads at once, and the lock is held only to take or return a context.
public final class HMACSHA256: Sendable {
    private struct State {
        /// Keyed once in `init`, never updated or finalised: only duplicated, under the lock.
        /// (`EVP_MAC_CTX_dup` takes a `const` source, which openssl-threads(7) treats as safe to
        /// share; holding the lock anyway costs nothing, as it is only needed when the pool is empty.)
        let template: EVPMACContext
        /// Keyed contexts ready for `EVP_MAC_update`.
        var idle: [EVPMACContext]
    }

    private let state: Mutex<State>

    /// The most idle contexts kept per instance (each is well under 1 KiB).
    private static let maximumIdleContexts = 16

    /// The MAC length in bytes (32).
    public static let byteCount = 32

    /// Creates an HMAC-SHA-256 instance keyed with `key` (any length; RFC 2104 hashes keys
    /// longer than 64 bytes, and keys should be at least 32 random bytes).
    public init(key: [UInt8]) {
        do {
            self.state = Mutex(State(template: try Self.keyedContext(key: key), idle: []))
        } catch {
            // Keying HMAC with a valid digest only fails when allocation fails.
            fatalError("HMAC-SHA-256 keying failed: \(error)")
        }
    }

    /// The 32-byte HMAC-SHA-256 of `message`.
    public func authenticationCode(for message: [UInt8]) -> [UInt8] {
        let context: EVPMACContext? = self.state.withLock { state in
            if let idle = state.idle.popLast() { return idle }
            return EVP_MAC_CTX_dup(state.template.pointer).map { EVPMACContext(taking: $0) }
        }
        guard let context else {
            fatalError("EVP_MAC_CTX_dup failed: \(OpenSSLErrorQueue.drain())")
        }
        let mac = Self.finish(context, message)
        // Back to the keyed state, ready for the next message; a context that cannot be reset is
        // simply freed.
        if Self.reinitializationKeepsKey, EVP_MAC_init(context.pointer, nil, 0, nil) == 1 {
            self.state.withLock { state in
                if state.idle.count < Self.maximumIdleContexts { state.idle.append(context) }
            }
        } else {
            OpenSSLErrorQueue.clear()
        }
        return mac
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

    /// Whether `EVP_MAC_init` with a null key restarts HMAC with the previous key. OpenSSL 3.0.3
    /// and later do (openssl/openssl#18100); 3.0.0–3.0.2 silently kept the finished state, which
    /// would give wrong MACs. Checked once against RFC 4231 test case 2; when it fails, contexts
    /// are not reused and every call duplicates the template instead.
    static let reinitializationKeepsKey: Bool = {
        guard let context = try? HMACSHA256.keyedContext(key: Array("Jefe".utf8)) else { return false }
        _ = HMACSHA256.finish(context, Array("a different message first".utf8))
        guard EVP_MAC_init(context.pointer, nil, 0, nil) == 1 else {
            OpenSSLErrorQueue.clear()
            return false
        }
        let mac = HMACSHA256.finish(context, Array("what do ya want for nothing?".utf8))
        return mac.prefix(4) == [0x5b, 0xdc, 0xc1, 0x46]
            && mac.suffix(4) == [0x64, 0xec, 0x38, 0x43]
    }()

    static func keyedContext(key: [UInt8], digest: String = "SHA256") throws(CryptoError) -> EVPMACContext {
        let context = try EVPMACContext(algorithm: EVPMACAlgorithm.hmac)
        // OSSL_PARAM_construct_utf8_string keeps a pointer to the value (and the key name): both
        // must outlive EVP_MAC_init, so the whole call happens inside this scope.
        var digestName: [CChar] = Array(digest.utf8CString)
        let ok = digestName.withUnsafeMutableBufferPointer { name in
            var params = [
                OSSL_PARAM_construct_utf8_string(staticCString("digest"), name.baseAddress, 0),
                OSSL_PARAM_construct_end(),
            ]
            return key.withNonNullBytes { keyBytes, keyCount in
                params.withUnsafeMutableBufferPointer {
                    EVP_MAC_init(context.pointer, keyBytes, keyCount, $0.baseAddress)
                }
            }
        }
        guard ok == 1 else {
            throw CryptoError.openSSL(.internalError, "EVP_MAC_init(HMAC-\(digest)) failed")
        }
        return context
    }

    static func finish(_ context: EVPMACContext, _ message: [UInt8], byteCount: Int = byteCount) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: byteCount)
        var length = 0
        let ok = message.withNonNullBytes { bytes, count in
            out.withUnsafeMutableBufferPointer { mac in
                EVP_MAC_update(context.pointer, bytes, count) == 1
                    && EVP_MAC_final(context.pointer, mac.baseAddress, &length, mac.count) == 1
            }
        }
        guard ok, length == byteCount else {
            fatalError("HMAC failed: \(OpenSSLErrorQueue.drain())")
        }
        return out
    }
}
