import AuthRPC
import AuthUnicode

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The one place that decides whether a new password is acceptable (sign-up, reset, change).
///
/// Every password, new or presented at sign-in, is first NFKC-normalised (so the same password
/// typed on different keyboards hashes the same) and must be at most ``maxLength`` characters,
/// checked before any hashing; it is never truncated. A new password must also have at least
/// ``PasswordPolicyMode/minimumLength`` characters and not be in ``PasswordBlocklist``
/// (case-insensitively); in ``PasswordPolicyMode/composition`` mode (the seed apps' rule, seed
/// 002 §2.3: 8 characters) it needs an upper-case letter, a lower-case letter and a digit as
/// well. ``PasswordPolicyMode/nist`` is NIST SP 800-63B-4 for a single-factor password: 15
/// characters, blocklist, no composition rule.
public struct PasswordPolicy: Sendable {
    public static let maxLength = 128

    public var mode: PasswordPolicyMode
    let blocklist: PasswordBlocklist

    public init(mode: PasswordPolicyMode, blocklist: PasswordBlocklist) {
        self.mode = mode
        self.blocklist = blocklist
    }

    /// NFKC form of `password`, or nil when it is longer than ``maxLength`` characters before or
    /// after normalisation.
    public static func normalized(_ password: String) -> String? {
        // Refuse oversized input before spending anything on it (normalisation included).
        guard password.count <= maxLength else { return nil }
        let normalized = UnicodeNFKC.normalize(password)
        guard normalized.count <= maxLength else { return nil }
        return normalized
    }

    /// The violations of a new password (field `field`), each with a message the apps show.
    /// Empty when it is acceptable. Never includes the password.
    public func violations(of password: String, field: String = "password") -> [RPCError.FieldViolation] {
        func violation(_ reason: String, _ text: String) -> [RPCError.FieldViolation] {
            [RPCError.FieldViolation(field: field, reason: reason, description: text)]
        }
        if password.isEmpty { return violation("required", "Password is required.") }
        guard let normalized = Self.normalized(password) else {
            return violation("too_long", "Password must be at most \(Self.maxLength) characters.")
        }
        if normalized.count < mode.minimumLength {
            return violation("too_short", "Password must be at least \(mode.minimumLength) characters.")
        }
        if mode == .composition {
            let scalars = normalized.unicodeScalars
            let upper = scalars.contains { $0.properties.isUppercase }
            let lower = scalars.contains { $0.properties.isLowercase }
            let digit = scalars.contains { $0.properties.numericType == .decimal }
            if !(upper && lower && digit) {
                return violation(
                    "too_weak",
                    "Password must contain an uppercase letter, a lowercase letter and a number."
                )
            }
        }
        if blocklist.contains(normalized) {
            return violation("too_common", "This password is too common. Please choose another one.")
        }
        return []
    }
}

/// The most common passwords (at least 10,000, lower-cased), shipped as a resource of this module
/// (`PasswordBlocklist/common-passwords.txt`, made by scripts/identity/make-password-blocklist.py).
public struct PasswordBlocklist: Sendable {
    private let entries: Set<String>

    public var count: Int { entries.count }

    public init(entries: some Sequence<String>) {
        self.entries = Set(entries.map { $0.lowercased() })
    }

    /// The list shipped with the module (`PasswordBlocklist/common-passwords.txt`, embedded in
    /// the executable): one password a line.
    public static func bundled() throws -> PasswordBlocklist {
        guard let text = String(validating: PackageResources.common_passwords_txt, as: UTF8.self) else {
            throw IdentityError(.internal, "The embedded password blocklist is not UTF-8.")
        }
        return PasswordBlocklist(entries: text.split(separator: "\n").map(String.init).filter { !$0.isEmpty })
    }

    /// Whether `password` is on the list, ignoring case.
    public func contains(_ password: String) -> Bool {
        entries.contains(password.lowercased())
    }
}
