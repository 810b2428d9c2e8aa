/// PKCE (RFC 7636) as identity's browser sign-in and the gateway's confirmation links use it,
/// and the flow's random values.
public enum PKCE {
    /// 32 random bytes, base64url: a state, nonce, verifier or one-time code (256 bits).
    public static func randomToken() -> String {
        Base64URL.encode(SecureRandom.bytes(count: 32))
    }

    /// `S256`: base64url(SHA-256(verifier)).
    public static func challenge(of verifier: String) -> String {
        Base64URL.encode(SHA256.hash(verifier))
    }

    /// RFC 7636 §4.1: 43-128 characters of `[A-Za-z0-9-._~]`.
    public static func isVerifier(_ text: String) -> Bool {
        (43...128).contains(text.utf8.count) && text.utf8.allSatisfy(isUnreserved)
    }

    /// An S256 challenge: 43 characters of base64url.
    public static func isChallenge(_ text: String) -> Bool {
        text.utf8.count == 43
            && text.utf8.allSatisfy { isUnreserved($0) && $0 != UInt8(ascii: ".") && $0 != UInt8(ascii: "~") }
    }

    private static func isUnreserved(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
            UInt8(ascii: "~"):
            true
        default: false
        }
    }
}
