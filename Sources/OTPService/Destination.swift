import AuthProtobuf
import AuthText

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

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

/// Where a code goes: a phone number (SMS) or an email address (email), normalized by the rules
/// every service shares (AuthText's `PhoneNumber` and `EmailAddress`).
public struct Destination: Sendable, Hashable {
    public let channel: Channel
    /// `+919999999999` or `asha@example.com` (lower-cased).
    public let normalized: String
    /// SMS: the country calling code (`91`); email: empty.
    public let callingCode: String

    /// A phone number (anything starting with `+`) or an email address; nil when it breaks its
    /// rule.
    public init?(parsing text: String) {
        if text.hasPrefix("+") {
            guard let phone = PhoneNumber(text) else { return nil }
            self.init(phone)
        } else {
            guard let email = EmailAddress(text) else { return nil }
            self.init(email)
        }
    }

    public init(_ phone: PhoneNumber) {
        self.channel = .sms
        self.normalized = phone.e164
        self.callingCode = phone.callingCode
    }

    public init(_ email: EmailAddress) {
        self.channel = .email
        self.normalized = email.normalized
        self.callingCode = ""
    }

    /// A destination read back from a verification row: written normalized, so taken as it is
    /// (a rule made stricter later does not make a live verification unreadable).
    init(stored text: String) {
        if text.hasPrefix("+") {
            self.init(PhoneNumber(stored: text))
        } else {
            self.init(EmailAddress(stored: text))
        }
    }

    /// What a person may be shown: the calling code and last 4 digits (`+91******9999`), or
    /// the first letter and the domain (`a***@example.com`).
    public var masked: String {
        switch channel {
        case .sms: ContactMask.phone(digits: String(normalized.dropFirst()), callingCode: callingCode)
        case .email: ContactMask.email(normalized)
        }
    }
}

/// What a code is for.
public enum Purpose: String, Sendable {
    case login
    case signup
    case verify
    case passwordReset = "password_reset"
    case changeContact = "change_contact"
    /// A notice's (SendNotice): never pending, so no code is ever checked against it; not a
    /// purpose a caller can start.
    case contactChanged = "contact_changed"
    /// The notice that a sign-up named a contact an account has (SendNotice, like
    /// `contact_changed`).
    case signupAttempted = "signup_attempted"

    init?(_ proto: Auth_Otp_V1_Purpose) {
        switch proto {
        case .login: self = .login
        case .signup: self = .signup
        case .verify: self = .verify
        case .passwordReset: self = .passwordReset
        case .changeContact: self = .changeContact
        default: return nil
        }
    }

    var proto: Auth_Otp_V1_Purpose {
        switch self {
        case .login: .login
        case .signup: .signup
        case .verify: .verify
        case .passwordReset: .passwordReset
        case .changeContact: .changeContact
        case .contactChanged, .signupAttempted: .unspecified
        }
    }
}
