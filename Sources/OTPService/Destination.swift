import AuthText
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import AuthProtobuf

/// How a code travels.
public enum Channel: String, Sendable, Hashable {
    case sms
    case email

    var proto: Auth_Otp_V1_Channel {
        switch self {
        case .sms: .sms
        case .email: .email
        }
    }
}

/// Where a code goes: an E.164 phone number (SMS) or an email address (email), normalized.
public struct Destination: Sendable, Hashable {
    public let channel: Channel
    /// `+919999999999` or `asha@example.com` (the domain lower-cased; the local part as given,
    /// lower-cased too, since providers treat it case-insensitively in practice).
    public let normalized: String
    /// SMS: the country calling code (`91`); email: empty.
    public let callingCode: String

    /// Longest email address accepted (RFC 5321 path limit).
    public static let maxEmailBytes = 254

    /// Parses a phone number in E.164 form (`+` then 8–15 digits, no leading zero; spaces,
    /// dashes, dots and parentheses between digits are ignored) or an email address; nil for
    /// anything else.
    public init?(parsing text: String) {
        let trimmed = text.trimmingWhitespace()
        if trimmed.hasPrefix("+") {
            var digits = ""
            for character in trimmed.dropFirst() {
                if character.isASCII, character.isNumber {
                    digits.append(character)
                } else if " -.()".contains(character) {
                    continue
                } else {
                    return nil
                }
            }
            guard (8...15).contains(digits.count), digits.first != "0" else { return nil }
            guard let code = Self.callingCode(of: digits) else { return nil }
            self.channel = .sms
            self.normalized = "+" + digits
            self.callingCode = code
            return
        }
        guard let email = Self.normalizedEmail(trimmed) else { return nil }
        self.channel = .email
        self.normalized = email
        self.callingCode = ""
    }

    /// What a person may be shown: the calling code and last 4 digits (`+91******9999`), or
    /// the first letter and the domain (`a***@example.com`).
    public var masked: String {
        switch channel {
        case .sms: ContactMask.phone(digits: String(normalized.dropFirst()), callingCode: callingCode)
        case .email: ContactMask.email(normalized)
        }
    }

    static func normalizedEmail(_ text: String) -> String? {
        guard text.utf8.count <= maxEmailBytes, let at = text.lastIndex(of: "@") else { return nil }
        let local = text[..<at]
        let domain = text[text.index(after: at)...]
        guard (1...64).contains(local.utf8.count), !domain.isEmpty else { return nil }
        let localAllowed = local.unicodeScalars.allSatisfy { scalar in
            scalar.value > 0x20 && scalar.value < 0x7F && !"\"(),:;<>@[\\]".unicodeScalars.contains(scalar)
        }
        guard localAllowed, !local.hasPrefix("."), !local.hasSuffix("."), !local.contains("..") else { return nil }
        let labels = domain.split(separator: ".", omittingEmptySubsequences: false)
        guard labels.count >= 2 else { return nil }
        for label in labels {
            guard (1...63).contains(label.utf8.count), !label.hasPrefix("-"), !label.hasSuffix("-"),
                label.unicodeScalars.allSatisfy({ $0.isASCIIAlphanumeric || $0 == "-" })
            else { return nil }
        }
        return text.lowercased()
    }

    /// The ITU-T E.164 country calling code at the start of `digits`: the assigned one- and
    /// two-digit codes, else the first three digits.
    static func callingCode(of digits: String) -> String? {
        ContactMask.callingCode(of: digits)
    }
}

extension Unicode.Scalar {
    fileprivate var isASCIIAlphanumeric: Bool {
        (value >= 0x30 && value <= 0x39) || (value >= 0x41 && value <= 0x5A) || (value >= 0x61 && value <= 0x7A)
    }
}

/// What a code is for.
public enum Purpose: String, Sendable {
    case login
    case signup
    case verify
    case passwordReset = "password_reset"

    init?(_ proto: Auth_Otp_V1_Purpose) {
        switch proto {
        case .login: self = .login
        case .signup: self = .signup
        case .verify: self = .verify
        case .passwordReset: self = .passwordReset
        default: return nil
        }
    }

    var proto: Auth_Otp_V1_Purpose {
        switch self {
        case .login: .login
        case .signup: .signup
        case .verify: .verify
        case .passwordReset: .passwordReset
        }
    }
}
