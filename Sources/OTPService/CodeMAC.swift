import AuthCrypto

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The one thing the database keeps of a code: `HMAC-SHA256(K, "auth.otp.v1 code" ‖ 0 ‖ id ‖ 0 ‖ code)`
/// with `K = HMAC-SHA256(AUTH_OTP_SECRET, "auth.otp.v1 code-mac")`. Binding the id means a
/// MAC cannot be moved to another verification; without the secret the 10^6 codes cannot be
/// tried against a stolen row.
struct CodeMAC: Sendable {
    private let hmac: HMACSHA256

    init(secret: [UInt8]) {
        let key = HMACSHA256.authenticationCode(for: Array("auth.otp.v1 code-mac".utf8), key: secret)
        self.hmac = HMACSHA256(key: key)
    }

    func mac(verificationID: UUID, code: String) -> [UInt8] {
        var message = Array("auth.otp.v1 code".utf8)
        message.append(0)
        message += Array(verificationID.uuidString.lowercased().utf8)
        message.append(0)
        message += Array(code.utf8)
        return hmac.authenticationCode(for: message)
    }

    /// Constant-time comparison of the presented code's MAC with the stored one.
    func matches(_ stored: [UInt8], verificationID: UUID, code: String) -> Bool {
        ConstantTime.equals(mac(verificationID: verificationID, code: code), stored)
    }

    /// A new verification id: 16 bytes from the CSPRNG as a version-4 UUID (122 random bits).
    static func newID() -> UUID {
        var bytes = SecureRandom.bytes(count: 16)
        bytes[6] = (bytes[6] & 0x0F) | 0x40
        bytes[8] = (bytes[8] & 0x3F) | 0x80
        return UUID(
            uuid: (
                bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7],
                bytes[8], bytes[9], bytes[10], bytes[11], bytes[12], bytes[13], bytes[14], bytes[15]
            )
        )
    }
}
