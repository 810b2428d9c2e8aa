/// HMAC-SHA-1 (RFC 2104), for verifying what others sign with it and nothing else: Twilio signs
/// its webhooks (`X-Twilio-Signature`) so. SHA-1's collisions do not break HMAC-SHA-1 as a MAC,
/// but nothing of ours is signed with it.
public enum HMACSHA1 {
    /// The MAC length in bytes (20).
    public static let byteCount = 20

    /// The 20-byte HMAC-SHA-1 of `message` under `key`.
    public static func authenticationCode(for message: [UInt8], key: [UInt8]) -> [UInt8] {
        do {
            return HMACSHA256.finish(
                try HMACSHA256.keyedContext(key: key, digest: "SHA1"),
                message,
                byteCount: byteCount
            )
        } catch {
            // Keying HMAC with a valid digest only fails when allocation fails.
            fatalError("HMAC-SHA-1 keying failed: \(error)")
        }
    }
}
