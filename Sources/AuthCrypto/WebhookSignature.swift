/// The signature otp-dispatch's `webhook` provider puts on each request it makes
/// (docs/otp.md): header `X-Auth-Signature`, value `sha256=` and the lower-case hex of the
/// HMAC-SHA256 of the exact request body, the key being the UTF-8 bytes of
/// `AUTH_OTP_WEBHOOK_SECRET`. One definition for the sender and for receivers written in Swift
/// (the sign-in benchmark's).
public enum WebhookSignature {
    /// The request header that carries the signature.
    public static let headerName = "X-Auth-Signature"

    /// The header's value for `body`, signed with `signer` (an ``HMACSHA256`` keyed with the
    /// secret's UTF-8 bytes).
    public static func value(for body: [UInt8], signer: HMACSHA256) -> String {
        prefix + Hex.lowercase(signer.authenticationCode(for: body))
    }

    /// Whether `header` (the request's header value, if any) is `body`'s signature under
    /// `signer`, compared in constant time.
    public static func isValid(_ header: String?, for body: [UInt8], signer: HMACSHA256) -> Bool {
        guard let header else { return false }
        return ConstantTime.equals(Array(header.utf8), Array(value(for: body, signer: signer).utf8))
    }

    private static let prefix = "sha256="
}
