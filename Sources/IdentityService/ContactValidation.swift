import AuthRPC
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The rules for phone numbers, email addresses, display names and photo URLs (seed 002 §2.3,
/// seed 003 §C3).
public enum ContactRules {
    /// Longest accepted email address, in characters.
    public static let maxEmailLength = 255
    public static let displayNameLength = 2...50
    public static let maxPhotoURLBytes = 2048

    /// Whether `phone` is E.164: `+`, a country code not starting with 0, 8-15 digits in all;
    /// for India (+91), ten digits starting with 6-9.
    public static func isValidPhone(_ phone: String) -> Bool {
        let bytes = Array(phone.utf8)
        guard bytes.first == UInt8(ascii: "+") else { return false }
        let digits = bytes.dropFirst()
        guard (8...15).contains(digits.count), digits.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
            digits.first != UInt8(ascii: "0")
        else { return false }
        if digits.starts(with: Array("91".utf8)) {
            let national = digits.dropFirst(2)
            return national.count == 10 && (UInt8(ascii: "6")...UInt8(ascii: "9")).contains(national.first!)
        }
        return true
    }

    /// Whether `email` matches `^[a-zA-Z0-9._%+-]+@[a-zA-Z0-9.-]+\.[a-zA-Z]{2,}$` (seed 003 §C3)
    /// and has at most 255 characters.
    public static func isValidEmail(_ email: String) -> Bool {
        let bytes = Array(email.utf8)
        guard bytes.count <= maxEmailLength else { return false }
        func isAlpha(_ b: UInt8) -> Bool { (0x41...0x5A).contains(b) || (0x61...0x7A).contains(b) }
        func isDigit(_ b: UInt8) -> Bool { (0x30...0x39).contains(b) }
        let parts = bytes.split(separator: UInt8(ascii: "@"), omittingEmptySubsequences: false)
        guard parts.count == 2 else { return false }
        let local = parts[0]
        let domain = parts[1]
        guard !local.isEmpty, local.allSatisfy({ isAlpha($0) || isDigit($0) || Array("._%+-".utf8).contains($0) })
        else { return false }
        // The last dot splits the domain into a non-empty part of [a-zA-Z0-9.-] and two or more letters.
        guard let lastDot = domain.lastIndex(of: UInt8(ascii: ".")) else { return false }
        let head = domain[domain.startIndex..<lastDot]
        let tld = domain[domain.index(after: lastDot)...]
        return !head.isEmpty && head.allSatisfy({ isAlpha($0) || isDigit($0) || $0 == 0x2E || $0 == 0x2D })
            && tld.count >= 2 && tld.allSatisfy(isAlpha)
    }

    /// An email as stored: lower-cased (ASCII only, by the rule above).
    public static func normalizedEmail(_ email: String) -> String { email.lowercased() }

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

    static func isIPAddress(_ text: String) -> Bool {
        var v4 = in_addr()
        var v6 = in6_addr()
        return inet_pton(AF_INET, text, &v4) == 1 || inet_pton(AF_INET6, text, &v6) == 1
    }
}

/// Collects field violations of one request.
struct RequestValidator {
    private(set) var violations: [RPCError.FieldViolation] = []

    mutating func fail(_ field: String, _ reason: String, _ description: String) {
        violations.append(RPCError.FieldViolation(field: field, reason: reason, description: description))
    }

    /// Throws the violations: with one rule's own reason (`invalid_phone`, `invalid_email`) when
    /// that is the only violation, else `invalid_argument`.
    func check() throws(IdentityError) {
        guard let first = violations.first else { return }
        if violations.count == 1, first.reason == IdentityError.Code.invalidPhone.reason {
            throw IdentityError(.invalidPhone, first.description, fieldViolations: violations)
        }
        if violations.count == 1, first.reason == IdentityError.Code.invalidEmail.reason {
            throw IdentityError(.invalidEmail, first.description, fieldViolations: violations)
        }
        let message = violations.count == 1 ? first.description
            : "Please correct: \(violations.map(\.field).joined(separator: ", "))."
        throw IdentityError(.invalidArgument, message, fieldViolations: violations)
    }

    /// Checks a new password (SignUp, ResetPassword, ChangePassword, ValidatePassword) against
    /// `policy`; returns its normalised form when the policy accepts it.
    @discardableResult
    mutating func newPassword(_ value: String, field: String = "password", policy: PasswordPolicy) -> String? {
        let found = policy.violations(of: value, field: field)
        violations.append(contentsOf: found)
        return found.isEmpty ? PasswordPolicy.normalized(value) : nil
    }

    mutating func userID(_ value: String, field: String = "user_id") -> UUID? {
        if value.isEmpty {
            fail(field, "required", "A user id is required.")
            return nil
        }
        guard value.utf8.count == 36, let id = UUID(uuidString: value) else {
            fail(field, "invalid_value", "A user id is a UUID.")
            return nil
        }
        return id
    }

    mutating func phone(_ value: String, field: String = "phone") -> String? {
        if value.isEmpty {
            fail(field, "required", "A phone number is required.")
            return nil
        }
        guard ContactRules.isValidPhone(value) else {
            fail(field, "invalid_phone", "Please enter a valid phone number.")
            return nil
        }
        return value
    }

    mutating func email(_ value: String, field: String = "email") -> String? {
        if value.isEmpty {
            fail(field, "required", "Email is required.")
            return nil
        }
        guard ContactRules.isValidEmail(value) else {
            fail(field, "invalid_email", "Please enter a valid email address.")
            return nil
        }
        return ContactRules.normalizedEmail(value)
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

    mutating func clientIP(_ value: String, field: String = "client_ip") {
        guard !value.isEmpty else { return }
        guard value.utf8.count <= 45, ContactRules.isIPAddress(value) else {
            fail(field, "invalid_value", "An IPv4 or IPv6 address is expected.")
            return
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
}
