/// How a phone number or an email address is shown to people and written to logs: the country
/// calling code and the last 4 digits (`+91******9999`), or the first letter and the domain
/// (`a***@example.com`). The one masking rule: otp-dispatch's answers (`masked_destination`) and
/// the gateway's log of authentication decisions both use it.
public enum ContactMask {
    /// `contact` masked by its form: a `+` number as a phone, anything with `@` as an email,
    /// anything else as `***` (never echoed).
    public static func masked(_ contact: String) -> String {
        let text = contact.trimmingWhitespace()
        if text.hasPrefix("+") {
            let digits = String(text.dropFirst().filter { $0.isASCII && $0.isNumber })
            guard let code = callingCode(of: digits) else { return "***" }
            return phone(digits: digits, callingCode: code)
        }
        if text.contains("@") { return email(text.lowercased()) }
        return "***"
    }

    /// `+` and the calling code, `*` for each national digit but the last 4, and those 4.
    public static func phone(digits: String, callingCode: String) -> String {
        let national = digits.dropFirst(callingCode.count)
        let last = national.suffix(4)
        return "+" + callingCode + String(repeating: "*", count: max(0, national.count - last.count)) + last
    }

    /// The first character, `***`, and everything from the last `@`.
    public static func email(_ address: String) -> String {
        guard let at = address.lastIndex(of: "@") else { return "***" }
        let first = address.first.map(String.init) ?? ""
        return first + "***" + address[at...]
    }

    /// The country calling code of E.164 `digits` (after the `+`): 1 and 7 are one digit, the
    /// two-digit codes of ITU-T E.164 are two, every other is three; nil for a leading 0 or too
    /// few digits.
    public static func callingCode(of digits: String) -> String? {
        guard let first = digits.first, first != "0" else { return nil }
        if first == "1" || first == "7" { return String(first) }
        let two = String(digits.prefix(2))
        if twoDigitCodes.contains(two) { return two }
        guard digits.count >= 3 else { return nil }
        return String(digits.prefix(3))
    }

    static let twoDigitCodes: Set<String> = [
        "20", "27", "30", "31", "32", "33", "34", "36", "39", "40", "41", "43", "44", "45", "46", "47", "48", "49",
        "51", "52", "53", "54", "55", "56", "57", "58", "60", "61", "62", "63", "64", "65", "66", "81", "82", "84",
        "86", "90", "91", "92", "93", "94", "95", "98",
    ]
}
