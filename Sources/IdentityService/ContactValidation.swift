import AuthRPC
import AuthServiceCore
import AuthText

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The rules for display names and photo URLs (seed 003 §C3). Phone numbers and email
/// addresses are AuthText's `PhoneNumber` and `EmailAddress`, the rules every service shares.
public enum ContactRules {
    public static let displayNameLength = 2...50
    public static let maxPhotoURLBytes = 2048

    /// Whether `name` has 2-50 characters, each a letter, a digit, a space, `-`, `_` or `.`.
    public static func isValidDisplayName(_ name: String) -> Bool {
        guard displayNameLength.contains(name.count) else { return false }
        return name.unicodeScalars.allSatisfy { scalar in
            scalar.properties.isAlphabetic || scalar.properties.numericType == .decimal
                || scalar == " " || scalar == "-" || scalar == "_" || scalar == "."
                || scalar.properties.generalCategory == .nonspacingMark
                || scalar.properties.generalCategory == .spacingMark
        } && !name.unicodeScalars.contains { $0.properties.generalCategory == .control }
    }

    /// A photo URL: empty (none), or an `https://` URL of at most 2048 bytes without spaces.
    public static func isValidPhotoURL(_ url: String) -> Bool {
        if url.isEmpty { return true }
        guard url.utf8.count <= maxPhotoURLBytes, url.lowercased().hasPrefix("https://"),
            url.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value < 0x7F }),
            let parsed = URL(string: url), parsed.host?.isEmpty == false
        else { return false }
        return true
    }

}

/// Identity's field rules (docs/identity.md, "Field violations"), on the validator every
/// service shares.
extension FieldValidator {
    /// Throws the violations: with one rule's own reason (`invalid_phone`, `invalid_email`) when
    /// that is the only violation, else `invalid_argument`.
    func check() throws(IdentityError) {
        try check { violations in
            let first = violations[0]
            if violations.count == 1, first.reason == IdentityError.Code.invalidPhone.reason {
                return IdentityError(.invalidPhone, first.description, fieldViolations: violations)
            }
            if violations.count == 1, first.reason == IdentityError.Code.invalidEmail.reason {
                return IdentityError(.invalidEmail, first.description, fieldViolations: violations)
            }
            let message =
                violations.count == 1
                ? first.description
                : "Please correct: \(violations.map(\.field).joined(separator: ", "))."
            return IdentityError(.invalidArgument, message, fieldViolations: violations)
        }
    }

    /// Checks a new password (SignUp, ResetPassword, ChangePassword, ValidatePassword) against
    /// `policy`; returns its normalised form when the policy accepts it.
    @discardableResult
    mutating func newPassword(_ value: String, field: String = "password", policy: PasswordPolicy) -> String? {
        let found = policy.violations(of: value, field: field)
        for violation in found { fail(violation.field, violation.reason, violation.description) }
        return found.isEmpty ? PasswordPolicy.normalized(value) : nil
    }

    mutating func userID(_ value: String, field: String = "user_id") -> UUID? {
        uuid(value, field: field, name: "a user id")
    }

    mutating func phone(_ value: String, field: String = "phone") -> String? {
        if value.isEmpty {
            fail(field, "required", PhoneNumber.requiredMessage)
            return nil
        }
        guard let phone = PhoneNumber(value) else {
            fail(field, "invalid_phone", PhoneNumber.invalidMessage)
            return nil
        }
        return phone.e164
    }

    mutating func email(_ value: String, field: String = "email") -> String? {
        if value.isEmpty {
            fail(field, "required", EmailAddress.requiredMessage)
            return nil
        }
        guard let email = EmailAddress(value) else {
            fail(field, "invalid_email", EmailAddress.invalidMessage)
            return nil
        }
        return email.normalized
    }

    mutating func displayName(_ value: String, field: String = "display_name") {
        if value.isEmpty {
            fail(field, "required", "Display name is required.")
        } else if !ContactRules.isValidDisplayName(value) {
            fail(
                field,
                "invalid_value",
                "Display name must be 2-50 characters: letters, numbers, spaces and - _ . only."
            )
        }
    }

    mutating func photoURL(_ value: String, field: String = "photo_url") {
        if !ContactRules.isValidPhotoURL(value) {
            fail(field, "invalid_value", "The photo URL must be an https:// address of at most 2048 characters.")
        }
    }

    /// Exactly one of `phone` and `email`; returns the validated contact.
    mutating func contact(phone: String, email: String) -> Contact? {
        switch (phone.isEmpty, email.isEmpty) {
        case (false, true): return self.phone(phone).map(Contact.phone)
        case (true, false): return self.email(email).map(Contact.email)
        case (true, true):
            fail("phone", "required", "A phone number or an email address is required.")
            return nil
        case (false, false):
            fail("email", "invalid_value", "Give a phone number or an email address, not both.")
            return nil
        }
    }
}

/// A contact proved by a one-time code.
enum Contact: Sendable, Equatable {
    case phone(String)
    case email(String)

    var method: String {
        switch self {
        case .phone: "otp_sms"
        case .email: "otp_email"
        }
    }

    /// The normalized phone number or email address.
    var text: String {
        switch self {
        case .phone(let phone): phone
        case .email(let email): email
        }
    }
}
