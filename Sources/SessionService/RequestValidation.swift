import AuthProtobuf
import AuthRPC
import AuthServiceCore
import AuthText

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Limits on everything a caller controls, and the checks that enforce them. A request that
/// breaks any of them fails with INVALID_ARGUMENT (`invalid_argument`) listing every bad field.
public enum SessionLimits {
    /// User ids: 1-128 bytes of printable ASCII without spaces (what identity issues).
    public static let maxUserIDBytes = 128
    /// At most this many `amr` values per session.
    public static let maxAMRValues = 8
    public static let maxDevicePlatformBytes = 32
    public static let maxDeviceNameBytes = 128
    public static let maxUserAgentBytes = 512
    /// Revocation reasons: 1-64 of `a-z 0-9 _`.
    public static let maxReasonBytes = 64

    /// The `amr` values a session may record: ours (how this backend signs people in; `recovery`
    /// beside `otp_email` for the Supabase door's password recovery) and the RFC 8176 values a
    /// client or a later step-up might add.
    public static let authenticationMethods: Set<String> = [
        "otp_sms", "otp_email", "pwd", "oidc_apple", "oidc_google", "oidc_facebook", "recovery",
        "otp", "sms", "mfa", "face", "fpt", "pin", "hwk", "swk", "user",
    ]
}

/// Collects field violations.
/// Session's field rules, on the validator every service shares.
extension FieldValidator {
    func check() throws(SessionError) {
        try check { violations in
            SessionError(
                .invalidArgument,
                "The request has invalid fields: \(violations.map(\.field).joined(separator: ", ")).",
                fieldViolations: violations
            )
        }
    }

    mutating func userID(_ value: String, field: String = "user_id") {
        if value.isEmpty {
            fail(field, "required", "A user id is required.")
        } else if value.utf8.count > SessionLimits.maxUserIDBytes {
            fail(field, "too_long", "At most \(SessionLimits.maxUserIDBytes) bytes.")
        } else if !value.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) {
            fail(field, "invalid_value", "Printable ASCII without spaces only.")
        }
    }

    mutating func amr(_ values: [String]) {
        if values.isEmpty {
            fail("amr", "required", "At least one authentication method is required.")
        } else if values.count > SessionLimits.maxAMRValues {
            fail("amr", "too_many", "At most \(SessionLimits.maxAMRValues) values.")
        } else if let unknown = values.first(where: { !SessionLimits.authenticationMethods.contains($0) }) {
            fail("amr", "unknown_value", "Unknown authentication method \"\(unknown.prefix(32))\".")
        } else if Set(values).count != values.count {
            fail("amr", "duplicate", "A method is listed twice.")
        }
    }

    /// Free text: bounded, valid UTF-8 (guaranteed by Swift strings) without control characters.
    mutating func text(_ value: String, field: String, maxBytes: Int) {
        if value.utf8.count > maxBytes {
            fail(field, "too_long", "At most \(maxBytes) bytes.")
        } else if value.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) {
            fail(field, "invalid_value", "Control characters are not allowed.")
        }
    }

    mutating func sessionID(_ value: String, field: String = "session_id", required: Bool = true) -> UUID? {
        uuid(value, field: field, name: "a session id", required: required)
    }

    /// A revocation reason; empty means `unspecified`.
    mutating func reason(_ value: String) -> String {
        guard !value.isEmpty else { return "unspecified" }
        guard value.utf8.count <= SessionLimits.maxReasonBytes,
            value.utf8.allSatisfy({ ($0 >= 0x61 && $0 <= 0x7A) || ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x5F })
        else {
            fail("reason", "invalid_value", "1-\(SessionLimits.maxReasonBytes) characters of a-z, 0-9, _.")
            return ""
        }
        return value
    }

}

/// A validated Issue request.
struct IssueInput: Sendable {
    var userID: String
    var amr: [String]
    var device: Auth_Session_V1_Device
    var clientIP: String
    /// The Supabase format's email and phone (nil: our format).
    var supabase: (email: String, phone: String)?

    init(validating request: Auth_Session_V1_IssueRequest, context: ServerContext?) throws(SessionError) {
        var validator = FieldValidator()
        validator.userID(request.userID)
        validator.amr(request.amr)
        let device = request.device ?? Auth_Session_V1_Device()
        validator.text(device.platform, field: "device.platform", maxBytes: SessionLimits.maxDevicePlatformBytes)
        validator.text(device.name, field: "device.name", maxBytes: SessionLimits.maxDeviceNameBytes)
        validator.text(device.userAgent, field: "device.user_agent", maxBytes: SessionLimits.maxUserAgentBytes)
        let clientIP = validator.clientIP(request.clientIP, context: context)
        switch request.tokenFormat {
        case .standard:
            if !request.email.isEmpty || !request.phone.isEmpty {
                validator.fail("token_format", "invalid_value", "email and phone are for the Supabase format.")
            }
        case .supabase:
            validator.text(request.email, field: "email", maxBytes: 320)
            validator.text(request.phone, field: "phone", maxBytes: 32)
        default:
            validator.fail("token_format", "invalid_value", "ACCESS_TOKEN_FORMAT_STANDARD or _SUPABASE.")
        }
        try validator.check()
        self.supabase = request.tokenFormat == .supabase ? (request.email, request.phone) : nil
        self.userID = request.userID
        self.amr = request.amr
        self.device = device
        self.clientIP = clientIP
    }
}
