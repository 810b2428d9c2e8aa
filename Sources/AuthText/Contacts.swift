/// A phone number in E.164 form: the one rule for phone numbers, used by the gateway, identity
/// (accounts) and otp-dispatch (SMS destinations), so that a number one service accepts is a
/// number every service accepts.
///
/// Accepted: `+`, then 8–15 digits whose first is not 0; for India (`+91`), exactly ten
/// national digits, the first 6–9 (seed 002 §2.3). Nothing else: no spaces, separators or
/// white space around it (the apps send `+919999999999` and format it only for display), so a
/// number has one spelling and one row.
public struct PhoneNumber: Hashable, Sendable, CustomStringConvertible {
    /// `+` and the digits: `+919999999999`. What is stored and compared.
    public let e164: String
    /// The ITU-T E.164 country calling code: `91`, `1`, `234` (``ContactMask/callingCode(of:)``).
    public let callingCode: String

    /// The answer's `message` for a number this type refuses.
    public static let invalidMessage = "Please enter a valid phone number."
    /// The answer's `message` when a required number is missing.
    public static let requiredMessage = "A phone number is required."
    /// Digits after the `+`.
    public static let digitCount = 8...15

    /// Parses `text` by the rule above; nil when it breaks it.
    public init?(_ text: some StringProtocol) {
        guard text.hasPrefix("+") else { return nil }
        let digits = String(text.dropFirst())
        guard Self.digitCount.contains(digits.utf8.count), digits.utf8.allSatisfy({ (0x30...0x39).contains($0) }),
            digits.first != "0",
            let code = ContactMask.callingCode(of: digits)
        else { return nil }
        if code == "91" {
            let national = digits.dropFirst(2)
            guard national.count == 10, let first = national.first, ("6"..."9").contains(first) else { return nil }
        }
        self.e164 = "+" + digits
        self.callingCode = code
    }

    /// A number read back from storage, where only numbers this type produced were written:
    /// taken as it is (a rule made stricter later does not make old rows unreadable).
    public init(stored e164: String) {
        self.e164 = e164
        self.callingCode = ContactMask.callingCode(of: String(e164.dropFirst())) ?? ""
    }

    /// The calling code and the last 4 digits: `+91******9999`.
    public var masked: String {
        ContactMask.phone(digits: String(e164.dropFirst()), callingCode: callingCode)
    }

    public var description: String { e164 }
}

/// An email address: the one rule for email addresses, used by the gateway, identity (accounts,
/// passwords, ID tokens' `email` claims) and otp-dispatch (email destinations).
///
/// Accepted: the apps' rule
/// `^[a-zA-Z0-9._%+-]+@[a-zA-Z0-9.-]+\.[a-zA-Z]{2,}$` (seed 003 §C3) within what mail can
/// carry (RFC 5321): at most 254 bytes, a local part of at most 64 bytes that neither starts
/// nor ends with a dot nor has two in a row, and domain labels of 1–63 characters that neither
/// start nor end with `-`. Compared and stored lower-cased.
public struct EmailAddress: Hashable, Sendable, CustomStringConvertible {
    /// Lower-cased: `asha@example.com`. What is stored and compared.
    public let normalized: String

    /// The answer's `message` for an address this type refuses.
    public static let invalidMessage = "Please enter a valid email address."
    /// The answer's `message` when a required address is missing.
    public static let requiredMessage = "Email is required."
    /// Longest address, in bytes (RFC 5321's path limit less its angle brackets).
    public static let maxBytes = 254
    /// Longest local part, in bytes.
    public static let maxLocalBytes = 64

    /// Parses `text` by the rule above; nil when it breaks it.
    public init?(_ text: some StringProtocol) {
        let bytes = Array(text.utf8)
        guard bytes.count <= Self.maxBytes else { return nil }
        let parts = bytes.split(separator: UInt8(ascii: "@"), omittingEmptySubsequences: false)
        guard parts.count == 2 else { return nil }
        let local = parts[0]
        let domain = parts[1]
        guard (1...Self.maxLocalBytes).contains(local.count),
            local.allSatisfy({ Self.isAlphanumeric($0) || Array("._%+-".utf8).contains($0) }),
            local.first != UInt8(ascii: "."), local.last != UInt8(ascii: "."),
            !zip(local, local.dropFirst()).contains(where: { $0 == UInt8(ascii: ".") && $1 == UInt8(ascii: ".") })
        else { return nil }
        let labels = domain.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard labels.count >= 2 else { return nil }
        for label in labels {
            guard (1...63).contains(label.count), label.first != UInt8(ascii: "-"), label.last != UInt8(ascii: "-"),
                label.allSatisfy({ Self.isAlphanumeric($0) || $0 == UInt8(ascii: "-") })
            else { return nil }
        }
        let topLevel = labels[labels.count - 1]
        guard topLevel.count >= 2, topLevel.allSatisfy(Self.isLetter) else { return nil }
        self.normalized = text.lowercased()
    }

    /// An address read back from storage, where only addresses this type produced were written:
    /// taken as it is.
    public init(stored normalized: String) {
        self.normalized = normalized
    }

    /// The first character and the domain: `a***@example.com`.
    public var masked: String { ContactMask.email(normalized) }

    public var description: String { normalized }

    private static func isLetter(_ byte: UInt8) -> Bool {
        (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte)
    }

    private static func isAlphanumeric(_ byte: UInt8) -> Bool {
        isLetter(byte) || (0x30...0x39).contains(byte)
    }
}
